"""The folders are the architecture: imports flow one way and never in a circle.

ops (tooling) -> serve_app -> actors -> planner / kernels / etr / cache -> domain; the pipeline
and the scheduling logic load no Ray, FastAPI or gRPC. Every import counts, including those
inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    *("domain", "kernels", "planner", "etr", "cache", "config", "devices"),
    *("actors", "serve_app", "placement", "fleet", "ops", "cli"),
)
#: What each package may import from the others (its own modules always).
ALLOWED = {
    "domain": set(),
    "config": set(),
    "kernels": {"domain"},  # the backend and its thresholds come as arguments
    "planner": {"domain", "kernels", "config"},
    "cache": {"config"},
    # Device knowledge (GPU catalogue, profiles) sits below what sizes and emulates devices.
    "devices": {"config"},
    "etr": {"domain", "kernels", "config", "devices"},
    # Placement plans from device knowledge, beside the app, off the request path.
    "placement": {"domain", "kernels", "planner", "etr", "config", "devices"},
    "actors": {"domain", "kernels", "planner", "etr", "cache", "config", "devices"},
    "serve_app": {"domain", "kernels", "planner", "etr", "cache", "config", "actors"},
    # The fleet simulator drives the app's own policy objects (scheduling, the admission lanes
    # of the transport-free pipeline) and the packer on a simulated clock.
    "fleet": {"domain", "config", "devices", "planner", "placement", "actors", "serve_app"},
    # Operator tooling sits above the server: it starts, drives and measures it.
    "ops": {"domain", "kernels", "planner", "etr", "cache", "config", "devices", "actors"}
    | {"serve_app", "placement"},
    "cli": set(PACKAGES) - {"cli"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """First-party modules ``path`` imports, anywhere in the file, as module names."""
    tree = ast.parse(path.read_text())
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            # ``from pkg import mod`` depends on pkg.mod; ``from mod import name`` on mod.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            # Every module loads its own package's __init__ first: that is Python, not a cycle.
            if name and name != me and not me.startswith(f"{name}."):
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "_pb2" not in p.name]
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) for p in files}


def test_no_module_imports_a_package_above_it():
    bad = [
        f"{mod} -> {dep}"
        for mod, deps in graph().items()
        for dep in deps
        if dep.split(".")[0] != mod.split(".")[0]
        and dep.split(".")[0] not in ALLOWED[mod.split(".")[0]]
    ]
    assert not bad, bad


def test_there_are_no_import_cycles():
    g = graph()
    # Tarjan's strongly connected components; a component of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in g.get(v, ()):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in g:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def test_the_pipeline_and_the_scheduling_logic_load_no_ray_fastapi_or_grpc():
    code = (
        "import sys, serve_app.pipeline, actors.scheduling\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'ray', 'fastapi', 'starlette', 'grpc'}\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_the_fleet_simulator_runs_the_policies_without_ray():
    """``fleet`` may import ``actors`` only for its pure scheduling objects and ``serve_app``
    only for its transport-free pipeline (the admission lanes): a simulated day starts no Ray,
    and loads none of the deployments and nothing of the ingress."""
    code = (
        "import sys, fleet.day, fleet.report\n"
        "heavy = {m.split('.')[0] for m in sys.modules} & {'ray', 'fastapi', 'starlette', 'grpc'}\n"
        "deployments = {m for m in sys.modules if m.startswith('actors.')\n"
        "               and not m.startswith('actors.scheduling')}\n"
        "app = {m for m in sys.modules if m.startswith('serve_app.')\n"
        "       and not m.startswith('serve_app.pipeline')}\n"
        "assert not heavy and not deployments and not app, (heavy, deployments, app)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_only_config_reads_the_environment():
    """Settings are read in one place (``config``); ``ops.local`` writes the environment of the
    Ray processes it starts (and restores what it changed), which is not reading a setting."""
    read = re.compile(r"os\.getenv\(|os\.environ\.get\(|os\.environ\[[^\]]+\](?!\s*=)")
    allowed = {ROOT / "ops" / "local.py"}
    bad = [
        f"{path.relative_to(ROOT)}:{n}"
        for pkg in PACKAGES
        if pkg != "config"
        for path in (ROOT / pkg).rglob("*.py")
        if path not in allowed
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if read.search(line)
    ]
    assert not bad, bad


def test_the_pipeline_loads_only_the_floors_below_it_and_its_own_modules():
    """``serve_app.pipeline`` reaches ``domain``, ``kernels``, ``planner``, ``etr`` and ``cache``
    and nothing else of ours: not the app's config, not the deployments, not Serve."""
    code = (
        "import sys, serve_app.pipeline\n"
        "ours = {'domain', 'kernels', 'planner', 'etr', 'cache', 'config', 'devices', 'actors',\n"
        "        'serve_app', 'placement', 'ops', 'cli'}\n"
        "loaded = {m for m in sys.modules if m.split('.')[0] in ours}\n"
        "outside = {m for m in loaded if m.split('.')[0] not in\n"
        "           {'domain', 'kernels', 'planner', 'etr', 'cache', 'serve_app'}}\n"
        "app = {m for m in loaded if m.startswith('serve_app.') and\n"
        "       not m.startswith('serve_app.pipeline')}\n"
        "assert not outside and not app, sorted(outside | app)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_no_class_name_is_defined_in_two_modules():
    """A name says what a thing is: two classes (or type aliases) of one name in the product
    are two things a reader confuses (the fleet's simulated replica and the packer's planned
    one, say)."""
    from collections import defaultdict

    root = ROOT
    where: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text()
            names = re.findall(r"(?m)^class (\w+)", text)
            names += re.findall(r"(?m)^([A-Z][a-z]\w*) = ", text)  # type aliases
            for name in names:
                where[name].append(str(path.relative_to(root)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert twice == {}


def test_the_request_paths_packages_state_their_public_names():
    """serve_app, actors and placement say what they offer (``__all__``), and each name is
    there: imported on first use (the pipeline still loads without Ray, above)."""
    import importlib

    for package in ("serve_app", "actors", "placement"):
        module = importlib.import_module(package)
        assert module.__all__, package
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{package}.{name}"


def test_one_router_one_round_source_one_statement_of_the_rules():
    """The edge's single ways in: every HTTP route answered by ``serve_app/http/router.py`` (the
    app's own routes are the documentation's only); every dispatch request made into the one
    ``RoundSource``; the domain's number rules read from ``domain/rules.py`` by both the types
    and the packer's columns."""
    from serve_app.app import documentation_app
    from serve_app.http.routes import DOC_PATHS

    app = documentation_app()
    served = {getattr(r, "path", "") for r in app.routes}
    assert served <= DOC_PATHS | {"/docs/oauth2-redirect", "/static-offline-docs"}, served
    handlers = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "serve_app").rglob("*.py")
        if "getattr(endpoints, r.handler)" in path.read_text()
    ]
    # the router calls them; the OpenAPI document reads their annotations
    assert sorted(handlers) == ["serve_app/http/openapi.py", "serve_app/http/router.py"]
    sources = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "serve_app").rglob("*.py")
        if re.search(r"(?m)^class \w*Source\b", path.read_text())
    ]
    assert sources == ["serve_app/pipeline/round_source.py"]
    # (that the columns apply every rule of it: tests/planner/test_rider_columns.py)
    for module in ("domain/types.py", "domain/geo.py", "planner/rider_columns.py"):
        assert "from domain.rules import" in (ROOT / module).read_text(), module
