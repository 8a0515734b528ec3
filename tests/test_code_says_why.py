"""The code carries no results and no history: no dates, no citations of the benchmark pages,
no measured figures in comments or docstrings (figures live on the results page, rendered from
the benches' JSON)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("actors", "cache", "cli", "config", "devices", "domain", "etr", "fleet")
PACKAGES += ("kernels", "ops", "placement", "planner", "serve_app")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
#: How a measurement reads in prose: "3x faster", "took 1.2 s", "~30 us", "2000 requests/s".
MEASURED = re.compile(
    r"\b\d[\d.]*x (faster|slower)\b|\btook ~?\d|~\d[\d.,]*\s?(ms|us|s)\b"
    r"|\b\d[\d.,]*\s?(requests|rounds|req)/s\b"
)


def sources() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def test_no_module_carries_a_date_or_cites_the_notebook():
    found = []
    for path in sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if DATE.search(line) or "benchmarks.md" in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line of ``path``."""
    import ast
    import io
    import tokenize

    text = path.read_text()
    out = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out += [(value.lineno + k, line) for k, line in enumerate(value.value.splitlines())]
    return out


def test_no_comment_or_docstring_carries_a_measured_figure():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources()
        for number, line in _prose(path)
        if MEASURED.search(line)
    ]
    assert found == []
