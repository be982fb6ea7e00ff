"""The driver's side of a cluster run: connect, check every sandbox node, ship images, run samples with retries.

:class:`RayRunner` is a :class:`runner.run.scheduler.SampleRunner`: the scheduler's worker threads call
:meth:`RayRunner.run_sample`, which submits one Ray task needing one ``ispm_sandbox`` unit and waits for it.
Grading, judges, the journal and the record stay on the driver.

**Faults.** An attempt whose node or worker dies, or that outlives the sample limit by :data:`GRACE_S`, is lost:
it is noted (with its node) and the sample runs again on whatever node Ray picks, up to ``max_attempts``; the
result kept is the first one that comes back, so a sample is journaled once. A node sweeps only its own host's
orphans: at its check, and when the run closes.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner import log
from runner.cluster import NAMESPACE, SANDBOX_RESOURCE, agent_name
from runner.cluster.model import ClusterError, NodeCheck, NodeExpectations, NodeResult
from runner.cluster.node import NodeAgent
from runner.cluster.sample import run_on_node
from runner.contract import SampleOutput
from runner.run.journal import SampleAttempt
from runner.run.scheduler import RanSample
from runner.sandbox.backend import SampleSpec
from runner.sandbox.transfer import CHUNK_BYTES, save_chunks

_log = log.get(__name__)

GRACE_S = 60.0
"""How long past its sample limit the driver waits for an attempt before counting it lost (the node enforces the
limit itself; this only covers a node that stopped answering without dying)."""
MAX_ATTEMPTS = 3
_POLL_S = 0.5


def sandbox_nodes() -> list[str]:
    """The ids of the live nodes that advertise ``ispm_sandbox``, in a stable order."""
    import ray

    return sorted(
        n["NodeID"]
        for n in ray.nodes()  # type: ignore[no-untyped-call]
        if n.get("Alive") and n.get("Resources", {}).get(SANDBOX_RESOURCE, 0) > 0
    )


@contextmanager
def connected(address: str | None) -> Iterator[None]:
    """This process connected to the cluster at ``address`` for the block (left as is if it already was).

    Raises:
        ClusterError: no address, Ray is not installed, or the cluster is unreachable.
    """
    try:
        import ray
    except ImportError as exc:
        raise ClusterError("the ray backend needs Ray: pip install 'ispm-enterprise-sql[cluster]'") from exc
    if ray.is_initialized():
        yield
        return
    _connect(address)
    try:
        yield
    finally:
        ray.shutdown()


def _connect(address: str | None) -> None:
    import ray

    if not address:
        raise ClusterError("no Ray cluster: give --ray-address or set RAY_ADDRESS")
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}") from exc


class RayRunner:
    """Runs a run's samples on a Ray cluster. Use :meth:`connect`, then as a context manager or :meth:`close`."""

    def __init__(
        self,
        run_id: str,
        expected: NodeExpectations,
        *,
        candidate: str | None,
        max_attempts: int = MAX_ATTEMPTS,
        owns_connection: bool = False,
    ) -> None:
        """A runner for ``run_id`` on the cluster this process is connected to (see :meth:`connect`)."""
        import ray

        self.run_id = run_id
        self.attempt = f"{run_id}-{secrets.token_hex(3)}"
        """This start's key: it names the agents (:func:`runner.cluster.agent_name`)."""
        self.expected = expected
        self.candidate = candidate
        self.max_attempts = max_attempts
        self.agents: dict[str, Any] = {}
        """Each accepted node's agent (a Ray actor handle), by node id."""
        self.checks: dict[str, NodeCheck] = {}
        self._owns_connection = owns_connection
        self._stopping = threading.Event()
        self._task = ray.remote(run_on_node).options(
            num_cpus=0, resources={SANDBOX_RESOURCE: 1}, max_retries=0, retry_exceptions=False
        )

    @classmethod
    def connect(
        cls, address: str | None, run_id: str, expected: NodeExpectations, *, candidate: str | None
    ) -> RayRunner:
        """Connect to the cluster at ``address`` (unless this process already is), check every sandbox node,
        ship the images a node lacks, and return a runner whose every node is accepted.

        Raises:
            ClusterError: no address, the cluster is unreachable, it has no ``ispm_sandbox`` node, or a node was
                refused (each reason named).
        """
        try:
            import ray
        except ImportError as exc:
            raise ClusterError("the ray backend needs Ray: pip install 'ispm-enterprise-sql[cluster]'") from exc

        owns = not ray.is_initialized()
        if owns:
            _connect(address)
        runner = cls(run_id, expected, candidate=candidate, owns_connection=owns)
        try:
            runner.admit_nodes()
        except BaseException:
            runner.close()
            raise
        return runner

    # -- nodes -----------------------------------------------------------------------------------------------

    def admit_nodes(self) -> None:
        """Start an agent on every sandbox node, check it, ship what it lacks, and keep those that pass.

        Raises:
            ClusterError: no sandbox node, or any node refused (the run does not start on a mixed cluster).
        """
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = sandbox_nodes()
        if not nodes:
            raise ClusterError(f"no node of the cluster advertises {SANDBOX_RESOURCE} (ray start --resources ...)")
        actor = ray.remote(NodeAgent)
        for node in nodes:
            self.agents[node] = actor.options(
                name=agent_name(self.attempt, node),
                namespace=NAMESPACE,
                num_cpus=0,
                max_concurrency=64,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.candidate)
        self.checks = dict(
            zip(nodes, ray.get([a.check.remote(self.expected) for a in self.agents.values()]), strict=True)
        )
        refused = [r for c in self.checks.values() for r in c.refusals(self.expected)]
        if refused:
            raise ClusterError("a cluster node was refused", refused)
        lacking = {n: c.missing(self.expected) for n, c in self.checks.items() if c.missing(self.expected)}
        if lacking:
            self._ship(lacking)
            rechecked = ray.get([self.agents[n].check.remote(self.expected) for n in lacking])
            self.checks.update(zip(lacking, rechecked, strict=True))
            still = [r for n in lacking for r in self.checks[n].refusals(self.expected)]
            still += [
                f"node {n[:12]}: image {t} is still missing after loading it"
                for n in lacking
                for t in self.checks[n].missing(self.expected)
            ]
            if still:
                raise ClusterError("a cluster node was refused after images were shipped", still)
        _log.info("cluster.nodes_admitted", run=self.run_id, nodes={n: c.host for n, c in self.checks.items()})

    def _ship(self, lacking: dict[str, list[str]]) -> None:
        import ray

        from runner.sandbox.docker import connect

        client = connect()
        try:
            for tag in sorted({t for tags in lacking.values() for t in tags}):
                started = time.perf_counter()
                # Saved once, loaded by every node that lacks it; the pieces leave the object store with the refs.
                chunks = stage_image(client, tag)
                ray.get([self.agents[n].load_image.remote(chunks) for n, tags in lacking.items() if tag in tags])
                _log.info(
                    "cluster.image_shipped", tag=tag, chunks=len(chunks), s=round(time.perf_counter() - started, 3)
                )
                del chunks
        finally:
            client.close()

    # -- samples ---------------------------------------------------------------------------------------------

    def run_sample(self, spec: SampleSpec, *, with_gateway: bool) -> RanSample:
        """Run ``spec`` on some sandbox node; an attempt lost with its node is noted and run again elsewhere.

        Never raises for the sample's own failure; when every attempt is lost the sample is a ``sandbox_error``.
        """
        import ray

        recordings = _recordings(spec) if spec.replay_dir is not None else None
        lost: list[SampleAttempt] = []
        for _ in range(self.max_attempts):
            if self._stopping.is_set():
                break
            attempt = self._task.remote(self.attempt, spec, with_gateway, recordings)
            node = "unknown"
            try:
                # However long it queues for a unit, then at most the sample limit and a grace.
                node = str(self._next(attempt, None))
                result = self._next(attempt, spec.time_limit_s + GRACE_S)
                assert isinstance(result, NodeResult)
                return RanSample(result.output, result.usage, result.node, tuple(lost))
            except (ray.exceptions.RayError, TimeoutError) as exc:
                detail = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
                _log.warning("cluster.attempt_lost", run=self.run_id, sample=spec.sample_id, node=node, error=detail)
                lost.append(SampleAttempt(node=node, outcome="lost", detail=detail))
                ray.cancel(attempt, force=True)
        error = lost[-1].detail if lost else "the run stopped before it ran"
        output = SampleOutput(
            task_id=spec.task_id, epoch=spec.epoch, status="sandbox_error", error=f"no attempt came back: {error}"
        )
        return RanSample(output, None, None, tuple(lost))

    def _next(self, attempt: Any, timeout: float | None) -> object:
        import ray

        waited = 0.0
        while True:
            ready, _ = ray.wait([attempt], timeout=_POLL_S)
            if ready:
                return ray.get(next(attempt))
            waited += _POLL_S
            if self._stopping.is_set():
                raise TimeoutError("the run stopped")
            if timeout is not None and waited >= timeout:
                raise TimeoutError(f"no result {timeout:.0f} s after it started")

    # -- the end ---------------------------------------------------------------------------------------------

    def sweep(self, run_id: str) -> None:
        """Stop waiting for attempts and remove every sandbox resource of ``run_id`` on every node."""
        self._stopping.set()
        self._each_node(lambda a: a.sweep.remote(run_id, orphans_only=False))

    def close(self) -> None:
        """Sweep this run's orphans on every live node, stop the agents and their gateways, disconnect."""
        import ray

        self._each_node(lambda a: a.sweep.remote(self.run_id, orphans_only=True))
        self._each_node(lambda a: a.close.remote())
        for agent in self.agents.values():
            ray.kill(agent)
        self.agents.clear()
        if self._owns_connection:
            ray.shutdown()

    def _each_node(self, call: Callable[[Any], Any]) -> None:
        import ray

        for node, agent in self.agents.items():
            try:
                ray.get(call(agent), timeout=120)
            except ray.exceptions.RayError as exc:  # a dead node sweeps its own host when it comes back
                _log.warning("cluster.node_unreachable", node=node, error=str(exc).splitlines()[0][:200])

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stage_image(client: Any, tag: str, chunk_bytes: int = CHUNK_BYTES) -> list[Any]:
    """Put the ``docker save`` stream of ``tag`` into the object store, piece by piece; the object refs in order."""
    import ray

    return [ray.put(piece) for piece in save_chunks(client, tag, chunk_bytes)]


def _recordings(spec: SampleSpec) -> dict[str, str]:
    # Only this sample's gold recording travels with it: the replay agent reads /replay/<task>.json.
    assert spec.replay_dir is not None
    path = Path(spec.replay_dir) / f"{spec.task_id}.json"
    return {path.name: path.read_text(encoding="utf-8")}
