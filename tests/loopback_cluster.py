"""The tests' name for :mod:`runner.cluster.loopback` (``conftest`` imports it before anything imports Ray)."""

from runner.cluster.loopback import (
    CLUSTER_ENVIRONMENT,
    LOOPBACK,
    NOWHERE,
    environment,
    loopback_cluster,
)

__all__ = ["CLUSTER_ENVIRONMENT", "LOOPBACK", "NOWHERE", "environment", "loopback_cluster"]
