"""The driver's side of a cluster run: connect, check every sandbox node, ship images, run samples with retries.

:class:`RayRunner` is a :class:`runner.run.sample_runner.SampleRunner`: the scheduler's worker threads call
:meth:`RayRunner.run_sample`, which submits one Ray task needing one ``ispm_sandbox`` unit and waits for it.
Grading, judges, the journal and the record stay on the driver.

**Nodes.** A sample asks for a unit on an *admitted* node only, by the node-id label Ray gives every node
(``label_selector``), so Ray places it on any admitted node with a free unit and never elsewhere. A node that fails
a check is left out: its agent stops, and the refusal is logged and journaled (``node_left_out``) with the node and
every reason; the run goes on with the others, and does not start only when every node fails. While the run
journals, a watcher looks for nodes that joined (every :data:`WATCH_S`), checks each the same way (images shipped
first), and admits it, or leaves it out.

**Faults.** A sample's try whose node or worker dies, or that outlives the sample limit by :data:`GRACE_S`, is lost:
it is noted (with its node) and the sample runs again on whatever admitted node Ray picks, up to ``max_tries``;
the result kept is the first one that comes back, so a sample is journaled once. When no admitted node is left alive
(Ray has marked each dead), Ray refuses every try at once; such a try ran nowhere and is not counted: the
sample asks again until a node joins and is admitted. If none is within :data:`STRANDED_S`, the watcher stops the run
through its :class:`~runner.run.scheduler.StopRequest`, naming the nodes lost: it ends ``interrupted``
(``run_interrupted`` with that reason), what was graded stays journaled, and the samples cut short are not and run
again on ``ispm run --resume``. A node sweeps only its own host's orphans: at its check, and when the run closes; a
dead node's are left to the next node of its host that is checked. A stop sweeps the run's sandboxes on every node;
a hands-off stop only its own attempt's: the sample's spec carries the run's attempt id, which the node labels on
every sandbox (``ispm.attempt``); the same id names this attempt's node agents (:attr:`RayRunner.attempt`).

Ray is optional (the ``cluster`` extra): it is imported inside functions, once a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner import log
from runner.cluster import NAMESPACE, SANDBOX_RESOURCE, agent_name
from runner.cluster.connection import (
    HEAD_ANSWER_S,
    connect,
    first_line,
    head_address,
    head_fault,
    require_ray,
    sandbox_nodes,
)
from runner.cluster.model import ClusterError, NodeCheck, NodeEngineFailed, NodeExpectations, NodeResult
from runner.cluster.node import NodeAgent
from runner.cluster.sample import run_on_node
from runner.contract import SampleOutput
from runner.run.journal import Journal, NodeLeftOut, SampleAttempt
from runner.run.sample_runner import RanSample
from runner.run.scheduler import StopRequest
from runner.sandbox.backend import SampleSpec
from runner.sandbox.docker import connect as connect_engine
from runner.sandbox.transfer import CHUNK_BYTES, save_chunks

_log = log.get(__name__)

GRACE_S = 60.0
"""How long past its sample limit the driver waits for a try before counting it lost (the node enforces the
limit itself; this only covers a node that stopped answering without dying)."""
MAX_TRIES = 3
"""How many tries of a sample may be lost with their node before the sample is a ``sandbox_error``."""
WATCH_S = 2.0
"""How often the driver looks for nodes that joined the cluster mid-run, and for admitted nodes still alive."""
STRANDED_S = 60.0
"""How long a run may have no admitted node alive before it stops (``run_interrupted``, resumable). The clock starts
once Ray has marked the last one dead (its own health checks take some seconds more); a node that joins meanwhile and
passes its checks (a restarted node is a new node to Ray) resets it, however long the checks take. A minute lets a
node's ``ray start`` come back; a longer outage costs a resume, never a graded sample."""
HEAD_GONE_S = 10.0
"""How long the Ray head's GCS may not answer before the run stops (``run_interrupted``, resumable). The watcher
looks every :data:`WATCH_S` (a look waits :data:`~runner.cluster.connection.HEAD_ANSWER_S` at most), so a run stops
within :data:`HEAD_STOP_BOUND_S` of its head going away."""
HEAD_STOP_BOUND_S = 20.0
"""The bound the docs promise: from the head going away to the run's stop, :data:`HEAD_GONE_S` and one look late,
with the stop itself (the nodes are not asked to sweep: nothing reaches them without the head)."""
LOAD_TIMEOUT_S = 600.0
"""How long one image's load on a node may take, from the first piece sent to the engine's last word, before the
node is left out (a load that hangs: an engine that stopped answering, a stream that stalls). About 20 times what a
568 MB image takes here through the object store."""
CHECK_TIMEOUT_S = 300.0
"""How long a node's check may take (a sweep, the world's digests, a probe of the candidate) before the node is
left out."""
NODE_ID_LABEL = "ray.io/node-id"
"""The label Ray gives every node, its node id: a sample asks for the admitted nodes by it."""
_POLL_S = 0.5
UNKNOWN_NODE = "unknown"
"""A lost try's node when neither the try nor Ray said where it ran."""


class RayRunner:
    """Runs a run's samples on a Ray cluster. Use :meth:`connect`, then as a context manager or :meth:`close`."""

    def __init__(
        self,
        run_id: str,
        expected: NodeExpectations,
        *,
        candidate: str | None,
        attempt: str | None = None,
        board: str | None = None,
        max_tries: int = MAX_TRIES,
        owns_connection: bool = False,
    ) -> None:
        """A runner for ``run_id`` on the cluster this process is connected to (see :meth:`connect`)."""
        import ray

        self.run_id = run_id
        self.attempt = attempt or secrets.token_hex(8)
        """The run's attempt these samples belong to (fresh by default): it names the agents
        (:func:`runner.cluster.agent_name`)."""
        self.board = board
        """The board whose run this is, if any: labelled on every sandbox (``ispm.board``), and the only board's
        sandboxes the nodes' sweeps touch. Beside the run's spec, not in it: the record stays as it is."""
        self.expected = expected
        self.candidate = candidate
        self.max_tries = max_tries
        self.agents: dict[str, Any] = {}
        """Each admitted node's agent (a Ray actor handle), by node id: the only nodes samples go to."""
        self.checks: dict[str, NodeCheck] = {}
        """Each admitted node's last check, by node id."""
        self.left_out: dict[str, NodeLeftOut] = {}
        """Each node left out of the run, with why, by node id."""
        self.benched: dict[str, Any] = {}
        """Each admitted node whose Docker engine failed under a sample, its agent by node id: it takes no sample
        until it passes its checks again (the watcher checks it every :data:`WATCH_S`)."""
        self.bench_reasons: dict[str, str] = {}
        """Why each benched node was benched."""
        self.head_gone_s = HEAD_GONE_S
        """How long the head may not answer before the watcher stops the run (:data:`HEAD_GONE_S`)."""
        self._head = head_address()
        self._head_lost = threading.Event()
        """Set while the head does not answer: nothing that needs it is asked (it would wait for minutes)."""
        self.load_timeout_s = LOAD_TIMEOUT_S
        """How long one image's load on a node may take (:data:`LOAD_TIMEOUT_S`)."""
        self.stranded_s = STRANDED_S
        """How long the run may have no admitted node alive before the watcher stops it (:data:`STRANDED_S`)."""
        self._owns_connection = owns_connection
        self._stopping = threading.Event()
        self._watched = threading.Event()
        """Set while a watcher admits the nodes that join and stops the run when none is left (:meth:`journaling`)."""
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._journal: Journal | None = None
        self._unjournaled: list[NodeLeftOut] = []
        self._agent = ray.remote(NodeAgent)
        self._sample = ray.remote(run_on_node)
        self._task: Any = None
        self._probes: dict[str, tuple[str | None, str | None]] = {}
        """The candidate's probe (why it failed, the model id) by digest of how nodes reach it, for this attempt."""

    @classmethod
    def connect(
        cls,
        address: str | None,
        run_id: str,
        expected: NodeExpectations,
        *,
        candidate: str | None,
        attempt: str | None = None,
        board: str | None = None,
    ) -> RayRunner:
        """Connect to the cluster at ``address`` (unless this process already is), check every sandbox node,
        ship the images a node lacks, and return a runner that sends samples only to the nodes that passed.

        Raises:
            ClusterError: no address, the cluster is unreachable, it has no ``ispm_sandbox`` node, or every node
                was refused (each reason named).
        """
        owns = not require_ray().is_initialized()
        if owns:
            connect(address)
        runner = cls(run_id, expected, candidate=candidate, attempt=attempt, board=board, owns_connection=owns)
        try:
            runner.admit_nodes()
        except BaseException:
            runner.close()
            raise
        return runner

    # -- nodes -----------------------------------------------------------------------------------------------

    def admit_nodes(self) -> None:
        """Start an agent on every sandbox node, check it, ship what it lacks, and keep those that pass; each other
        node is left out (:attr:`left_out`) and the run goes on without it.

        Raises:
            ClusterError: no sandbox node, or every one was refused (each reason named).
        """
        nodes = sandbox_nodes()
        if not nodes:
            raise ClusterError(f"no node of the cluster advertises {SANDBOX_RESOURCE} (ray start --resources ...)")
        self._admit(nodes, joined=False)
        if not self.agents:
            raise ClusterError(
                "every sandbox node of the cluster was refused", [r for e in self.left_out.values() for r in e.reasons]
            )

    @contextmanager
    def journaling(self, journal: Journal, stop: StopRequest) -> Iterator[None]:
        """For the block: journal every node left out (those of :meth:`admit_nodes` first), and watch for nodes
        that join the cluster, admitting each only once it passes the same checks (:data:`WATCH_S`).

        ``stop`` is the run's stop request: the watcher makes it when no admitted node has been alive for
        :attr:`stranded_s`, since no sample can run until one is back; samples wait for that, or for a node."""
        with self._lock:
            self._journal = journal
            for entry in self._unjournaled:
                journal.append(entry)
            self._unjournaled.clear()
        quit_watching = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(quit_watching, stop), name="ispm-node-watch", daemon=True)
        watcher.start()
        self._watched.set()
        try:
            yield
        finally:
            self._watched.clear()
            quit_watching.set()
            # A check in flight ends within its timeout; the run does not wait for it: the node just gets no work.
            watcher.join(timeout=10)
            with self._lock:
                self._journal = None

    def _watch(self, quit_watching: threading.Event, stop: StopRequest) -> None:
        gone_since: float | None = None
        head_lost_since: float | None = None
        while not quit_watching.wait(WATCH_S):
            fault = head_fault(self._head, HEAD_ANSWER_S)
            if fault is not None:
                self._head_lost.set()
                if head_lost_since is None:
                    head_lost_since = time.monotonic()
                    _log.warning("cluster.head_lost", run=self.run_id, head=self._head, error=fault)
                if time.monotonic() - head_lost_since >= self.head_gone_s:
                    reason = (
                        f"the Ray head at {self._head} has not answered for {self.head_gone_s:g} s ({fault}); "
                        "resume the run once a head is back"
                    )
                    _log.error("cluster.head_gone", run=self.run_id, reason=reason)
                    stop.stop(reason)
                    return  # the run is ending: nothing can be placed without the head
                continue
            head_lost_since = None
            self._head_lost.clear()
            live = self._admit_joined()
            if live is None:
                continue
            self._check_benched(live)  # the cluster did not answer: the clock neither starts nor resets
            gone = self._all_gone(live)
            if not gone:
                gone_since = None
                continue
            if gone_since is None:
                gone_since = time.monotonic()
                _log.warning("cluster.admitted_nodes_gone", run=self.run_id, nodes=gone, stop_in_s=self.stranded_s)
            if time.monotonic() - gone_since >= self.stranded_s:
                self._strand(stop, gone)
                return  # the run is ending: a node that joins now would get no work

    def _admit_joined(self) -> list[str] | None:
        """Check the sandbox nodes that joined since the last look, admitting or leaving out each; the live sandbox
        nodes, or ``None`` when the cluster could not be asked."""
        live: list[str] | None = None
        fresh: list[str] = []
        try:
            live = sandbox_nodes()
            with self._lock:
                known = set(self.agents) | set(self.left_out)
            fresh = [n for n in live if n not in known]
            if fresh:
                _log.info("cluster.nodes_joined", run=self.run_id, nodes=fresh)
                self._admit(fresh, joined=True)
        except Exception as exc:  # the run goes on with the nodes it has
            if self._closed.is_set():
                return None  # the runner closed under the check (and may have disconnected): nothing to say
            detail = first_line(exc)
            _log.warning("cluster.join_check_failed", run=self.run_id, nodes=fresh, error=detail)
            for node in fresh:
                if node not in self.agents and node not in self.left_out:
                    reason = f"node {node[:12]}: the driver could not check it: {detail}"
                    self._leave_out(node, None, [reason], joined=True)
        return live

    def _check_benched(self, live: list[str]) -> None:
        """Check again each benched node still alive; admit again those that pass (images shipped first)."""
        with self._lock:
            benched = {n: a for n, a in self.benched.items() if n in live}
        for node, agent in benched.items():
            checks: dict[str, NodeCheck] = {}
            refused: dict[str, list[str]] = {}
            try:
                self._vet({node: agent}, checks, refused)
            except Exception as exc:  # the run goes on without it; it is checked again at the next look
                _log.warning("cluster.bench_check_failed", run=self.run_id, node=node, error=first_line(exc))
                continue
            if refused:
                continue
            with self._lock:
                if self._closed.is_set() or self.benched.pop(node, None) is None:
                    continue
                self.bench_reasons.pop(node, None)
                self.agents[node] = agent
                self.checks[node] = checks[node]
                self._select()
            _log.info("cluster.node_back", run=self.run_id, node=node)

    def _bench(self, node: str, reason: str) -> None:
        """Take ``node`` out of the samples' selector: its engine failed (a try on it said so)."""
        with self._lock:
            agent = self.agents.pop(node, None)
            if agent is None:
                return  # benched already by another try, or never admitted
            self.benched[node] = agent
            self.bench_reasons[node] = reason
            self._select()
        _log.warning("cluster.node_benched", run=self.run_id, node=node, reason=reason)

    def _all_gone(self, live: list[str]) -> list[str]:
        """Every admitted or benched node, when no admitted one is among the ``live`` ones; empty while one is."""
        with self._lock:
            admitted = sorted(self.agents)
            benched = sorted(self.benched)
        return [] if set(admitted) & set(live) else sorted({*admitted, *benched})

    def _strand(self, stop: StopRequest, gone: list[str]) -> None:
        """Stop the run: no admitted node has been alive for :attr:`stranded_s`, so no sample can be placed."""
        with self._lock:
            hosts = {n: self.checks[n].host for n in gone if n in self.checks}
            benched = dict(self.bench_reasons)
        names = ", ".join(
            (f"node {n[:12]} ({hosts[n]})" if n in hosts else f"node {n[:12]}")
            + (f", its Docker engine failed: {benched[n]}" if n in benched else "")
            for n in gone
        )
        reason = (
            f"every admitted node of the cluster is gone ({names}) and none came back within {self.stranded_s:g} s; "
            "resume the run once a node is back"
        )
        _log.error("cluster.stranded", run=self.run_id, nodes=gone, reason=reason)
        stop.stop(reason)

    def _admit(self, nodes: list[str], *, joined: bool) -> None:
        """Check ``nodes`` (shipping what they lack), then admit those that pass and leave out the others."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        agents = {
            node: self._agent.options(
                name=agent_name(self.run_id, self.attempt, node),
                namespace=NAMESPACE,
                num_cpus=0,
                max_concurrency=64,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.candidate, self.board)
            for node in nodes
        }
        checks: dict[str, NodeCheck] = {}
        refused: dict[str, list[str]] = {}
        try:
            self._vet(agents, checks, refused)
        except BaseException:
            for agent in agents.values():
                _stop_agent(agent)
            raise
        for node, reasons in refused.items():
            self._leave_out(node, checks.get(node), reasons, joined=joined, agent=agents[node])
        admitted = {n: a for n, a in agents.items() if n not in refused}
        with self._lock:
            late = self._closed.is_set()
            if not late:
                self.agents.update(admitted)
                self.checks.update({n: checks[n] for n in admitted})
                if admitted:
                    self._select()
        if late:  # the run ended while these were checked: they get no work
            for agent in admitted.values():
                _stop_agent(agent)
        elif admitted:
            _log.info(
                "cluster.nodes_admitted", run=self.run_id, joined=joined, nodes={n: checks[n].host for n in admitted}
            )

    def _vet(self, agents: dict[str, Any], checks: dict[str, NodeCheck], refused: dict[str, list[str]]) -> None:
        """Check ``agents``' nodes, ship each the images it lacks and check it again (every image by its id before
        the node's first sample): each node's check into ``checks``, or why it is refused into ``refused``."""
        self._check(agents, checks, refused)
        lacking = {n: c.missing(self.expected) for n, c in checks.items() if n not in refused}
        lacking = {n: tags for n, tags in lacking.items() if tags}
        if not lacking:
            return
        self._ship(agents, lacking, refused)
        again = {n: agents[n] for n in lacking if n not in refused}
        self._check(again, checks, refused)
        for node in again:
            still = [] if node in refused else checks[node].missing(self.expected)
            if still:
                refused[node] = [f"node {node[:12]}: image {t} is still missing after loading it" for t in still]

    def _check(self, agents: dict[str, Any], checks: dict[str, NodeCheck], refused: dict[str, list[str]]) -> None:
        """Check each of ``agents``' nodes: its check into ``checks``, or why it is refused into ``refused``.

        Nodes that reach the candidate the same way (endpoint and key, :meth:`NodeAgent.credentials`) share one
        probe of it per run attempt: the first of them probes, the others are checked with its answer. So a resume,
        a join or a check again costs the provider one probe per key, not one per node."""

        reach = self._reach(agents)
        leaders: dict[str, str] = {}
        for node in agents:
            digest = reach.get(node)
            if digest is not None and digest not in self._probes:
                leaders.setdefault(digest, node)
        first = {n: agents[n] for n in leaders.values()}
        self._check_with(first, checks, refused)
        for digest, node in leaders.items():
            if node in checks:
                self._probes[digest] = (checks[node].probe_error, checks[node].candidate_model)
        rest = {n: a for n, a in agents.items() if n not in first}
        self._check_with(rest, checks, refused, {n: self._probes.get(reach.get(n) or "") for n in rest})

    def _reach(self, agents: dict[str, Any]) -> dict[str, str | None]:
        """Each node's digest of how it reaches the candidate; ``None`` when it has none or did not say."""
        import ray

        if self.candidate is None:
            return {}
        pending = {node: agent.credentials.remote() for node, agent in agents.items()}
        found: dict[str, str | None] = {}
        for node, ref in pending.items():
            try:
                found[node] = ray.get(ref, timeout=CHECK_TIMEOUT_S)
            except ray.exceptions.RayError:
                found[node] = None  # its check says why
        return found

    def _check_with(
        self,
        agents: dict[str, Any],
        checks: dict[str, NodeCheck],
        refused: dict[str, list[str]],
        probed: dict[str, tuple[str | None, str | None] | None] | None = None,
    ) -> None:
        import ray

        pending = {node: agent.check.remote(self.expected, (probed or {}).get(node)) for node, agent in agents.items()}
        for node, ref in pending.items():
            try:
                found: NodeCheck = ray.get(ref, timeout=CHECK_TIMEOUT_S)
            except ray.exceptions.RayError as exc:
                refused[node] = [f"node {node[:12]}: its check failed: {first_line(exc)}"]
                continue
            checks[node] = found
            if found.refusals(self.expected):
                refused[node] = found.refusals(self.expected)

    def _ship(self, agents: dict[str, Any], lacking: dict[str, list[str]], refused: dict[str, list[str]]) -> None:
        """Load each tag into every node of ``lacking`` that lacks it; a node whose load fails goes to ``refused``.

        Raises:
            SandboxError: the driver's own engine cannot save an image.
        """
        import ray

        client = connect_engine()
        try:
            for tag in sorted({t for tags in lacking.values() for t in tags}):
                takers = [n for n, tags in lacking.items() if tag in tags and n not in refused]
                if not takers:
                    continue
                started = time.perf_counter()
                # Saved once, loaded by every node that lacks it; the pieces leave the object store with the refs.
                chunks = stage_image(client, tag)
                loads = {n: agents[n].load_image.remote(chunks) for n in takers}
                until = time.monotonic() + self.load_timeout_s
                for node, ref in loads.items():
                    try:
                        ray.get(ref, timeout=max(0.0, until - time.monotonic()))
                    except ray.exceptions.GetTimeoutError:
                        # The agent is stopped with the node's refusal, and its hung load with it.
                        refused[node] = [
                            f"node {node[:12]}: loading image {tag} took longer than {self.load_timeout_s:g} s"
                        ]
                    except ray.exceptions.RayError as exc:
                        refused[node] = [f"node {node[:12]}: loading image {tag} failed: {first_line(exc)}"]
                _log.info(
                    "cluster.image_shipped", tag=tag, chunks=len(chunks), s=round(time.perf_counter() - started, 3)
                )
                del chunks
        finally:
            client.close()

    def _leave_out(
        self, node: str, check: NodeCheck | None, reasons: list[str], *, joined: bool, agent: Any = None
    ) -> None:
        """Leave ``node`` out of the run: stop its agent, say so, and journal it (once a journal is open)."""
        entry = NodeLeftOut(node=node, host=check.host if check else None, joined=joined, reasons=reasons)
        _log.warning("cluster.node_left_out", run=self.run_id, node=node, joined=joined, reasons=reasons)
        if agent is not None:
            _stop_agent(agent)
        with self._lock:
            self.left_out[node] = entry
            if self._journal is not None:
                self._journal.append(entry)
            else:
                self._unjournaled.append(entry)

    def _select(self) -> None:
        """Point sample tasks at the admitted nodes, by the node-id label Ray gives every node (under the lock);
        none while no node is admitted (every one benched)."""
        if not self.agents:
            self._task = None
            return
        self._task = self._sample.options(
            num_cpus=0,
            resources={SANDBOX_RESOURCE: 1},
            label_selector={NODE_ID_LABEL: f"in({','.join(sorted(self.agents))})"},
            max_retries=0,
            retry_exceptions=False,
        )

    # -- samples ---------------------------------------------------------------------------------------------

    def run_sample(self, spec: SampleSpec) -> RanSample:
        """Run ``spec`` on some admitted node, linked to the node's gateway when the run has a candidate; a try lost
        with its node is noted and the sample runs again elsewhere.

        A try Ray cannot place because no admitted node is alive ran nowhere: while the run journals it costs the
        sample none of its tries, and the sample asks again every :data:`WATCH_S` until a node is admitted
        or the watcher stops the run (:data:`STRANDED_S`).

        A try lost because its node's Docker engine failed (:class:`~runner.cluster.model.NodeEngineFailed`) benches
        the node and costs the sample none of its ``max_tries`` (it was the node's fault, never the sample's); at most
        ``3 * max_tries`` tries are made in all, so an engine that keeps failing cannot hold a sample for ever.

        Never raises for the sample's own failure; when every try is lost the sample is a ``sandbox_error``.
        """
        import ray

        recordings = _recordings(spec) if spec.replay_dir is not None else None
        spec = spec.model_copy(update={"board": self.board})
        lost: list[SampleAttempt] = []
        engine_faults = 0
        while (
            len(lost) - engine_faults < self.max_tries
            and len(lost) < 3 * self.max_tries
            and not self._stopping.is_set()
        ):
            task = self._task
            if task is None:  # every admitted node is benched: wait for one to pass its checks again
                if not self._watched.is_set():
                    break
                self._stopping.wait(WATCH_S)
                continue
            pending = task.remote(self.attempt, spec, self.candidate is not None, recordings)
            node = UNKNOWN_NODE
            try:
                # However long it queues for a unit, then at most the sample limit and a grace.
                node = str(self._next(pending, None))
                result = self._next(pending, spec.time_limit_s + GRACE_S)
                assert isinstance(result, NodeResult)
                return RanSample(
                    output=result.output,
                    usage=result.usage,
                    node=result.node,
                    engine=result.engine,
                    lost_tries=tuple(lost),
                    transcript=result.transcript,
                )
            except ray.exceptions.RayTaskError as exc:
                lost.append(self._lost(spec, node, exc))
                if isinstance(exc.cause, NodeEngineFailed):
                    engine_faults += 1
                    self._bench(node, lost[-1].detail)
            except ray.exceptions.TaskUnschedulableError as exc:
                # Ray fails at once a task whose selector names only dead nodes: burning the sample's tries on it
                # would journal a sandbox_error for a sample that never ran.
                if self._stranded_now():
                    self._stopping.wait(WATCH_S)
                    continue
                lost.append(self._lost(spec, node, exc))
            except (ray.exceptions.RayError, TimeoutError) as exc:
                lost.append(self._lost(spec, node, exc))
                if not self._head_lost.is_set():  # a cancel needs the head, and would wait for it
                    ray.cancel(pending, force=True)
        error = lost[-1].detail if lost else "the run stopped before it ran"
        output = SampleOutput(
            task_id=spec.task_id, epoch=spec.epoch, status="sandbox_error", error=f"no try came back: {error}"
        )
        return RanSample(output=output, lost_tries=tuple(lost))

    def _lost(self, spec: SampleSpec, node: str, exc: BaseException) -> SampleAttempt:
        """Say that a try of ``spec`` on ``node`` was lost, and why; the try to note with the sample. A try lost
        before it said where it ran (``unknown``) is put on the node Ray says it placed it on, when Ray says."""
        detail = first_line(exc)
        if node == UNKNOWN_NODE:
            placed = placed_on(exc)
            if placed is not None:
                node = placed
            else:
                detail += "; it was lost before it said where it ran, and Ray did not say where it placed it"
        _log.warning("cluster.attempt_lost", run=self.run_id, sample=spec.sample_id, node=node, error=detail)
        return SampleAttempt(node=node, outcome="lost", detail=detail)

    def _stranded_now(self) -> bool:
        """Whether no admitted node is alive while a watcher runs, which admits the next node that passes its checks
        or stops the run (:meth:`journaling`)."""
        if not self._watched.is_set() or self._head_lost.is_set():
            return False  # nothing would admit a node or stop the run: the try is lost, as any other
        try:
            return bool(self._all_gone(sandbox_nodes()))
        except Exception:  # the cluster did not answer: the try is lost, as any other
            return False

    def _next(self, pending: Any, timeout: float | None) -> object:
        """The next item the sample task ``pending`` (a Ray reference to its stream) yields, waiting ``timeout``."""
        import ray

        waited = 0.0
        while True:
            ready, _ = ray.wait([pending], timeout=_POLL_S)
            if ready:
                return ray.get(next(pending))
            waited += _POLL_S
            if self._stopping.is_set():
                raise TimeoutError("the run stopped")
            if timeout is not None and waited >= timeout:
                raise TimeoutError(f"no result {timeout:.0f} s after it started")

    # -- the end ---------------------------------------------------------------------------------------------

    def sweep(self, run_id: str, *, attempt: str | None = None) -> None:
        """Stop waiting for tries and remove every sandbox resource of ``run_id`` on every node, or only those of
        the run's attempt ``attempt`` (``ispm.attempt``: a hands-off stop spares another attempt's)."""
        self._stopping.set()
        if self._head_lost.is_set():
            # Nothing reaches a node without the head: each node's next check sweeps its host's orphans.
            _log.warning("cluster.sweep_skipped", run=run_id, head=self._head)
            return
        self._each_node(lambda a: a.sweep.remote(run_id, attempt=attempt, orphans_only=False))

    def close(self) -> None:
        """Sweep this run's orphans on every live node, stop the agents and their gateways, disconnect."""
        import ray

        with self._lock:
            self._closed.set()  # a node that passes its check from now on is not admitted
        if not self._head_lost.is_set():
            self._each_node(lambda a: a.sweep.remote(self.run_id, orphans_only=True))
            self._each_node(lambda a: a.close.remote())
            for agent in [*self.agents.values(), *self.benched.values()]:
                ray.kill(agent)
        self.agents.clear()
        self.benched.clear()
        if self._owns_connection:
            ray.shutdown()

    def _each_node(self, call: Callable[[Any], Any]) -> None:
        import ray

        with self._lock:
            agents = dict(self.agents)
        for node, agent in agents.items():
            try:
                ray.get(call(agent), timeout=120)
            except ray.exceptions.RayError as exc:  # a dead node sweeps its own host when it comes back
                _log.warning("cluster.node_unreachable", node=node, error=first_line(exc, 200))

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_PLACED_ON = re.compile(r"node ID: ([0-9a-f]{56})\b")


def placed_on(exc: BaseException) -> str | None:
    """The node Ray says a lost task was placed on, from its error (Ray 2.60's ``NodeDiedError`` reads "Task failed
    because the node it was running on is dead or unavailable. Node IP: …, node ID: …"); ``None`` when it does not
    say."""
    found = _PLACED_ON.search(str(exc))
    return found.group(1) if found else None


def stage_image(client: Any, tag: str, chunk_bytes: int = CHUNK_BYTES) -> list[Any]:
    """Put the ``docker save`` stream of ``tag`` into the object store, piece by piece; the object refs in order."""
    import ray

    return [ray.put(piece) for piece in save_chunks(client, tag, chunk_bytes)]


def _stop_agent(agent: Any) -> None:
    """Stop an agent that gets no work: its gateway first, then the actor."""
    import ray

    with contextlib.suppress(ray.exceptions.RayError):  # dead already, or never started: kill it all the same
        ray.get(agent.close.remote(), timeout=30)
    ray.kill(agent)


def _recordings(spec: SampleSpec) -> dict[str, str]:
    # Only this sample's gold recording travels with it: the replay agent reads /replay/<task>.json.
    assert spec.replay_dir is not None
    path = Path(spec.replay_dir) / f"{spec.task_id}.json"
    return {path.name: path.read_text(encoding="utf-8")}
