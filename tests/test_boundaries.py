"""Stage boundaries, as the README's layout table draws them: only ``runner/sandbox/`` knows Docker, only
``runner/gateway/`` speaks HTTP, the models that cross a stage boundary load neither, and no two packages import each
other.

Each stage is imported in a fresh interpreter (every module of it), and the test looks at which packages that
pulled in. A second test reads every module's imports, function-level ones included, so a lazy import cannot hide a
leak either. A third reads the same imports (function-level and ``TYPE_CHECKING`` ones alike) as a graph of the
project's modules and finds every circle in it; a fourth folds that graph into one of the packages of ``runner/``
(each subpackage, and each top-level module on its own) and finds every circle there: a package may not import
another that imports it back, directly or around a loop.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parent.parent / "runner"
DOCKER = frozenset({"docker"})
HTTP = frozenset({"httpx", "requests", "urllib3", "aiohttp"})

# The one module outside runner/gateway/ that may speak HTTP: the submitter's client of the board's own API (it
# calls no model provider). Nothing else may be added.
BOARD_CLIENT = "board/client.py"

STAGES: dict[str, frozenset[str]] = {
    "runner.world": DOCKER | HTTP,
    "runner.tasks": DOCKER | HTTP,
    "runner.grading": DOCKER,  # the model judges reach their providers through runner.gateway
    "runner.record": DOCKER,
    "runner.trace": DOCKER | HTTP,
    "runner.transcript": DOCKER | HTTP,
    "runner.gateway": DOCKER,
    "runner.sandbox": HTTP - {"requests", "urllib3"},  # the Docker SDK's own transport
}
"""Each stage, all of its modules imported, and the packages it must not pull in."""

MODELS = (
    "runner.call",
    "runner.contract",
    "runner.tasks.model",
    "runner.gateway.model",
    "runner.grading.model",
    "runner.run.model",
    "runner.run.spec",
    "runner.run.journal",
    "runner.transcript.model",
    "runner.record.model",
)
"""The models that cross a stage boundary: importing them loads neither Docker nor an HTTP client."""


def loaded_packages(*modules: str, walk: bool) -> set[str]:
    """Top-level packages in ``sys.modules`` after importing ``modules`` (and, with ``walk``, all under them)."""
    script = f"""
import importlib, json, pkgutil, sys
for name in {list(modules)!r}:
    module = importlib.import_module(name)
    if {walk!r} and hasattr(module, "__path__"):
        for found in pkgutil.walk_packages(module.__path__, name + "."):
            if not found.name.endswith("__main__"):
                importlib.import_module(found.name)
print(json.dumps(sorted({{key.split(".")[0] for key in sys.modules}})))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stage_pulls_in_only_what_it_may(stage: str) -> None:
    assert loaded_packages(stage, walk=True) & STAGES[stage] == set()


def test_the_models_that_cross_stages_load_no_docker_and_no_http_client() -> None:
    loaded = loaded_packages(*MODELS, walk=False)
    assert "pydantic" in loaded  # the probe itself works
    assert loaded & (DOCKER | HTTP) == set()


def direct_imports(path: Path) -> set[str]:
    """Top-level names of every package ``path`` imports, at any depth of its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def banned_for(where: str) -> frozenset[str]:
    """What the module at ``where`` (relative to runner/) must not import."""
    if where.startswith("sandbox/"):
        return HTTP - {"requests", "urllib3"}
    if where.startswith("gateway/"):
        return DOCKER
    if where == BOARD_CLIENT:
        return DOCKER
    return DOCKER | HTTP


def test_only_the_sandbox_imports_docker_and_only_the_gateway_speaks_http() -> None:
    leaks: dict[str, set[str]] = {}
    for path in sorted(RUNNER.rglob("*.py")):
        where = path.relative_to(RUNNER).as_posix()
        leak = direct_imports(path) & banned_for(where)
        if leak:
            leaks[where] = leak
    assert leaks == {}


def runner_imports(path: Path) -> set[str]:
    """The ``runner.<stage>`` modules ``path`` imports, at any depth of its code (``runner.run``, ``runner.pipeline``…)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found |= {".".join(n.split(".")[:2]) for n in names if n.startswith("runner.")}
    return found


def test_a_run_and_its_record_meet_only_in_the_pipeline() -> None:
    """The run stage never builds a record, and the record stage never starts a run: runner.pipeline joins them."""
    crossing = {
        path.relative_to(RUNNER).as_posix(): runner_imports(path) & {"runner.record", "runner.pipeline"}
        for path in sorted((RUNNER / "run").rglob("*.py"))
    } | {
        path.relative_to(RUNNER).as_posix(): runner_imports(path) & {"runner.pipeline"}
        for path in sorted((RUNNER / "record").rglob("*.py"))
    }
    assert {where: found for where, found in crossing.items() if found} == {}
    assert {"runner.run", "runner.record"} <= runner_imports(RUNNER / "pipeline.py")


def module_name(path: Path, root: Path = RUNNER) -> str:
    """The dotted name of the runner module at ``path`` (a package is its ``__init__``), ``root`` being ``runner/``."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(path: Path, modules: frozenset[str]) -> set[str]:
    """The project modules ``path`` imports anywhere in its code: ``from runner.x import y`` counts as importing
    ``runner.x.y`` when that is a module, else ``runner.x``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names
            }
    return found & modules


def import_graph(root: Path = RUNNER) -> dict[str, set[str]]:
    """Every runner module and the runner modules it imports (itself left out); ``root`` is ``runner/``."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    modules = frozenset(paths)
    return {name: project_imports(path, modules) - {name} for name, path in paths.items()}


def package_of(module: str) -> str:
    """The package of ``runner/`` a module belongs to: ``runner.gateway.protocols.chat`` is in ``runner.gateway``;
    a top-level module (``runner.contract``) is its own; ``runner`` itself is ``runner``."""
    return ".".join(module.split(".")[:2])


def package_graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph of ``modules`` folded into packages: which packages each package imports (itself left out)."""
    packages: dict[str, set[str]] = {}
    for module, imported in modules.items():
        mine = package_of(module)
        packages.setdefault(mine, set()).update(package_of(m) for m in imported)
    return {package: imported - {package} for package, imported in packages.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of each import circle in ``graph``, sorted: its strongly connected parts of more than one module
    (Tarjan's algorithm, iterative: no recursion limit to meet)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in order:
            continue
        walk = [(root, iter(sorted(graph[root])))]
        order[root] = low[root] = len(order)
        stack.append(root)
        while walk:
            node, onward = walk[-1]
            step = next((n for n in onward if n not in order or n in stack), None)
            if step is not None and step not in order:
                order[step] = low[step] = len(order)
                stack.append(step)
                walk.append((step, iter(sorted(graph[step]))))
                continue
            if step is not None:
                low[node] = min(low[node], order[step])
                continue
            walk.pop()
            if walk:
                low[walk[-1][0]] = min(low[walk[-1][0]], low[node])
            if low[node] == order[node]:
                part = stack[stack.index(node) :]
                del stack[stack.index(node) :]
                if len(part) > 1:
                    found.append(sorted(part))
    return sorted(found)


def test_the_circle_finder_names_every_module_of_each_circle_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert circles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_no_runner_module_imports_itself_back_through_others() -> None:
    assert circles(import_graph()) == []


def test_no_package_of_runner_imports_another_that_imports_it_back() -> None:
    assert circles(package_graph(import_graph())) == []


def test_a_cycle_planted_between_two_packages_is_found(tmp_path: Path) -> None:
    """A copy of ``runner/`` with one lazy import planted from the transcript's write side into the trace's read side,
    which imports it: the package check names both packages; the module check alone would not have."""
    copy = tmp_path / "runner"
    shutil.copytree(RUNNER, copy, ignore=shutil.ignore_patterns("__pycache__", "templates", "rubrics"))
    planted = copy / "transcript" / "capture.py"
    planted.write_text(planted.read_text() + "\n\ndef _planted() -> None:\n    from runner.trace import text  # noqa\n")
    graph = import_graph(copy)
    assert circles(graph) == []  # no module imports itself back: only the packages do
    found = circles(package_graph(graph))
    assert len(found) == 1 and {"runner.transcript", "runner.trace"} <= set(found[0])
