"""One sample's timeline: everything the host knows of it, in time order (docs/trace.md, "Reading a trace").

The timeline joins what the run kept of one sample:

- the model calls, from the sample's transcript (:mod:`runner.trace.reader`): each call's new messages, its reply
  assembled, its tokens; without a transcript (a run from before transcripts, a cluster node), the gateway's figures
  of each call, with no content and no time;
- the SQL the tool ran, from the query log: statement, rows, duration, error;
- the agent's own ``trace.jsonl`` entries, each marked as reported by the agent: it can write anything there;
- the answer, as collected;
- the judges' calls and votes with their rationales.

Events are ordered by when they began. A model call's time is the host's (the gateway's clock); a query's is the
SQL tool's, inside the sandbox, on the same kernel clock. An event without a time keeps its place in its own source:
a model call known only by its figures comes first, an agent entry with no readable time comes just before the
answer.

:func:`build_timeline` is pure; :func:`read_timeline` is the edge that reads the run folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.call import Caller, ModelCall, Usage
from runner.contract import Answer, QueryLogEntry, SampleStatus
from runner.errors import IspmError
from runner.grading.grades import Dimension, Grade
from runner.grading.model import JudgeFailure
from runner.grading.replay import LoggedCheck, sql_key
from runner.run.journal import JOURNAL_NAME, RunStarted, SampleFinished, SampleGraded, read_entries
from runner.sample_key import SampleKey
from runner.trace.conversation import Memo, Message, new_messages, read_request, reply_message
from runner.transcript.model import CapReachedEvent, Transcript
from runner.transcript.storage import read_part

TIMELINE_VERSION = 2
"""The version of the timeline's JSON (``ispm trace --json``). Version 2 holds each model call's figures as the one
model of a call (``call``), where version 1 copied them into the step."""
AGENT_TIME_KEYS = ("ts", "timestamp", "time")
"""Fields of an agent's ``trace.jsonl`` entry read as its time, when one holds an ISO 8601 string."""


class TraceError(IspmError):
    """A sample's timeline cannot be read: the run folder or journal is missing or damaged, or the run holds no such
    sample."""


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class CallStep(_Model):
    """One model call: its figures, what the caller added to the conversation, and the reply."""

    kind: Literal["model_call"] = "model_call"
    number: int
    """The call's number among its caller's calls of this sample, from 1."""
    call: ModelCall
    """Who made it, how and when, what it used and how it ended: the call without its content (which ``sent`` and
    ``reply`` show as a conversation). Its ``started_at`` is ``None`` when the run kept only the call's figures."""
    content: Literal["kept", "omitted", "none"]
    """``kept``: the request and reply are below; ``omitted``: past the sample's capture cap, figures only;
    ``none``: the run kept no transcript of this sample (figures from the gateway's accounting)."""
    system: str | None = None
    """The system prompt, on the caller's first call and whenever it changed."""
    tools: list[str] | None = None
    """The tools offered, on the caller's first call and whenever they changed."""
    sent: list[Message] = Field(default_factory=list)
    """What this request added to the conversation: everything on the first call, then the tool results and new
    turns (the history an agent resends is shown once)."""
    history_rewritten: bool = False
    """The request did not extend the caller's previous one (a compacted history, a side request): ``sent`` is
    then the whole conversation it carried."""
    request_note: str | None = None
    """Why the request is not shown as messages (a body that was not JSON, too large, past the cap)."""
    reply: Message | None = None
    """The reply, assembled from the stream; ``None`` when none began."""

    @property
    def at(self) -> datetime | None:
        """When the request arrived at the gateway (UTC); ``None`` when the run kept only the call's figures."""
        return self.call.started_at

    @property
    def stop_reason(self) -> str | None:
        """Why the model stopped, in the provider's words."""
        return self.call.response.stop_reason if self.call.response is not None else None

    @property
    def complete(self) -> bool:
        """Whether the reply arrived whole (``False``: a cut stream, ``reply`` is what arrived)."""
        return self.call.response.complete if self.call.response is not None else self.call.cut is None


class QueryStep(_Model):
    """One statement the SQL tool ran, from the sample's query log: a line ``ispm-sql`` wrote inside the sandbox, as
    the agent's uid, so one the agent could have written itself. ``replay`` says what the host found of it."""

    kind: Literal["query"] = "query"
    at: datetime | None
    """When it started (the log's time less its duration); ``None`` when the log's time does not parse."""
    sql: str
    """The statement, as the agent gave it."""
    row_count: int | None
    """Rows it returned."""
    truncated: bool
    """Whether the tool cut the rows it showed the agent."""
    duration_ms: float | None
    """How long it ran."""
    error: str | None
    """SQLite's error, when it failed."""
    logged_by: Literal["sql_tool_in_sandbox"] = "sql_tool_in_sandbox"
    """Always the SQL tool inside the sandbox: the host did not see it run, it replayed it."""
    replay: LoggedCheck | None = None
    """What the host's replay on the pristine world found of this text; ``None`` when the run recorded none (a
    sample not graded, or a run journaled before replays were recorded)."""


class AgentStep(_Model):
    """One entry of the agent's own ``trace.jsonl``: what the agent says it did, not what the host saw."""

    kind: Literal["agent_reported"] = "agent_reported"
    at: datetime | None
    """The entry's own time (its ``ts``, ``timestamp`` or ``time``), as the agent wrote it; ``None`` without one."""
    reported_by: Literal["agent"] = "agent"
    """Always ``agent``: the host neither saw nor checked this."""
    entry: dict[str, object]
    """The entry as written (collection bounds its size)."""


class AnswerStep(_Model):
    """What the host collected when the agent ended: the status, the answer, and why it failed."""

    kind: Literal["answer"] = "answer"
    at: datetime
    """When the host journaled the sample (after collection)."""
    status: SampleStatus
    """``ok`` or the failure kind."""
    error: str | None
    """Why the sample failed, when it did."""
    answer: Answer | None
    """The answer as collected; ``None`` when there was none."""
    notes: list[str]
    """What collection noticed without failing the sample."""


class VoteStep(_Model):
    """One judge's grade of one dimension, with its rationale."""

    kind: Literal["vote"] = "vote"
    at: datetime
    """When the votes were journaled."""
    judge: str
    """The judge slot's alias."""
    dimension: Dimension
    """The dimension graded."""
    grade: Grade
    """``correct``, ``partial``, ``incorrect`` or ``abstain``."""
    rationale: str
    """The judge's reason."""
    failure: JudgeFailure | None = None
    """Set on an abstention the judge did not choose."""


class CapStep(_Model):
    """The sample's capture cap was reached: later calls of this caller keep their figures, not their content."""

    kind: Literal["cap_reached"] = "cap_reached"
    at: datetime | None
    """The time of the first call left out."""
    caller: Caller
    """Whose part of the transcript reached the cap."""
    limit_bytes: int
    """The cap."""
    calls_omitted: int
    """Calls whose content was not kept."""
    bytes_omitted: int
    """Bytes of content not kept."""


Step = Annotated[CallStep | QueryStep | AgentStep | AnswerStep | VoteStep | CapStep, Field(discriminator="kind")]
"""One event of a timeline."""


class Totals(_Model):
    """What the sample's calls cost, per caller kind."""

    calls: int = 0
    """Model calls."""
    usage: Usage = Field(default_factory=Usage)
    """Their tokens."""


class SampleTimeline(_Model):
    """One sample, every event in time order."""

    version: int = TIMELINE_VERSION
    """The timeline format's version."""
    run_id: str | None
    """The run."""
    task_id: str
    """The task."""
    epoch: int
    """The epoch, from 1."""
    status: SampleStatus | None
    """The sample's status; ``None`` when it was graded but its run kept no ``sample_finished``."""
    candidate_model: str | None
    """The run's candidate model alias; ``None`` for a calibration run."""
    transcript: Literal["kept", "none", "unreadable"]
    """Whether the model calls' content is here: ``none`` when the run kept no transcript of this sample,
    ``unreadable`` when it did but the file is missing or changed (``notes`` says how)."""
    notes: list[str] = Field(default_factory=list)
    """What a reader should know about what is missing or approximate."""
    agent: Totals
    """The agent's calls and tokens."""
    judges: Totals
    """The judges' calls and tokens."""
    events: list[Step]
    """Everything, in time order."""


# ---------------------------------------------------------------------------------------------------- building
def parse_time(value: object) -> datetime | None:
    """An ISO 8601 string as an aware UTC time; ``None`` for anything else (a naive time is taken as UTC)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def call_steps(calls: Sequence[ModelCall]) -> list[CallStep]:
    """The transcript's calls as steps, each with what it added to its caller's conversation."""
    steps: list[CallStep] = []
    last: dict[str, tuple[list[Message], Message | None, str | None, list[str]]] = {}
    memo = Memo()
    for call in calls:
        lane = f"{call.caller}:{call.judge}"
        body = call.request
        json_request = body is not None and body.encoding == "json"
        request = read_request(call.api, body.content if body is not None and json_request else None, memo)
        reply = reply_message(call.response.blocks) if call.response is not None else None
        note = None
        if call.content_omitted:
            note = "past the sample's capture cap: figures only"
        elif body is not None and not json_request:
            note = f"request kept as {body.encoding}" + (f": {body.note}" if body.note else "")
        previous = last.get(lane)
        if note is None:
            before, answered = (previous[0], previous[1]) if previous else (None, None)
            sent, rewritten = new_messages(before, answered, request.messages, memo)
            last[lane] = (request.messages, reply, request.system, request.tools)
        else:
            sent, rewritten = [], False
        system = request.system if note is None and (previous is None or previous[2] != request.system) else None
        tools = request.tools if note is None and (previous is None or previous[3] != request.tools) else None
        steps.append(
            CallStep(
                number=call.seq + 1,
                call=call.figures(),
                content="omitted" if call.content_omitted else "kept",
                system=system,
                tools=tools or None,
                sent=sent,
                history_rewritten=rewritten,
                request_note=note,
                reply=reply if not call.content_omitted else None,
            )
        )
    return steps


def figures_only(calls: Sequence[ModelCall]) -> list[CallStep]:
    """The gateway's figures of each agent call, for a sample without a transcript: no content (and no time, for a
    run journaled before calls were timed)."""
    return [CallStep(number=i, call=c, content="none") for i, c in enumerate(calls, start=1)]


def query_steps(queries: Sequence[QueryLogEntry], checks: Mapping[str, LoggedCheck] | None = None) -> list[QueryStep]:
    """The query log as steps, each timed at its start and marked with what the host's replay found (``checks``)."""
    steps = []
    for q in queries:
        ended = parse_time(q.ts)
        at = ended - timedelta(milliseconds=q.duration_ms) if ended and q.duration_ms and q.duration_ms > 0 else ended
        steps.append(
            QueryStep(
                at=at,
                sql=q.sql,
                row_count=q.row_count,
                truncated=q.truncated,
                duration_ms=q.duration_ms,
                error=q.error,
                replay=(checks or {}).get(sql_key(q.sql)),
            )
        )
    return steps


def agent_steps(trace: Sequence[dict[str, object]]) -> list[AgentStep]:
    """The agent's own trace entries, each with its own time when it gave one."""
    steps = []
    for entry in trace:
        at = next((t for t in (parse_time(entry.get(k)) for k in AGENT_TIME_KEYS) if t is not None), None)
        steps.append(AgentStep(at=at, entry=entry))
    return steps


def _totals(steps: Sequence[CallStep]) -> Totals:
    return Totals(calls=len(steps), usage=sum((s.call.usage for s in steps if s.call.usage is not None), Usage()))


# Within one instant, the order a sample goes through its stages.
_RANK = {"model_call": 0, "query": 1, "agent_reported": 2, "cap_reached": 3, "answer": 4, "vote": 6}


def _rank(step: Step) -> int:
    if isinstance(step, CallStep) and step.call.caller != "candidate":
        return 5
    return _RANK[step.kind]


def in_time_order(steps: Sequence[Step], start: datetime, end: datetime) -> list[Step]:
    """``steps`` ordered by their time; one without a time keeps its place after the step before it in its own
    source. Untimed model calls count from ``start``, untimed agent entries from ``end`` (the answer)."""
    keyed: list[tuple[datetime, int, int, Step]] = []
    carried: dict[str, datetime] = {}
    for index, step in enumerate(steps):
        source = step.kind if not isinstance(step, CallStep) else f"call:{step.call.caller}"
        fallback = end if isinstance(step, AgentStep) else start
        at = step.at or carried.get(source, fallback)
        carried[source] = at
        keyed.append((at, _rank(step), index, step))
    return [step for *_, step in sorted(keyed, key=lambda k: (k[0], k[1], k[2]))]


def build_timeline(
    key: SampleKey,
    *,
    run_id: str | None,
    candidate_model: str | None,
    finished: SampleFinished | None,
    graded: SampleGraded | None,
    transcript: Transcript | None,
    transcript_problem: str | None = None,
) -> SampleTimeline:
    """The timeline of one sample from what the journal holds of it and its transcript (``None`` when the run
    kept none, or when it could not be read: ``transcript_problem`` then says why)."""
    notes: list[str] = []
    steps: list[Step] = []
    if transcript is not None:
        calls = call_steps(transcript.calls())
        for event in transcript.events:
            if isinstance(event, CapReachedEvent):
                first_omitted = next(
                    (c.at for c in calls if c.call.caller == event.caller and c.content == "omitted"), None
                )
                steps.append(CapStep(at=first_omitted, **event.model_dump(exclude={"kind"})))
                notes.append(
                    f"the capture cap was reached for the {event.caller}: {event.calls_omitted} calls kept their "
                    "figures only"
                )
        state: Literal["kept", "none", "unreadable"] = "kept"
    else:
        usage = finished.usage if finished is not None else None
        calls = figures_only(usage.calls) if usage is not None else []
        state = "unreadable" if transcript_problem else "none"
        if transcript_problem:
            notes.append(f"transcript unreadable: {transcript_problem}")
        if calls:
            notes.append("no transcript of the model calls: the gateway's figures only, without content or time")
    steps += calls
    if finished is not None:
        out = finished.output
        steps += query_steps(out.queries, graded.replay_checks if graded is not None else None)
        steps += agent_steps(out.trace)
        steps.append(
            AnswerStep(
                at=parse_time(finished.ts) or datetime.now(UTC),
                status=out.status,
                error=out.error,
                answer=out.answer,
                notes=out.notes,
            )
        )
        if out.trace:
            notes.append(f"{len(out.trace)} trace.jsonl entries are the agent's own account, not checked by the host")
    else:
        notes.append("the journal holds no sample_finished for this sample: no query log, answer or agent trace")
    if graded is not None:
        when = parse_time(graded.ts) or datetime.now(UTC)
        steps += [
            VoteStep(
                at=when, judge=v.judge, dimension=v.dimension, grade=v.grade, rationale=v.rationale, failure=v.failure
            )
            for v in graded.votes
        ]
    end = parse_time(finished.ts) if finished is not None else None
    spent = finished.output.timings if finished is not None else None
    total = (spent.create + spent.start + spent.agent + spent.collect + spent.remove) if spent else 0.0
    end = end or datetime.now(UTC)
    start = end - timedelta(seconds=total)
    return SampleTimeline(
        run_id=run_id,
        task_id=key.task_id,
        epoch=key.epoch,
        status=finished.output.status if finished is not None else None,
        candidate_model=candidate_model,
        transcript=state,
        notes=notes,
        agent=_totals([c for c in calls if c.call.caller == "candidate"]),
        judges=_totals([c for c in calls if c.call.caller != "candidate"]),
        events=in_time_order(steps, start, end),
    )


# ---------------------------------------------------------------------------------------------------- the edge
class RunSamples(_Model):
    """What the journal holds of a run's samples, as the record reads it."""

    start: RunStarted | None
    """The run's first start: its id, spec and images; ``None`` for a journal without one."""
    finished: dict[str, SampleFinished]
    """The first ``sample_finished`` of each sample, by ``SampleKey.label()``."""
    graded: dict[str, SampleGraded]
    """The last ``sample_graded`` of each sample, by label."""
    order: list[SampleKey]
    """Every sample, in (task, epoch) order."""


def read_run(run_dir: Path) -> RunSamples:
    """What the journal of the run in ``run_dir`` holds of each sample.

    Raises:
        TraceError: the folder has no journal, or the journal is damaged.
    """
    try:
        entries = read_entries(run_dir / JOURNAL_NAME)
    except IspmError as exc:
        raise TraceError(str(exc)) from exc
    start = next((e for e in entries if isinstance(e, RunStarted)), None)
    finished: dict[str, SampleFinished] = {}
    graded: dict[str, SampleGraded] = {}
    keys: dict[str, SampleKey] = {}
    for e in entries:
        if isinstance(e, SampleFinished):
            key = SampleKey(task_id=e.output.task_id, epoch=e.output.epoch)
            finished.setdefault(key.label(), e)
            keys[key.label()] = key
        elif isinstance(e, SampleGraded):
            key = SampleKey(task_id=e.task_id, epoch=e.epoch)
            graded[key.label()] = e
            keys[key.label()] = key
    return RunSamples(
        start=start,
        finished=finished,
        graded=graded,
        order=sorted(keys.values(), key=lambda k: (k.task_id, k.epoch)),
    )


def sample_timeline(run_dir: Path, run: RunSamples, key: SampleKey) -> SampleTimeline:
    """One sample's timeline, its transcript read (and checked) from ``run_dir``; a transcript that cannot be read
    is noted in the timeline, never fatal.

    Raises:
        TraceError: the run holds no such sample.
    """
    label = key.label()
    finished, graded = run.finished.get(label), run.graded.get(label)
    if finished is None and graded is None:
        held = sorted({k.epoch for k in run.order if k.task_id == key.task_id})
        where = f"epochs {', '.join(map(str, held))}" if held else "no epoch of it"
        raise TraceError(f"the run holds no sample {key.task_id} epoch {key.epoch} (it holds {where})")
    # The parts the journal names, read through the reader's check of each part's sha256; the journal itself is read
    # once per run (read_run), not once per sample: it holds every sample's output and can be large.
    parts = [p for p in (finished.transcript if finished else None, graded.transcript if graded else None) if p]
    transcript, problem = None, None
    if parts:
        try:
            events = [event for part in parts for event in read_part(run_dir, part, key)]
            transcript = Transcript(run_id=run.start.run_id if run.start else None, sample=key, events=events)
        except IspmError as exc:
            problem = str(exc)
    return build_timeline(
        key,
        run_id=run.start.run_id if run.start else None,
        candidate_model=run.start.spec.candidate if run.start else None,
        finished=finished,
        graded=graded,
        transcript=transcript,
        transcript_problem=problem,
    )


def read_timeline(run_dir: Path, task_id: str, epoch: int | None = None) -> SampleTimeline:
    """The timeline of ``task_id`` (its lowest epoch unless ``epoch`` is given) in the run at ``run_dir``.

    Raises:
        TraceError: no journal, a damaged journal, or no such sample.
    """
    run = read_run(run_dir)
    if epoch is None:
        epochs = sorted(k.epoch for k in run.order if k.task_id == task_id)
        if not epochs:
            raise TraceError(f"the run holds no sample of task {task_id}")
        epoch = epochs[0]
    return sample_timeline(run_dir, run, SampleKey(task_id=task_id, epoch=epoch))


def timeline_summary(timeline: SampleTimeline) -> dict[str, Any]:
    """How many events of each kind the timeline holds (for logs)."""
    counts: dict[str, int] = {}
    for step in timeline.events:
        counts[step.kind] = counts.get(step.kind, 0) + 1
    return counts
