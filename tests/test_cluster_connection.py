"""The cluster's connection helpers that need no cluster: what a user is told without Ray, and the one line an
exception is reported in (a node's refusal, a lost try, an unreachable node)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from runner.cluster.connection import RAY_MISSING, first_line, require_ray
from runner.cluster.model import ClusterError


class WrappedError(Exception):
    """Stands in for Ray's wrapping of a task's own exception (``RayTaskError.cause``)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("ray.exceptions.RayTaskError(ValueError): traceback lines")
        self.cause = cause


def test_without_ray_the_ray_backend_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ClusterError) as raised:
        require_ray()
    assert str(raised.value) == "the ray backend needs Ray: pip install 'ispm-enterprise-sql[cluster]'" == RAY_MISSING


def test_an_exception_with_no_message_is_named_by_its_type() -> None:
    assert first_line(TimeoutError("")) == "TimeoutError"


def test_a_wrapped_exception_is_told_by_its_own_first_line() -> None:
    assert first_line(WrappedError(ValueError("the world digest differs\nsecond line"))) == "the world digest differs"


def test_the_first_line_is_cut_at_its_limit() -> None:
    assert first_line(RuntimeError("x" * 500), 200) == "x" * 200


def test_the_ray_bench_stands_on_its_own_without_the_tests() -> None:
    # bench/ray.py starts its cluster with runner.cluster.loopback: a bench that imports tests/ breaks when they move.
    root = Path(__file__).resolve().parent.parent
    tree = ast.parse((root / "bench" / "ray.py").read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    ours = {p.stem for p in (root / "tests").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert imported & ours == set()
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == "tests"]
