"""The Ray task that runs one sample on the node it lands on, with today's ``DockerBackend`` and its lockdown.

It is a streaming generator: it yields its node id first, so the driver knows where a try ran even when
the node dies before the result, and then the :class:`~runner.cluster.model.NodeResult`.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from runner.cluster import NAMESPACE, agent_name
from runner.cluster.model import NodeEngineFailed, NodeRefused, NodeResult
from runner.contract import SampleOutput
from runner.errors import SandboxError
from runner.paths import world_dir
from runner.sandbox.backend import SampleSpec
from runner.sandbox.docker import DockerBackend, engine_fault, engine_id
from runner.world import DOCS_DIR, SNAPSHOT_NAME

_backend: DockerBackend | None = None
_agents: dict[str, Any] = {}
"""This node's accepted agent, by its name (run and attempt)."""


def _docker() -> DockerBackend:
    # One engine connection per Ray worker process, reused by the samples it runs one after another.
    global _backend
    if _backend is None:
        # The node's agent swept this host's orphans when it was checked.
        _backend = DockerBackend(sweep_on_start=False)
    return _backend


def _accepted_agent(run_id: str, attempt: str, node: str) -> Any:
    # A worker process runs many samples of a run: it asks the cluster for its node's agent once, and an accepted
    # node stays accepted for the attempt's life.
    import ray

    name = agent_name(run_id, attempt, node)
    agent = _agents.get(name)
    if agent is not None:
        return agent
    try:
        agent = ray.get_actor(name, namespace=NAMESPACE)
    except ValueError as exc:
        raise NodeRefused(f"node {node[:12]} was not checked for run {run_id}-{attempt}") from exc
    if not ray.get(agent.is_accepted.remote()):
        raise NodeRefused(f"node {node[:12]} did not pass its checks for run {run_id}-{attempt}")
    _agents[name] = agent
    return agent


def _engine_here(node: str) -> str:
    """This node's engine id, once it answers a health check.

    Raises:
        NodeEngineFailed: the engine does not answer.
    """
    global _backend
    fault = engine_fault()
    if fault is not None:
        raise NodeEngineFailed(f"node {node[:12]}: its Docker engine failed before the sample: {fault}")
    if _backend is not None and engine_fault(_backend.client) is not None:
        # The engine answers a new connection but not this process's old ones: it came back since they were made.
        _backend.close()
        _backend = None
    try:
        return engine_id(_docker().client)
    except SandboxError as exc:
        raise NodeEngineFailed(f"node {node[:12]}: its Docker engine failed before the sample: {exc}") from exc


def _judged(node: str, output: SampleOutput) -> SampleOutput:
    """``output``, unless the sample failed and this node's engine no longer answers: then the failure is the
    node's (an engine stopped under the sample kills its container and refuses every later call), never the agent's.

    Raises:
        NodeEngineFailed: the sample did not end ``ok`` and the engine does not answer.
    """
    if output.status == "ok":
        return output
    fault = engine_fault()
    if fault is not None:
        raise NodeEngineFailed(
            f"node {node[:12]}: its Docker engine failed during the sample ({output.status}: {output.error}): {fault}"
        )
    return output


def write_replay(folder: Path, recordings: dict[str, str]) -> Path:
    """Write the shipped gold recordings (file name → text) into ``folder``, readable by the agent's uid."""
    folder.chmod(0o755)
    for name, text in recordings.items():
        path = folder / Path(name).name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
    return folder


def run_on_node(
    attempt: str, spec: SampleSpec, with_gateway: bool, recordings: dict[str, str] | None
) -> Iterator[str | NodeResult]:
    """Yield this node's id, then run ``spec`` here and yield its result.

    The world and docs mounted are this node's own (checked against the driver's digests); ``recordings`` are the
    replay agent's gold recordings for this sample, written to a scratch folder on this host.

    Raises:
        NodeRefused: this node has no accepted agent for the run's attempt ``attempt`` (the driver sends samples
            only to admitted nodes: this guards against a node it has not checked).
        NodeEngineFailed: the node's Docker engine did not answer before the sample, or stopped answering during a
            sample that failed.
        GatewayError: the node's gateway could not link the sample.
    """
    import ray

    node = str(ray.get_runtime_context().get_node_id())
    yield node
    agent = _accepted_agent(spec.run_id, attempt, node)
    engine = _engine_here(node)
    here = spec.model_copy(
        update={"world_file": world_dir() / SNAPSHOT_NAME, "docs_dir": world_dir() / DOCS_DIR, "node": node}
    )
    scratch = Path(tempfile.mkdtemp(prefix="ispm-replay-")) if recordings is not None else None
    try:
        if scratch is not None and recordings is not None:
            here = here.model_copy(update={"replay_dir": write_replay(scratch, recordings)})
        if not with_gateway:
            yield NodeResult(output=_judged(node, _docker().run_sample(here)), usage=None, node=node, engine=engine)
            return
        link = ray.get(agent.open_link.remote(spec.sample_id))
        try:
            linked = here.model_copy(
                update={
                    "gateway_socket_dir": Path(link.folder),
                    "gateway_token": SecretStr(link.token),
                    "gateway_model": link.model,
                }
            )
            output = _judged(node, _docker().run_sample(linked))
        finally:
            # Read after the link closed: revoking the token waits for the sample's requests in flight.
            usage = ray.get(agent.close_link.remote(spec.sample_id))
        transcript = ray.get(agent.take_transcript.remote(spec.sample_id, spec.run_id, spec.task_id, spec.epoch))
        yield NodeResult(output=output, usage=usage, node=node, engine=engine, transcript=transcript)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
