"""The front door: every shell and Python block of README.md and the docs pages runs verbatim.

Blocks are taken in order. A block may be preceded by ``<!-- readme-test: KIND -->``:
``ci`` (install and test commands: ``.ci/run`` must run exactly these lines), ``server``
(``orml serve``: started once here, in the repository, for the blocks after it), or
``skip: REASON`` (run elsewhere, the reason says where). Every other block runs, shell blocks
with ``bash -euo pipefail`` and Python blocks with this interpreter, in a scratch directory that
links the repository's inputs (``LINKED``), with ``orml serve`` answering on the README's ports.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.orml_serve import orml_serve as running

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FENCE = re.compile(
    r"(?:<!-- readme-test: (?P<kind>[^>]*?) -->\n)?```(?P<lang>bash|python)\n(?P<code>.*?)```",
    re.S,
)


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    kind: str  # "run", "ci", "server", "skip: ..."
    code: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


#: The pages whose blocks run: the README, then every page of the docs (in name order).
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def readme_blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        text = (ROOT / page).read_text()
        blocks += [
            Block(
                page, text.count("\n", 0, m.start()) + 1, m["lang"], m["kind"] or "run", m["code"]
            )
            for m in FENCE.finditer(text)
        ]
    return blocks


BLOCKS = readme_blocks()
#: What the README's commands read relative to the working directory, linked in from the repo.
LINKED = ("data", "examples", "profiles", "deploy.yaml", "deploy", "models")
RUN = [b for b in BLOCKS if b.kind == "run"]


def test_every_block_is_run_or_says_where_it_is_run():
    kinds = {b.kind.split(":")[0] for b in BLOCKS}
    assert kinds <= {"run", "ci", "server", "skip"}, kinds
    assert all(len(b.kind) > len("skip: ") for b in BLOCKS if b.kind.startswith("skip"))
    assert [b.code.strip() for b in BLOCKS if b.kind == "server"] == ["orml serve"]
    assert len(RUN) >= 10


def test_the_install_and_test_commands_are_what_ci_runs():
    ci = (ROOT / ".ci/run").read_text().splitlines()
    for block in (b for b in BLOCKS if b.kind == "ci"):
        for line in block.code.strip().splitlines():
            assert line.strip() in ci, f"{block}: {line!r} is not a line of .ci/run"


@pytest.fixture(scope="module")
def orml_serve(tmp_path_factory: pytest.TempPathFactory):
    from ops.ports import check_ports_free

    try:
        check_ports_free({"HTTP": 8000, "gRPC": 9000})  # the README's ports
    except RuntimeError as e:
        pytest.fail(f"{e}. Is the Quick start's `orml serve` still running? Stop it (Ctrl-C).")
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    with running(["bash", "-c", "exec orml serve"], env, log):
        yield env


@pytest.mark.serve
@pytest.mark.parametrize("block", RUN, ids=str)
def test_readme_block_runs_verbatim(block: Block, orml_serve, tmp_path):
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    cmd = ["bash", "-euo", "pipefail", "-c", block.code]
    if block.lang == "python":
        cmd = [sys.executable, "-c", block.code]
    got = subprocess.run(
        cmd, cwd=tmp_path, env=orml_serve, capture_output=True, text=True, timeout=300
    )
    assert got.returncode == 0, f"{block} failed:\n{got.stdout[-2000:]}\n{got.stderr[-4000:]}"
