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


def test_a_try_lost_before_it_said_where_it_ran_is_put_on_the_node_ray_placed_it_on() -> None:
    from ray.exceptions import NodeDiedError, WorkerCrashedError

    from runner.cluster.driver import placed_on

    node = "5e" * 28
    # Ray 2.60's words (src/ray/core_worker), as a task on a dead node fails with them.
    died = NodeDiedError(
        "Task failed because the node it was running on is dead or unavailable. Node IP: 127.0.0.1, node ID: "
        f"{node}. This can happen if the node was preempted, had a hardware failure, or its raylet crashed "
        f"unexpectedly. To see node death information, use `ray list nodes --filter node_id={node}`, check the Ray "
        "dashboard cluster page, search the node ID in the GCS logs, or use `ray logs raylet.out -ip 127.0.0.1`."
    )
    assert placed_on(died) == node
    assert placed_on(WorkerCrashedError()) is None  # says nothing of where: the record says so
