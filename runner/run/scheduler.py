"""Plan tasks × epochs and run them with bounded concurrency, under the sample and run limits.

Each worker runs one sample through the backend, journals what was collected, grades it and journals the
votes, so a (task, epoch) is either redone whole, regraded from its journaled output, or skipped on resume.

**Run limit.** Each sample's time limit is clamped to what is left of the run, so at the run limit every
running sample is stopped from outside by its backend like any timeout, and no new sample starts. A run
that did not grade every planned sample within the limit ends ``timed_out``; the record then has no score.

**Ctrl-C.** The main thread stops scheduling, sweeps the run's sandbox resources (which ends the running
agents), waits for the workers, and journals ``run_interrupted``. Samples cut short this way are not
journaled: they were not the agent's failure, and a resume runs them again.

**Where samples run** is the plan's :class:`~runner.run.sample_runner.SampleRunner`: this host's backend, each
sample linked to the host's gateway, or a Ray cluster's nodes (``runner.cluster``). It hands back the output, the
gateway's usage, the node and any lost tries; grading, judges and the journal stay here either way.

**A stop from outside** (:class:`StopRequest`: a board's cancel, or a cluster run's driver when every node it admitted
is gone) ends the run the same way as Ctrl-C, from any thread, and journals ``run_interrupted`` with its reason. A
*hands-off* stop is for a process that no longer owns the run (a board worker whose lease another took over): it
starts nothing more and journals nothing more, and it sweeps only its own *attempt*'s sandboxes, so its agents end
at once while the new owner's, which carry the same run id, run on.

**The backend fails** (``BackendFailed``: one machine's Docker engine stopped answering under a sample that did
not end ``ok``): the fault is the host's, so the sample is not journaled, and the run stops as for a stop from
outside, ``interrupted`` with the reason; ``ispm run --resume`` runs that sample again.

**Attempts.** Each :func:`execute` is one attempt at the run: a random id (:attr:`RunPlan.attempt`), labelled on
every sandbox resource its samples make (``ispm.attempt``, :attr:`~runner.sandbox.backend.SampleSpec.attempt`), on
this host or on a cluster node. A sweep by run id removes every attempt's resources; a hands-off stop sweeps by its
attempt only.

**Circuit breakers** (``runner.run.breaker``). When a judge or the candidate has failed on ``spec.breaker_after``
consecutive samples, the run stops the same way (no new sample, the run's sandboxes swept, samples already being
graded finish and are journaled) and journals ``run_stopped`` with the breaker's reason. ``ispm run --resume``
continues it once the cause is fixed; nothing graded is lost or redone.
"""

from __future__ import annotations

import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from runner import log
from runner.call import Caller
from runner.contract import SampleOutput
from runner.errors import SandboxError
from runner.gateway.model import SampleUsage
from runner.gateway.providers import host_secrets
from runner.grading.grade import GradingContext, grade_sample
from runner.grading.judge import Judge, LLMJudge
from runner.run.breaker import Breakers
from runner.run.journal import (
    Journal,
    RunInterrupted,
    RunStopped,
    RunTimedOut,
    SampleFinished,
    SampleGraded,
)
from runner.run.progress import Progress, make_progress
from runner.run.sample_runner import RanSample, SampleRunner
from runner.run.spec import RunSpec
from runner.sample_key import SampleKey
from runner.sandbox.backend import BackendFailed, SampleSpec
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth
from runner.tasks.view import agent_files
from runner.transcript.capture import JudgeCapture
from runner.transcript.model import TranscriptRef
from runner.transcript.storage import EncodedPart, TranscriptBuilder, TranscriptError, write_part

_log = log.get(__name__)

Outcome = Literal["completed", "timed_out", "interrupted", "stopped"]
_POLL_S = 0.25


def planned_keys(task_ids: Sequence[str], epochs: int) -> list[SampleKey]:
    """Every sample of the run, epoch by epoch, so a cut-short run has whole epochs first."""
    return [SampleKey(task_id=t, epoch=e) for e in range(1, epochs + 1) for t in sorted(task_ids)]


def stopped_by_limit(output: SampleOutput, usage: SampleUsage | None, limit: int | None) -> SampleOutput:
    """``output`` as ``token_limit`` when the gateway refused one of the agent's calls past the sample's token limit
    and the agent then ended on its own (a time-out, an OOM kill or a harness failure keeps its own status)."""
    if usage is None or usage.stopped_by != "token_limit" or output.status not in _AGENT_ENDINGS:
        return output
    used = usage.tokens.input_tokens + usage.tokens.output_tokens
    error = f"the sample's token limit of {limit} tokens was reached ({used} used): the gateway refused its next call"
    if output.answer is None:
        error += "; no answer was written"
    return output.model_copy(update={"status": "token_limit", "error": error})


_AGENT_ENDINGS = frozenset(("ok", "agent_error", "invalid_answer"))


class StopRequest:
    """A request from outside the run to stop it, with a reason; thread-safe, and the first reason stays."""

    def __init__(self) -> None:
        """No stop requested yet."""
        self._lock = threading.Lock()
        self._requested = threading.Event()
        self._followers: list[StopRequest] = []
        self.reason: str | None = None
        """Why the run was asked to stop; journaled with ``run_interrupted``."""
        self.hands_off = False
        """Another process owns the run now: journal nothing more, and sweep only this attempt's own sandboxes."""

    def stop(self, reason: str, *, hands_off: bool = False) -> None:
        """Ask the run to stop for ``reason`` (a later hands-off request still makes it hands-off); every request
        this one is passed on to (:meth:`passed_on`) is asked too."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
            self.hands_off = self.hands_off or hands_off
            self._requested.set()
            # Under the lock, so followers hear the stops in this request's order (they never pass one back).
            for follower in self._followers:
                follower.stop(reason, hands_off=hands_off)

    @contextmanager
    def passed_on(self, follower: StopRequest) -> Iterator[None]:
        """For the block, every stop of this request is made to ``follower`` too (one made already, at once).

        A request of the run's own (the cluster's, when every node is gone) can then follow the caller's (a board's
        cancel) without setting it: the caller reads its own request as its own stop."""
        with self._lock:
            self._followers.append(follower)
            if self.reason is not None:  # set with the first stop
                follower.stop(self.reason, hands_off=self.hands_off)
        try:
            yield
        finally:
            with self._lock:
                self._followers.remove(follower)

    def is_set(self) -> bool:
        """Whether a stop was requested."""
        return self._requested.is_set()


@dataclass
class RunPlan:
    """What the scheduler needs: the spec, the tasks and their truth, where samples run, the judges, the journal."""

    run_id: str
    """The run's id, labelled on its sandboxes (``ispm.run``)."""
    spec: RunSpec
    """What the run is: agent, models, repetition and limits."""
    image: str
    """The resolved image tag."""
    tasks: dict[str, Task]
    """The planned tasks, by id."""
    truths: Mapping[str, TaskTruth]
    """Their ground truth, by task id (host only: it never enters a sandbox)."""
    runner: SampleRunner
    """Where the samples run: this host (:class:`~runner.run.sample_runner.HostRunner`) or a cluster."""
    judges: list[Judge]
    """One judge per slot, in slot order."""
    world_file: Path
    """The snapshot the grader replays the agent's SQL on."""
    journal: Journal
    """Where every finished sample, vote and the run's end are appended."""
    replay_dir: Path | None = None
    """The gold recordings mounted for the replay agent (calibration runs only)."""
    finished: dict[SampleKey, SampleOutput] = field(default_factory=dict)
    """Samples already collected by an earlier attempt (graded or not)."""
    graded: set[SampleKey] = field(default_factory=set)
    """Samples already graded by an earlier attempt: skipped."""
    spent_usd: float = 0.0
    """Dollars earlier attempts spent, counted against ``spec.run_cost_limit_usd`` (0 without a limit)."""
    attempt: str = field(default_factory=lambda: secrets.token_hex(8))
    """This attempt at the run (fresh by default): labelled on every sandbox its samples make (``ispm.attempt``)."""


class _Worker:
    """The per-sample work, shared by the pool's threads."""

    def __init__(
        self,
        plan: RunPlan,
        deadline: float,
        clock: Callable[[], float],
        progress: Progress,
        request: StopRequest | None = None,
    ) -> None:
        self.plan = plan
        self.request = request
        self.deadline = deadline
        self.clock = clock
        self.progress = progress
        self.stop = threading.Event()
        self.deadline_hit = threading.Event()
        self.backend_failed: str | None = None
        """Why the backend failed under a sample, if it did: the run stops ``interrupted`` with this reason."""
        self.breakers = Breakers(plan.spec.breaker_after, plan.spec.candidate, plan.spec.run_cost_limit_usd)
        self.breakers.spent_usd = plan.spent_usd
        self._local = threading.local()
        self._contexts: list[GradingContext] = []
        self._lock = threading.Lock()
        self.judge_capture = JudgeCapture(host_secrets())
        """The model judges' calls, per sample, for the judges' part of its transcript."""
        slots: tuple[Caller, Caller] = ("judge_a", "judge_b")
        for slot, judge in zip(slots, plan.judges, strict=False):
            if isinstance(judge, LLMJudge):
                judge.capture, judge.slot = self.judge_capture, slot

    def context(self) -> GradingContext:
        # The replay connection is SQLite's, which belongs to the thread that opened it.
        found: GradingContext | None = getattr(self._local, "context", None)
        if found is None:
            found = GradingContext(self.plan.world_file)
            self._local.context = found
            with self._lock:
                self._contexts.append(found)
        return found

    def close(self) -> None:
        # A connection may only be closed by its own thread, and the pool's threads are gone by now:
        # dropping the last reference lets SQLite release it.
        self._contexts.clear()

    def __call__(self, key: SampleKey) -> str | None:
        """Run (unless journaled) and grade one sample; ``None`` when it was not done (stop or run limit)."""
        if self.stop.is_set() or (self.request is not None and self.request.is_set()):
            return None
        remaining = self.deadline - self.clock()
        if remaining <= 0:
            self.deadline_hit.set()
            return None
        task_id, epoch = key.task_id, key.epoch
        output = self.plan.finished.get(key)
        usage = None
        if output is None:
            if self.breakers.over_budget() is not None:
                self.stop.set()
                return None
            self.progress.started(key)
            limit = min(self.plan.spec.sample_limit_s, remaining)
            try:
                ran = self._run(key, limit)
            except BackendFailed as exc:
                # The host's engine failed, not the agent: stop the run and journal nothing of this sample.
                _log.error("run.backend_failed", run=self.plan.run_id, sample=key.label(), error=str(exc))
                self.backend_failed = self.backend_failed or str(exc)
                self.stop.set()
                if self.request is not None:
                    self.request.stop(str(exc))
                return None
            output, usage = stopped_by_limit(ran.output, ran.usage, self.plan.spec.sample_token_limit), ran.usage
            if usage is not None and usage.stopped_by == "cost_limit":
                # The gateway refused the agent past the run's cost limit: the sample is not journaled, so a resume
                # runs it whole.
                self.breakers.refused_past_budget(usage)
                self.stop.set()
                return None
            if self.stop.is_set() or self.hands_off():
                return None
            if output.status == "timeout" and limit < self.plan.spec.sample_limit_s:
                self.deadline_hit.set()
            transcript = self._keep(ran.transcript, key)  # on disk before the entry that names it
            self.plan.journal.append(
                SampleFinished(
                    output=output,
                    usage=usage,
                    node=ran.node,
                    engine=ran.engine,
                    attempts=list(ran.lost_tries),
                    transcript=transcript,
                )
            )
            _log.info(
                "run.sample_finished",
                run=self.plan.run_id,
                sample=key.label(),
                status=output.status,
                error=output.error,
                agent_s=output.timings.agent,
            )
            if self.breakers.ran(usage) is not None:
                self.stop.set()
        started = time.perf_counter()
        result = grade_sample(
            self.plan.tasks[task_id], self.plan.truths[task_id], output, self.plan.judges, epoch, context=self.context()
        )
        judged = self.judge_capture.take(key)
        if self.hands_off():
            return None
        self.plan.journal.append(
            SampleGraded(
                task_id=task_id,
                epoch=epoch,
                graded=result.graded,
                votes=result.votes,
                grade_s=round(time.perf_counter() - started, 4),
                coverage=result.coverage,
                coverage_error=result.coverage_error,
                analysis_note=result.analysis_note,
                replay_checks=result.replay_checks,
                transcript=self._keep(judged, key),
            )
        )
        if self.breakers.judged(result.graded, result.votes) is not None:
            self.stop.set()
        if self.breakers.spent(usage, result.votes) is not None:
            self.stop.set()
        return output.status

    def _keep(self, part: TranscriptBuilder | EncodedPart | None, key: SampleKey) -> TranscriptRef | None:
        """Write a transcript part beside the journal; a part that cannot be written is logged, never fatal."""
        if part is None:
            return None
        run_dir = self.plan.journal.path.parent
        try:
            if isinstance(part, EncodedPart):  # the candidate's, from a cluster node
                return write_part(run_dir, key, "candidate", part)
            return part.write(run_dir, self.plan.run_id, key)
        except TranscriptError as exc:
            _log.error("run.transcript_not_written", run=self.plan.run_id, sample=key.label(), error=str(exc))
            return None

    def hands_off(self) -> bool:
        """Whether the run now belongs to another process, so nothing more may be journaled here."""
        return self.request is not None and self.request.hands_off

    def _run(self, key: SampleKey, limit: float) -> RanSample:
        task_id, epoch = key.task_id, key.epoch
        task = self.plan.tasks[task_id]
        spec = SampleSpec(
            task_id=task_id,
            epoch=epoch,
            run_id=self.plan.run_id,
            attempt=self.plan.attempt,
            image=self.plan.image,
            # The agent is told the sample limit, not the clamped one: the clamp is the run's business.
            task_files=agent_files(task, time_limit_seconds=int(self.plan.spec.sample_limit_s)),
            time_limit_s=limit,
            replay_dir=self.plan.replay_dir,
            world_file=self.plan.world_file,
        )
        return self.plan.runner.run_sample(spec)


def execute(
    plan: RunPlan,
    *,
    used_s: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
    progress: Progress | None = None,
    stop: StopRequest | None = None,
) -> tuple[Outcome, float]:
    """Run every planned sample not yet graded; journal the end of the run. Returns (outcome, run seconds used).

    ``used_s`` is what earlier attempts spent; it counts against ``spec.run_limit_s``. Ctrl-C ends with
    ``interrupted`` after removing the run's sandbox resources; it is not re-raised, and so does ``stop`` once it
    is set (journaling its reason; a hands-off stop journals nothing and removes only this attempt's sandboxes,
    never another attempt's of the same run). A tripped circuit breaker ends with ``stopped`` the same way, and
    journals its reason.
    """
    todo = [key for key in planned_keys(list(plan.tasks), plan.spec.epochs) if key not in plan.graded]
    start = clock()
    deadline = start + plan.spec.run_limit_s - used_s
    shown = progress or make_progress(sys.stderr)
    worker = _Worker(plan, deadline, clock, shown, stop)
    _log.info(
        "run.scheduling",
        run=plan.run_id,
        attempt=plan.attempt,
        todo=len(todo),
        done=len(plan.graded),
        used_s=round(used_s, 3),
    )
    shown.begin(total=len(todo) + len(plan.graded), done=len(plan.graded), limit_s=plan.spec.run_limit_s, used_s=used_s)
    pool = ThreadPoolExecutor(max_workers=plan.spec.concurrency, thread_name_prefix="ispm-sample")
    futures: dict[Future[str | None], SampleKey] = {}
    outcome: Outcome = "completed"
    try:
        futures = {pool.submit(worker, key): key for key in todo}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
            for f in finished:
                status = f.result()  # a grading error is a harness bug: let it end the run loudly
                if status is not None:
                    shown.finished(futures[f], status)
            if worker.breakers.tripped is not None:
                outcome = "stopped"
                _stop(worker, pool, plan)
                break
            if (stop is not None and stop.is_set()) or worker.backend_failed is not None:
                outcome = "interrupted"
                _stop(worker, pool, plan, own_only=stop is not None and stop.hands_off)
                break
            if clock() >= deadline:
                worker.deadline_hit.set()
    except KeyboardInterrupt:
        outcome = "interrupted"
        _stop(worker, pool, plan)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        worker.close()
        shown.end()
    used = used_s + (clock() - start)
    _log.info("run.stopped", run=plan.run_id, outcome=outcome, used_s=round(used, 3))
    if outcome == "interrupted":
        if not worker.hands_off():
            reason = stop.reason if stop is not None and stop.reason is not None else worker.backend_failed
            plan.journal.append(RunInterrupted(used_s=round(used, 3), reason=reason))
        return outcome, used
    trip = worker.breakers.tripped
    if outcome == "stopped" and all(f.done() and not f.cancelled() and f.result() is not None for f in futures):
        outcome = "completed"  # the trip came with the last sample: nothing is left to stop, health will tell
    if outcome == "stopped" and trip is not None:
        _log.warning("run.breaker_tripped", run=plan.run_id, breaker=trip.breaker, party=trip.party, reason=trip.reason)
        plan.journal.append(
            RunStopped(used_s=round(used, 3), breaker=trip.breaker, party=trip.party, reason=trip.reason)
        )
        return outcome, used
    if worker.deadline_hit.is_set() or any(f.result() is None for f in futures):
        plan.journal.append(RunTimedOut(used_s=round(used, 3), limit_s=plan.spec.run_limit_s))
        return "timed_out", used
    return outcome, used


def _stop(worker: _Worker, pool: ThreadPoolExecutor, plan: RunPlan, *, own_only: bool = False) -> None:
    worker.stop.set()
    pool.shutdown(wait=False, cancel_futures=True)
    # Hands-off (``own_only``): the run is another process's now, and so are the sandboxes of its attempt, which carry
    # the same run id: only this attempt's go.
    attempt = plan.attempt if own_only else None
    try:
        # Removing the containers ends the agents now; the workers then return without journaling.
        plan.runner.sweep(plan.run_id, attempt=attempt)
    except SandboxError as exc:
        _log.error("run.sweep_failed", run=plan.run_id, attempt=attempt, error=str(exc))
