"""Start or resume a run: preflight, the journal, the scheduler, then the record next to the journal.

This is where the run stage (``runner.run``: spec, journal, scheduler) and the record stage (``runner.record``)
meet, above both: neither stage imports the other's behaviour.

A run folder holds ``journal.jsonl`` (the durable truth), ``record.json`` (built from the journal),
``report.html`` (the record as one static page), ``log.jsonl`` (JSON logs) and, for gold calibration runs,
``replay/`` (the recordings mounted into samples).

**Preflight** (:func:`run_preflight`) comes first, on a start and on every resume: one probe per model (the
model ids the wire returns), then each model judge's dry run on the calibration set (``runner.run.dry_run``). A
judge that cannot grade fails it, and no sample runs.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from runner import __version__, log
from runner.call import Usage
from runner.gateway.preflight import preflight
from runner.grading.grade import GradingContext, make_judges
from runner.grading.judge import Judge
from runner.grading.rubric import RubricSet, load_rubrics
from runner.grading.slots import is_reference
from runner.paths import tasks_dir, world_dir
from runner.prices import price
from runner.record.build import build_record, write_record
from runner.record.cost import (
    CandidateProjection,
    agent_samples,
    candidate_lines,
    candidate_projection,
    projection_lines,
)
from runner.record.model import RECORD_NAME, RunRecord
from runner.record.report import REPORT_NAME
from runner.run.breaker import spent_usd
from runner.run.calibration import calibration_spec
from runner.run.digests import current_digests
from runner.run.dry_run import JudgeDryRun, dry_run_judges, load_calibration_set
from runner.run.journal import (
    JOURNAL_NAME,
    Entry,
    Journal,
    RunFinished,
    RunInterrupted,
    RunStarted,
    RunTimedOut,
    done_samples,
    now,
    read_entries,
)
from runner.run.progress import Progress
from runner.run.recordings import write_recordings
from runner.run.sample_runner import HostRunner, SampleRunner
from runner.run.scheduler import Outcome, RunPlan, StopRequest, execute
from runner.run.spec import RunError, RunSpec
from runner.sandbox.backend import Backend
from runner.sandbox.images import engine_image_id, ensure_images
from runner.sandbox.trial import make_backend, own_image, resolve_image
from runner.tasks.catalog import catalog
from runner.trace.sample_page import write_report_and_pages
from runner.world import SNAPSHOT_NAME

if TYPE_CHECKING:
    # Loaded when a run needs them, not for every run: the cluster only on the ``ray`` backend, the gateway (aiohttp's
    # server) only for an agent with a model. A calibration run (``ispm demo``) starts without either.
    from runner.cluster.driver import RayRunner
    from runner.gateway.server import Gateway

LOG_NAME = "log.jsonl"
REPLAY_DIR = "replay"


class RunResult(BaseModel):
    """Where a run ended and where its record is."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    run_dir: Path
    """The run's folder: journal, log, record and report."""
    outcome: Outcome
    """How this start or resume ended."""
    record_path: Path
    """``record.json`` (not written by a hands-off stop: the folder is another process's then)."""
    record: RunRecord
    """The record, rebuilt from the journal."""
    report_path: Path
    """The HTML report (not written by a hands-off stop)."""
    interrupted_because: str | None = None
    """Why the run was interrupted, when it was and the stop came with a reason (a board's cancel, a cluster with
    no node left); ``None`` otherwise, and for Ctrl-C."""

    def summary_lines(self) -> list[str]:
        """What the CLI prints when a run stops: the health banner, status, per-dimension means or why there is
        no score, and the health of the judges and the candidate."""
        record = self.record
        lines = []
        if record.health is not None and record.health.problems:
            lines += [f"!!! UNHEALTHY RUN: {p}" for p in record.health.problems]
            lines.append("!!! this run is not rankable: do not trust its score (docs/scoring.md, Health)")
        lines += [
            f"run {record.run_id}: {record.status} ({'official' if record.official else 'non-official'})",
            f"samples graded {record.samples_graded}/{record.samples_planned} in {record.run_s:.1f} s",
        ]
        if record.scores is not None:
            for dim, s in record.scores.dimensions.items():
                mean = "n/a" if s.mean is None else f"{s.mean:.3f}"
                lines.append(f"  {dim:<32} {mean:>6}  ({s.graded} graded, {s.abstained} abstained)")
        elif record.status == "timed_out":
            lines.append("the run limit passed: no score")
        elif record.stop_reason is not None:
            lines.append(f"stopped by a circuit breaker: {record.stop_reason}")
            lines.append(f"fix the cause, then continue with: ispm run --resume {self.run_dir}")
        elif self.interrupted_because is not None:
            lines.append(f"interrupted: {self.interrupted_because}")
            lines.append(f"continue with: ispm run --resume {self.run_dir}")
        else:
            lines.append(f"stopped; continue with: ispm run --resume {self.run_dir}")
        failed = {k: v for k, v in record.failures.items() if v}
        if failed:
            lines.append(f"failures: {failed}")
        for left in record.nodes_left_out:
            when = "on joining" if left.joined else "at the start"
            lines.append(f"node {left.host or left.node} left out {when}: {'; '.join(left.reasons)}")
        if record.health is not None:
            lines += record.health.summary_lines()
        lines.append(f"record: {self.record_path}")
        lines.append(f"report: {self.report_path}")
        return lines


class Preflight(BaseModel):
    """What preflight found: the model ids the wire returned and each model judge's dry run."""

    model_config = ConfigDict(frozen=True)

    resolved_models: dict[str, str]
    """Model id the wire returned, by alias; none for ``ref``."""
    judge_dry_runs: list[JudgeDryRun]
    """One per model judge slot, in slot order."""
    candidate_lines: list[str] = []
    """What is printed of the candidate's projected cost (:func:`project_candidate`); empty for a run without one."""

    def summary_lines(self) -> list[str]:
        """What the CLI prints before the run starts."""
        lines = [
            f"model          {alias}  ->  {m or '(no model id returned)'}" for alias, m in self.resolved_models.items()
        ]
        judges = [d.summary_line() for d in self.judge_dry_runs] + projection_lines(self.judge_dry_runs)
        return lines + judges + self.candidate_lines


def resolve_models(spec: RunSpec, ray_address: str | None = None) -> dict[str, str]:
    """The model id the wire returns for the candidate and each LLM judge (none for ``ref``).

    On the ``ray`` backend the candidate is probed on every sandbox node with the node's own key (the gateway that
    spends it runs there, ``runner.cluster.probe``), the cluster at ``ray_address`` or ``RAY_ADDRESS``; the judges
    are probed here, where they run.

    Raises:
        PreflightError: a key is missing, an alias is unknown, or a provider does not answer.
        ClusterError: the ``ray`` backend's cluster is unreachable or has no sandbox node.
    """
    models = [a for a in spec.judges if not is_reference(a)]
    on_nodes = None
    if spec.needed_model is not None:
        if spec.backend == "ray":
            from runner.cluster.probe import probe_candidate

            on_nodes = probe_candidate(ray_address or os.environ.get("RAY_ADDRESS"), spec.needed_model)
        else:
            models.insert(0, spec.needed_model)
    resolved = {on_nodes.alias: on_nodes.returned_model or ""} if on_nodes is not None else {}
    if not models:
        return resolved

    return resolved | {m.alias: m.returned_model or "" for m in preflight(models)}


def dry_run(judges: Sequence[Judge], planned: int, rubrics: RubricSet) -> list[JudgeDryRun]:
    """Each model judge's dry run on the calibration set shipped with the task set (``ref`` needs none).

    Raises:
        JudgeDryRunError: a judge's reply did not parse, or it graded gold or null wrongly.
    """
    models = [j for j in judges if not is_reference(j.alias)]
    if not models:
        return []
    tasks, truths = catalog().by_id, catalog().truths
    with GradingContext(world_dir() / SNAPSHOT_NAME, rubrics=rubrics) as context:
        return dry_run_judges(
            models, load_calibration_set(tasks_dir()), tasks=tasks, truths=truths, context=context, planned=planned
        )


def run_preflight(
    spec: RunSpec, *, probe: bool = True, planned: int | None = None, ray_address: str | None = None
) -> Preflight:
    """Preflight of ``spec``: probe the models (unless ``probe`` is false), then dry-run the model judges.

    ``planned`` is the samples the run will grade (for the token projection); by default every sample of the spec.
    ``ray_address``: the cluster whose nodes probe the candidate on the ``ray`` backend (see :func:`resolve_models`).

    Raises:
        PreflightError: a key is missing, an alias is unknown, or a provider does not answer.
        JudgeDryRunError: a judge failed its dry run.
        ClusterError: the ``ray`` backend's cluster is unreachable or has no sandbox node.
    """
    resolved = resolve_models(spec, ray_address) if probe else {}
    rubrics = load_rubrics()
    if planned is None:
        planned = planned_samples(spec)
    dry_runs = dry_run(make_judges(spec.judges, rubrics), planned, rubrics)
    candidate = spec.needed_model
    return Preflight(
        resolved_models=resolved,
        judge_dry_runs=dry_runs,
        candidate_lines=candidate_projection_lines(candidate, spec.agent_image, planned, dry_runs) if candidate else [],
    )


EARLIER_RUNS = Path("runs")
"""Where preflight looks for earlier runs of the agent (the runs folder ``ispm run`` writes by default)."""


def project_candidate(
    candidate: str, agent_image: str, planned: int, earlier: Path = EARLIER_RUNS
) -> tuple[CandidateProjection | None, set[str]]:
    """The candidate's projected cost over ``planned`` samples, from the calibration tasks' samples of the runs under
    ``earlier`` where ``agent_image`` ran against a model (``None`` when there are none); and those task ids. Reads
    records only: nothing is spent."""
    from runner.record.store import summaries_under  # DuckDB's, loaded only when preflight projects

    calibration_tasks = {s.output.task_id for s in load_calibration_set(tasks_dir())}
    samples = agent_samples(summaries_under(earlier), agent_image, calibration_tasks)
    return candidate_projection(candidate, agent_image, samples, planned), calibration_tasks


def candidate_projection_lines(
    candidate: str, agent_image: str, planned: int, dry_runs: Sequence[JudgeDryRun], earlier: Path = EARLIER_RUNS
) -> list[str]:
    """What preflight prints of the candidate's projected cost (:func:`project_candidate`), and the run's."""
    projection, calibration_tasks = project_candidate(candidate, agent_image, planned, earlier)
    return candidate_lines(projection, dry_runs, f"{earlier}/", calibration_tasks)


def planned_samples(spec: RunSpec) -> int:
    """How many samples ``spec`` plans: its tasks (every task of the set without a filter) times its epochs."""
    return len(spec.tasks if spec.tasks is not None else catalog().tasks) * spec.epochs


def image_ids(spec: RunSpec) -> dict[str, str]:
    """The engine's image id of the agent image, by resolved tag; empty for the local backend.

    On the ``ray`` backend these are the driver's: every node must hold the same ids (``runner.cluster``).

    An image the engine does not have is left out: its samples fail as ``sandbox_error`` and say why.
    """
    if spec.backend == "local":
        return {}
    name = own_image(spec.agent_image)
    if name is not None and spec.backend == "docker":
        ref = ensure_images(names=[name])[name]  # built the first time a run names it, reused after
        return {ref.tag: ref.id}
    tag = resolve_image(spec.agent_image)
    found = engine_image_id(tag)
    return {tag: found} if found is not None else {}


def new_run_id() -> str:
    """``<UTC time>-<6 hex>``: sorts by start time, unique on one machine."""
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def start_run(
    spec: RunSpec,
    run_dir: Path | None = None,
    *,
    backend: Backend[Any] | None = None,
    gateway: Gateway | None = None,
    images: dict[str, str] | None = None,
    progress: Progress | None = None,
    preflight: Preflight | None = None,
    ray_address: str | None = None,
    stop: StopRequest | None = None,
    board: str | None = None,
) -> RunResult:
    """Run ``spec`` in a new folder (``runs/<run-id>/`` by default) and write its record.

    ``preflight`` is one the caller already ran; otherwise it runs here (models are probed only when no
    ``gateway`` is given, the model judges are dry-run always). ``ray_address`` is the cluster of the ``ray``
    backend (else ``RAY_ADDRESS``). ``stop``, once set from another thread, ends the run as Ctrl-C does
    (``runner.run.scheduler.StopRequest``). ``board``, the board whose run this is, labels the run's sandboxes and
    limits its sweeps to that board's (``runner.run.sample_runner``); it is not part of the spec or the record.

    Raises:
        RunError: the folder already holds a journal, or the filter names unknown tasks.
        ClusterError: the ``ray`` backend's cluster is unreachable or refused a node.
        WorldError: the snapshot does not match its manifest.
        PreflightError, JudgeDryRunError: preflight failed; nothing was written.
    """
    run_id = new_run_id()
    folder = run_dir or Path("runs") / run_id
    if (folder / JOURNAL_NAME).exists():
        raise RunError(f"{folder} already holds a run; resume it with `ispm run --resume {folder}`")
    check_priced(spec)
    checked = preflight or run_preflight(spec, probe=gateway is None, ray_address=ray_address)
    folder.mkdir(parents=True, exist_ok=True)
    rubrics = load_rubrics()
    started = RunStarted(
        run_id=run_id,
        spec=spec,
        digests=current_digests(rubrics),
        images=images if images is not None else image_ids(spec),
        runner_version=__version__,
        resolved_models=checked.resolved_models,
        judge_dry_runs=checked.judge_dry_runs,
    )
    return _go(folder, started, [], backend, gateway, progress, rubrics, ray_address, stop, board)


def check_priced(spec: RunSpec) -> None:
    """Refuse a run cost limit on a run whose models are not all priced (it could not be held to it).

    Raises:
        RunError: naming each model the price data does not know.
    """
    if spec.run_cost_limit_usd is None:
        return
    models = [m for m in (spec.needed_model, *spec.judges) if m is not None and not is_reference(m)]
    unpriced = [note for m in models for note in price(m, Usage(input_tokens=1, output_tokens=1)).unpriced]
    if unpriced:
        raise RunError("--run-cost-limit needs every model priced; the price data does not know some", unpriced)


def resume_run(
    run_dir: Path,
    *,
    backend: Backend[Any] | None = None,
    gateway: Gateway | None = None,
    progress: Progress | None = None,
    ray_address: str | None = None,
    stop: StopRequest | None = None,
    board: str | None = None,
) -> RunResult:
    """Continue the run in ``run_dir`` with its own spec, skipping every sample already graded (``stop`` and
    ``board`` as for :func:`start_run`).

    A run that already finished or timed out is not run again; its record is rebuilt. A run stopped by a circuit
    breaker continues like an interrupted one; its model judges are dry-run again first, so a judge that is still
    broken stops the resume before any sample runs.

    Raises:
        RunError: no journal there, or the journal is damaged.
        JudgeDryRunError: a judge failed its dry run.
    """
    entries = read_entries(run_dir / JOURNAL_NAME)
    starts = [e for e in entries if isinstance(e, RunStarted)]
    if not starts:
        raise RunError(f"{run_dir / JOURNAL_NAME} has no run_started entry")
    if any(isinstance(e, RunFinished | RunTimedOut) for e in entries):
        return _finish(run_dir, "timed_out" if _timed_out(entries) else "completed")
    rubrics = load_rubrics()
    digests = current_digests(rubrics)
    if digests != starts[0].digests:
        # Half a run graded against one world or rubric set and half against another has no meaning.
        raise RunError(f"the world, tasks or rubrics changed since {run_dir} started; start a new run")
    _, graded = done_samples(entries)
    spec = starts[0].spec
    dry_runs = dry_run(make_judges(spec.judges, rubrics), planned_samples(spec) - len(graded), rubrics)
    started = starts[0].model_copy(
        update={
            "ts": now(),
            "resumed": True,
            "used_s": round(_used(entries, starts[-1]), 3),
            "judge_dry_runs": dry_runs,
        }
    )
    return _go(run_dir, started, entries, backend, gateway, progress, rubrics, ray_address, stop, board)


def _timed_out(entries: list[Entry]) -> bool:
    return any(isinstance(e, RunTimedOut) for e in entries)


def _used(entries: list[Entry], last: RunStarted) -> float:
    # Time of the last attempt up to its last durable entry: a kill -9 leaves no end entry to say it.
    after = entries[entries.index(last) :]
    span = datetime.fromisoformat(after[-1].ts) - datetime.fromisoformat(last.ts)
    return last.used_s + max(0.0, span.total_seconds())


def _go(
    folder: Path,
    started: RunStarted,
    entries: list[Entry],
    backend: Backend[Any] | None,
    gateway: Gateway | None,
    progress: Progress | None,
    rubrics: RubricSet,
    ray_address: str | None = None,
    stop: StopRequest | None = None,
    board: str | None = None,
) -> RunResult:
    spec = started.spec
    log.configure(folder / LOG_NAME)
    # The Docker SDK and urllib3 log every API call at DEBUG: thousands of lines a run that say nothing.
    for noisy in ("docker", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    tasks, truths = catalog().by_id, catalog().truths
    wanted = spec.tasks if spec.tasks is not None else sorted(tasks)
    unknown = sorted(set(wanted) - set(tasks))
    if unknown:
        raise RunError(f"no such tasks: {unknown}; see `ispm tasks list`")
    replay_dir = None
    if spec.calibration == "replay":
        replay_dir = write_recordings([tasks[t] for t in wanted], truths, folder / REPLAY_DIR)
    finished, graded = done_samples(entries)
    # What earlier attempts spent counts against the run's cost limit, in the gateway and in the scheduler alike.
    spent = spent_usd(entries, spec.candidate) if spec.run_cost_limit_usd is not None else 0.0
    # Made before the journal opens: a judge that cannot be made (a key missing) leaves no trace of this start.
    image, judges = resolve_image(spec.agent_image), make_judges(spec.judges, rubrics)
    # The run's own stop request: a cluster makes it when every node it admitted is gone. A caller's request (a
    # board's cancel) is passed on to it, the first reason winning, but is never set by the run: its owner reads it
    # as its own stop.
    request = StopRequest()
    attempt = secrets.token_hex(8)  # this start or resume: labelled on its sandboxes, and naming its node agents
    with (
        stop.passed_on(request) if stop is not None else nullcontext(),
        _sample_runner(started, attempt, backend, gateway, ray_address, board, spent) as (runner, journaling),
        Journal(folder / JOURNAL_NAME) as journal,
    ):
        journal.append(started)
        with journaling(journal, request):
            plan = RunPlan(
                run_id=started.run_id,
                spec=spec,
                image=image,
                tasks={t: tasks[t] for t in wanted},
                truths=truths,
                runner=runner,
                judges=judges,
                world_file=world_dir() / SNAPSHOT_NAME,
                journal=journal,
                replay_dir=replay_dir,
                finished=finished,
                graded=graded,
                attempt=attempt,
                spent_usd=spent,
            )
            outcome, used = execute(plan, used_s=started.used_s, progress=progress, stop=request)
        if outcome == "completed":
            journal.append(RunFinished(used_s=round(used, 3)))
    return _finish(folder, outcome, write=not request.hands_off)


Journaling = Callable[[Journal, StopRequest], AbstractContextManager[None]]
"""What a runner journals itself while the run journals (a cluster: the nodes it leaves out), given the run's stop
request (a cluster stops the run when every node it admitted is gone)."""


def _journals_nothing(journal: Journal, stop: StopRequest) -> AbstractContextManager[None]:
    return nullcontext()


@contextmanager
def _sample_runner(
    started: RunStarted,
    attempt: str,
    backend: Backend[Any] | None,
    gateway: Gateway | None,
    ray_address: str | None,
    board: str | None = None,
    spent_usd: float = 0.0,
) -> Iterator[tuple[SampleRunner, Journaling]]:
    """Where the run's samples run, for the block: this host (``backend``, else the spec's, and ``gateway``, else
    one of the run's own when it needs a model, allowed what is left of the run's cost limit after ``spent_usd``),
    or the cluster of the ``ray`` backend."""
    spec = started.spec
    if spec.backend == "ray":
        # The driver keeps the journal, grading, judges and record; the cluster's nodes run the samples, each with
        # its own model gateway and keys, so no gateway runs here.
        with _cluster(started, attempt, ray_address, board) as cluster:
            yield cluster, cluster.journaling
        return
    with ExitStack() as owned:  # what this run made for itself it closes, the backend first
        if gateway is None and spec.needed_model is not None:
            from runner.gateway.server import Caps, Gateway

            # The agent reaches its model only through this host-side gateway, which also counts its tokens.
            limit = spec.run_cost_limit_usd
            caps = Caps(
                max_tokens=spec.sample_token_limit, max_usd=None if limit is None else max(limit - spent_usd, 0)
            )
            gateway = owned.enter_context(closing(Gateway(spec.needed_model, caps=caps)))
        if backend is None:
            # Closed before the record is written: closing waits for the samples' removals, done behind them.
            backend = owned.enter_context(closing(make_backend(spec.backend, board=board, remove_behind=True)))
        yield HostRunner(backend, gateway, board=board), _journals_nothing


@contextmanager
def _cluster(
    started: RunStarted, attempt: str, ray_address: str | None, board: str | None = None
) -> Iterator[RayRunner]:
    from runner.cluster.driver import RayRunner
    from runner.cluster.model import NodeExpectations

    spec = started.spec
    expected = NodeExpectations(
        runner_version=started.runner_version,
        world_logical=started.digests.world_logical,
        task_set=started.digests.task_set,
        ground_truth=started.digests.ground_truth,
        images=started.images,
        candidate_model=started.resolved_models.get(spec.candidate or ""),
    )
    address = ray_address or os.environ.get("RAY_ADDRESS")
    cluster = RayRunner.connect(
        address, started.run_id, expected, candidate=spec.needed_model, attempt=attempt, board=board
    )
    try:
        yield cluster
    finally:
        cluster.close()


def _finish(folder: Path, outcome: Outcome, *, write: bool = True) -> RunResult:
    tasks = catalog().tasks
    entries = read_entries(folder / JOURNAL_NAME)
    record = build_record(entries, tasks)
    stops = [e for e in entries if isinstance(e, RunInterrupted)]  # this attempt's, when interrupted, is the last
    because = stops[-1].reason if outcome == "interrupted" and stops else None
    if not write:
        # A hands-off stop: the folder is another process's now, and so are its record and report.
        return RunResult(
            run_dir=folder, outcome=outcome, record_path=folder / RECORD_NAME, record=record,
            report_path=folder / REPORT_NAME, interrupted_because=because,
        )  # fmt: skip
    path = write_record(folder, record)
    report = write_report_and_pages(folder, record, tasks=tasks)
    return RunResult(
        run_dir=folder, outcome=outcome, record_path=path, record=record, report_path=report,
        interrupted_because=because,
    )  # fmt: skip


def run_calibration(
    agent: Literal["replay", "null"] = "replay",
    *,
    epochs: int = 1,
    concurrency: int = 2,
    tasks: list[str] | None = None,
    run_dir: Path | None = None,
    build_images: bool = True,
    progress: Progress | None = None,
) -> RunResult:
    """Run a calibration in Docker (building missing images first) and write its record.

    Raises:
        SandboxError: Docker is unreachable.
        ImageError: an image cannot be built.
    """
    images: dict[str, str] = {}
    if build_images:  # only the calibration agent and the base: the other agents are built when a run names them
        images = {ref.tag: ref.id for ref in ensure_images(names=[f"agent-{agent}"]).values()}
    spec = calibration_spec(agent, epochs=epochs, concurrency=concurrency, tasks=tasks)
    return start_run(spec, run_dir, images=images, progress=progress)
