"""This process's connection to a Ray cluster, shared by the driver and the candidate's probe; it imports nothing
else of the cluster's.

Ray is an optional dependency (the ``cluster`` extra), so it is imported here, in functions, and only when a cluster
is asked for: :func:`require_ray` says what to install when it is missing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from runner.cluster import NAMESPACE, SANDBOX_RESOURCE
from runner.cluster.model import ClusterError

RAY_MISSING = "the ray backend needs Ray: pip install 'ispm-enterprise-sql[cluster]'"
"""What a user is told when the ``ray`` backend is asked for without Ray installed."""


def require_ray() -> ModuleType:
    """The ``ray`` module.

    Raises:
        ClusterError: Ray is not installed (:data:`RAY_MISSING`).
    """
    try:
        import ray  # optional: the cluster extra
    except ImportError as exc:
        raise ClusterError(RAY_MISSING) from exc
    return ray


def connect(address: str | None) -> None:
    """Connect this process to the cluster at ``address``.

    Raises:
        ClusterError: no address, Ray is not installed, or the cluster is unreachable.
    """
    ray = require_ray()
    if not address:
        raise ClusterError("no Ray cluster: give --ray-address or set RAY_ADDRESS")
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}") from exc


@contextmanager
def connected(address: str | None) -> Iterator[None]:
    """This process connected to the cluster at ``address`` for the block (left as is if it already was).

    Raises:
        ClusterError: no address, Ray is not installed, or the cluster is unreachable.
    """
    ray = require_ray()
    if ray.is_initialized():
        yield
        return
    connect(address)
    try:
        yield
    finally:
        ray.shutdown()


def sandbox_nodes() -> list[str]:
    """The ids of the live nodes that advertise ``ispm_sandbox``, in a stable order."""
    ray = require_ray()
    return sorted(
        n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SANDBOX_RESOURCE, 0) > 0
    )


def first_line(exc: BaseException, limit: int = 300) -> str:
    """What went wrong, in one line of at most ``limit`` characters: a Ray task's own exception rather than Ray's
    wrapping of it, and the exception's type when it has no message."""
    cause = getattr(exc, "cause", None)
    text = str(cause if isinstance(cause, BaseException) else exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__
