"""The tests' name for :mod:`runner.cluster.loopback` (``conftest`` imports it before anything imports Ray), with the
check lane's guard: a test that starts a cluster is marked ``ray`` (tests/lanes.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from lanes import needs

from runner.cluster import loopback
from runner.cluster.loopback import CLUSTER_ENVIRONMENT, LOOPBACK, NOWHERE, environment

__all__ = ["CLUSTER_ENVIRONMENT", "LOOPBACK", "NOWHERE", "environment", "loopback_cluster"]


@contextmanager
def loopback_cluster(
    workers: int, units: int, env: Mapping[str, str | None] | None = None
) -> Iterator[tuple[Any, list[Any]]]:
    """:func:`runner.cluster.loopback.loopback_cluster`, refused in the check lane."""
    needs("a Ray cluster", "ray")
    with loopback.loopback_cluster(workers, units, env) as started:
        yield started
