"""A Ray cluster on this machine's loopback, as the cluster tests and ``bench/ray.py`` start it: a head and worker
nodes, from the installed wheel. Import this module before anything imports Ray (it sets what Ray reads once).

Left to itself, Ray 2.60 gives every node the machine's interface address: the GCS, raylets, object managers and
workers listen on every address, the runtime-env agents on the interface's; and the head's API server (started even
without the dashboard, for its usage-stats module) asks cloud metadata hosts what it runs on and tells Ray's server
that usage stats are off.
Here nothing leaves loopback:

- every node is started with ``node_ip_address`` 127.0.0.1, so its gRPC servers bind 127.0.0.1, not every address;
- ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (set when this module is imported) makes Ray's "this node's address"
  loopback (``ray/_private/services.py``, ``get_node_ip_address``). Without it ``ray.init(address="127.0.0.1:P")``
  is rewritten to the interface address (``canonicalize_bootstrap_address`` → ``resolve_ip_for_localhost``), where
  a loopback GCS does not listen, and the driver waits for it forever;
- no dashboard, usage stats off, and the nodes' Python HTTP goes to a loopback port where nothing listens
  (``HTTP_PROXY``), except to loopback itself (``NO_PROXY``): that is where the API server's probes end.

``ispm run --backend ray`` itself assumes none of this: a real cluster's nodes keep their own addresses.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from runner.cluster import SANDBOX_RESOURCE

LOOPBACK = "127.0.0.1"
NOWHERE = f"http://{LOOPBACK}:9"
"""A loopback port where nothing listens (discard)."""

# Ray reads it once, when it is first imported: here, when the tests are collected, before any test imports Ray.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

CLUSTER_ENVIRONMENT: dict[str, str | None] = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "HTTP_PROXY": NOWHERE,
    "HTTPS_PROXY": NOWHERE,
    "NO_PROXY": f"{LOOPBACK},localhost,::1",
}
"""What the nodes' processes find in their environment, besides what the caller gives them."""


@contextmanager
def environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``changes`` for the block (``None`` removes a name), as it was afterwards."""
    saved = {k: os.environ.get(k) for k in changes}
    try:
        _set(changes)
        yield
    finally:
        _set(saved)


def _set(values: Mapping[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextmanager
def loopback_cluster(
    workers: int, units: int, env: Mapping[str, str | None] | None = None
) -> Iterator[tuple[Any, list[Any]]]:
    """A head with no sandbox unit and ``workers`` nodes of ``units`` ``ispm_sandbox`` units each, on loopback;
    the cluster and its worker nodes. Every node's processes take this process's environment with ``env``.

    A node declares as many CPUs as units: Ray keeps that many idle worker processes alive, so a sample does not
    pay for starting one (the samples' tasks themselves ask for no CPU). Shut down (this process disconnected
    first) when the block ends.
    """
    from ray.cluster_utils import Cluster

    with environment({**CLUSTER_ENVIRONMENT, **(env or {})}):
        _check_loopback_is_this_node()
        cluster: Any = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "node_ip_address": LOOPBACK, "include_dashboard": False},
        )
        try:
            nodes = [
                cluster.add_node(num_cpus=units, resources={SANDBOX_RESOURCE: units}, node_ip_address=LOOPBACK)
                for _ in range(workers)
            ]
            cluster.wait_for_nodes()
            yield cluster, nodes
        finally:
            import ray

            ray.shutdown()  # a caller that failed mid-run may leave this process attached
            cluster.shutdown()


def _check_loopback_is_this_node() -> None:
    # Fail at once, not with a driver waiting for a GCS at the interface address.
    from ray._private.services import canonicalize_bootstrap_address

    address = f"{LOOPBACK}:6379"
    if canonicalize_bootstrap_address(address) != address:
        raise RuntimeError(
            "Ray was imported before RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set: a driver would look for a "
            f"loopback cluster at {canonicalize_bootstrap_address(address)}; import runner.cluster.loopback first"
        )
