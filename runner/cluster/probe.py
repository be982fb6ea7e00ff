"""Preflight of the candidate on the cluster: each sandbox node probes it once with its own provider key.

On the ``ray`` backend the candidate's key lives on the nodes, whose gateways spend it; the driver may not hold it
at all. So the candidate is probed where it will be used, on every node, and the nodes that reach it must agree on
the model id the provider returns. A node whose probe fails does not stop the run: the run leaves it out when it
checks its nodes (probed again there, once per key and endpoint the nodes reach it with, as for one that joins
mid-run). The judges run on the driver and are probed there as always.
"""

from __future__ import annotations

from runner import log
from runner.cluster import SANDBOX_RESOURCE
from runner.cluster.connection import connected, require_ray, sandbox_nodes
from runner.cluster.model import ClusterError
from runner.gateway.preflight import PreflightError, ResolvedModel, preflight

_log = log.get(__name__)

_PROBE_SHARE = 0.001
"""The slice of an ``ispm_sandbox`` unit a probe asks for: enough to land only on a sandbox node."""


def probe_here(candidate: str) -> ResolvedModel:
    """Probe ``candidate`` from this node with this node's key (runs as a Ray task).

    Raises:
        PreflightError: the node has no key for it, or the provider does not answer.
    """
    (resolved,) = preflight([candidate])
    return resolved


def probe_candidate(address: str | None, candidate: str) -> ResolvedModel:
    """Probe ``candidate`` on every sandbox node of the cluster at ``address``; the common answer of the nodes that
    reached it. A node whose probe failed is named in a warning: the run will leave it out.

    Raises:
        ClusterError: no address, the cluster is unreachable, or it has no sandbox node.
        PreflightError: every node's probe failed (each node named), or the nodes' providers returned different
            model ids.
    """
    ray = require_ray()
    # Function-local: Ray is optional (the cluster extra), and require_ray has just said it is installed.
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    with connected(address):
        nodes = sandbox_nodes()
        if not nodes:
            raise ClusterError(f"no node of the cluster advertises {SANDBOX_RESOURCE} (ray start --resources ...)")
        task = ray.remote(probe_here)
        refs = {
            n: task.options(
                num_cpus=0,
                resources={SANDBOX_RESOURCE: _PROBE_SHARE},
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False),
            ).remote(candidate)
            for n in nodes
        }
        answers: dict[str, ResolvedModel] = {}
        problems: list[str] = []
        for node, ref in refs.items():
            try:
                answers[node] = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if isinstance(exc.cause, PreflightError) else None
                reasons = cause.problems if cause is not None else [str(exc).splitlines()[0]]
                problems += [f"node {node[:12]}: {r}" for r in reasons]
    if not answers:
        raise PreflightError(problems)
    if problems:
        _log.warning("cluster.probe_failed", candidate=candidate, problems=problems)
    returned = {a.returned_model for a in answers.values()}
    if len(returned) != 1:
        raise PreflightError(
            [f"the nodes' providers returned different models for {candidate}: {sorted(map(str, returned))}"]
        )
    return next(iter(answers.values()))
