"""This process's connection to a Ray cluster, shared by the driver and the candidate's probe; it imports nothing
else of the cluster's.

Ray is an optional dependency (the ``cluster`` extra), so it is imported here, in functions, and only when a cluster
is asked for: :func:`require_ray` says what to install when it is missing.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from runner.cluster import NAMESPACE, SANDBOX_RESOURCE
from runner.cluster.model import ClusterError

DRIVER_OUTLIVES_HEAD_S = 600
"""How long this process may go on once the head's GCS stops answering. Ray's own default ends the driver's process
after 60 s (``gcs_rpc_server_reconnect_timeout_s``), a kill -9 in effect; the driver stops the run itself well
before (``runner.cluster.driver.HEAD_GONE_S``), in its own words."""
HEAD_ANSWER_S = 2.0
"""How long the head's GCS port has to accept a connection before it counts as not answering."""

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
    # Read when the driver's Ray core starts, at ray.init.
    os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", str(DRIVER_OUTLIVES_HEAD_S))
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


def head_address() -> str:
    """The ``host:port`` of the head's GCS this process is connected to."""
    ray = require_ray()
    return str(ray.get_runtime_context().gcs_address)


def head_fault(address: str, timeout_s: float = HEAD_ANSWER_S) -> str | None:
    """Why the head's GCS at ``address`` (``host:port``) does not answer; ``None`` when it accepts a connection.

    A plain TCP connection, not a Ray call: every Ray call that needs the GCS waits for it for minutes."""
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__
    return None
