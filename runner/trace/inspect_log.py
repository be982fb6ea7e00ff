"""``ispm export --format inspect``: a run as one Inspect eval log (JSON, log format version 2).

``inspect_ai.log.read_eval_log`` loads it and ``inspect view`` lists and opens it (docs/trace.md, "Exports"). The
log holds:

- the eval: the task ``runner/ispm_enterprise_sql``, the run's id, the candidate model, the epochs and the reducer
  ``runner/ispm_consensus``, and the task ids: the names ``inspect eval`` gives them (:mod:`runner.inspect_names`), so
  an exported run and an ``inspect eval`` log of the same tasks are one task in ``inspect view``;
- one sample per (task, epoch): the task's prompt as ``input``, the conversation the host saw as ``messages`` (the
  agent's system prompt, each turn it sent, each reply with its tool calls, each tool result), the answer's response
  as the output, one score of the scorer ``ispm_scorer`` as ``inspect eval``'s scorer gives it (each dimension's
  epoch consensus as 1.0, 0.5 or 0.0, ``None`` where it abstained) with every judge's vote and rationale, and the
  agent's tokens as model usage;
- the results: each dimension's mean over the tasks' consensus grades, as ``record.json`` has it, so the numbers
  are the run's, not a recomputation with Inspect's reducers (which break ties the other way: docs/scoring.md).

The models below are the subset of Inspect's log this writes, typed here so the exporter needs no Inspect at run
time (it is a large package); the tests load every log with the real ``inspect_ai`` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner import __version__
from runner.call import OtherBlock, ReasoningBlock, TextBlock, ToolCallBlock
from runner.grading.grades import Grade, score
from runner.inspect_names import METRIC, REDUCER, SCORER, TASK, qualified
from runner.record.model import RunRecord
from runner.trace.conversation import Message, ToolResultBlock
from runner.trace.text import PROVENANCE
from runner.trace.timeline import AnswerStep, CallStep, QueryStep, SampleTimeline, VoteStep

INSPECT_LOG_VERSION = 2
"""The Inspect log format version written."""


class _Log(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ToolCallOut(_Log):
    """A tool call in an assistant message."""

    id: str
    """The call's id."""
    function: str
    """The tool's name."""
    arguments: dict[str, Any]
    """The arguments; ``{"raw": ...}`` when they were not a JSON object."""
    type: Literal["function"] = "function"
    """Always ``function``."""
    parse_error: str | None = None
    """Set when the model's arguments were not JSON."""


class ContentOut(_Log):
    """One piece of a message's content: text or reasoning."""

    type: Literal["text", "reasoning"]
    """Which."""
    text: str | None = None
    """The text (``text``)."""
    reasoning: str | None = None
    """The reasoning (``reasoning``); empty when the provider sent it encrypted or redacted (never kept)."""
    summary: str | None = None
    """The readable summary kept beside encrypted reasoning (Responses' ``summary``), which Inspect shows then."""
    redacted: bool | None = None
    """Whether the provider redacted the reasoning."""


class MessageOut(_Log):
    """One chat message."""

    role: Literal["system", "user", "assistant", "tool"]
    """Who it is from."""
    content: str | list[ContentOut]
    """Its text, or its text and reasoning."""
    source: Literal["input", "generate"] | None = None
    """``generate`` for a model's reply."""
    tool_calls: list[ToolCallOut] | None = None
    """An assistant message's tool calls."""
    model: str | None = None
    """The model that wrote an assistant message."""
    tool_call_id: str | None = None
    """A tool message's call."""
    function: str | None = None
    """A tool message's tool."""
    error: dict[str, str] | None = None
    """A tool message marked as an error: ``{"type": "unknown", "message": ...}``."""


class UsageOut(_Log):
    """Tokens of one model."""

    input_tokens: int
    """Prompt tokens not read from the cache."""
    output_tokens: int
    """Completion tokens."""
    total_tokens: int
    """All of them."""
    input_tokens_cache_read: int | None = None
    """Prompt tokens read from the cache."""
    reasoning_tokens: int | None = None
    """Completion tokens spent reasoning."""


class ScoreOut(_Log):
    """The score of one sample: ``ispm_scorer``'s, one value per graded dimension."""

    value: dict[str, float | None]
    """Each dimension's epoch consensus as 1.0, 0.5 or 0.0; ``None`` where it abstained."""
    answer: str | None = None
    """The answer's verdict, when it gave one."""
    explanation: str
    """Each dimension's grade in words, then every judge's grade and rationale."""
    metadata: dict[str, Any]
    """The grades in words (``grades``) and each judge's vote (``votes``)."""


class OutputOut(_Log):
    """The sample's final output."""

    model: str
    """The candidate model."""
    choices: list[dict[str, Any]]
    """One choice: the answer's response as an assistant message."""
    completion: str
    """The answer's response."""


class SampleOut(_Log):
    """One (task, epoch)."""

    id: str
    """The task's id."""
    epoch: int
    """The epoch."""
    input: str
    """The task's prompt."""
    target: str
    """Empty: the ground truth is the judges' to compare, and a reviewer finds it in tasks/ground_truth.json."""
    messages: list[MessageOut]
    """The conversation the host saw."""
    output: OutputOut
    """The answer."""
    scores: dict[str, ScoreOut]
    """The one scorer's score, under its name."""
    metadata: dict[str, Any]
    """The sample's status, failure, answer, SQL and notes."""
    model_usage: dict[str, UsageOut]
    """The agent's tokens under the candidate model, each model judge's under its alias."""
    started_at: str | None = None
    """When its first model call began."""
    completed_at: str | None = None
    """When the host collected it."""
    error: dict[str, str] | None = None
    """The failure, for a sample that did not end ``ok``."""


class MetricOut(_Log):
    """One metric of a score."""

    name: str
    """``scored_mean``."""
    value: float
    """Its value."""


class ScoreSummaryOut(_Log):
    """One dimension over the run."""

    name: str
    """The dimension."""
    scorer: str
    """``ispm_scorer``."""
    reducer: str
    """The v1 consensus, ``runner/ispm_consensus``."""
    params: dict[str, Any]
    """The scorer's arguments: the judge slots."""
    scored_samples: int
    """Tasks with a real consensus grade."""
    unscored_samples: int
    """Tasks whose consensus abstained."""
    metrics: dict[str, MetricOut]
    """The mean of the scored tasks; none where no task was scored."""


class EvalLogOut(_Log):
    """The whole log."""

    version: int = INSPECT_LOG_VERSION
    """The log format version."""
    status: Literal["started", "success", "cancelled", "error"]
    """``success`` for a completed run; ``error`` for one that timed out; ``started`` for one not finished."""
    eval: dict[str, Any]
    """What ran."""
    plan: dict[str, Any]
    """How: one step, the agent image (Inspect's header reader requires a plan)."""
    results: dict[str, Any] | None = None
    """The run's scores; ``None`` without a score."""
    stats: dict[str, Any]
    """Start, end and model usage."""
    error: dict[str, str] | None = None
    """Why the run has no score."""
    samples: list[SampleOut] = Field(default_factory=list)
    """Every sample."""


def _text(message: Message) -> str:
    return "\n".join(p.text for p in message.parts if isinstance(p, TextBlock))


def _assistant(message: Message, model: str | None) -> MessageOut:
    content: list[ContentOut] = []
    calls: list[ToolCallOut] = []
    for i, p in enumerate(message.parts):
        if isinstance(p, ReasoningBlock):
            if p.redacted:  # Inspect's reasoning is then the withheld content; what can be read is the summary
                content.append(ContentOut(type="reasoning", reasoning="", summary=p.text or None, redacted=True))
            else:
                content.append(ContentOut(type="reasoning", reasoning=p.text))
        elif isinstance(p, TextBlock):
            content.append(ContentOut(type="text", text=p.text))
        elif isinstance(p, ToolCallBlock):
            parsed = isinstance(p.input, dict)
            calls.append(
                ToolCallOut(
                    id=p.id or f"call-{i}",
                    function=p.name,
                    arguments=p.input if isinstance(p.input, dict) else {"raw": p.arguments},
                    parse_error=None if parsed else "the arguments are not a JSON object",
                )
            )
        elif isinstance(p, OtherBlock):
            content.append(ContentOut(type="text", text=f"[{p.provider_type}]"))
    return MessageOut(role="assistant", content=content, source="generate", tool_calls=calls or None, model=model)


def _messages(sent: Sequence[Message], names: dict[str, str]) -> list[MessageOut]:
    out = []
    for m in sent:
        if m.role == "assistant":
            out.append(_assistant(m, None))
            continue
        for p in m.parts:
            if isinstance(p, ToolResultBlock):
                error = {"type": "unknown", "message": p.text[:2000]} if p.is_error else None
                out.append(
                    MessageOut(
                        role="tool",
                        content=p.text,
                        tool_call_id=p.call_id,
                        function=names.get(p.call_id or ""),
                        error=error,
                    )
                )
        text = _text(m)
        if text or not any(isinstance(p, ToolResultBlock) for p in m.parts):
            out.append(MessageOut(role="system" if m.role == "system" else "user", content=text, source="input"))
    return out


def conversation(timeline: SampleTimeline, prompt: str) -> list[MessageOut]:
    """The agent's conversation as Inspect messages: the system prompt, then each turn sent and each reply."""
    calls = [
        e for e in timeline.events if isinstance(e, CallStep) and e.call.caller == "candidate" and e.content == "kept"
    ]
    out: list[MessageOut] = []
    names: dict[str, str] = {}
    for call in calls:
        if call.system and not out:
            out.append(MessageOut(role="system", content=call.system, source="input"))
        out += _messages(call.sent, names)
        if call.reply is not None:
            names.update({p.id: p.name for p in call.reply.parts if isinstance(p, ToolCallBlock) and p.id})
            out.append(_assistant(call.reply, call.call.returned_model or call.call.requested_model))
    if not out:
        out.append(MessageOut(role="user", content=prompt, source="input"))
    return out


def _score(votes: Sequence[VoteStep], consensus: dict[str, Grade], verdict: str | None) -> ScoreOut:
    lines = []
    for d, g in consensus.items():
        lines.append(f"{d}: {g}")
        lines += [f"  {v.judge}: {v.grade}: {v.rationale}" for v in votes if v.dimension == d]
    return ScoreOut(
        value={d: score(g) for d, g in consensus.items()},
        answer=verdict,
        explanation="\n".join(lines),
        metadata={"grades": consensus, "votes": [v.model_dump(mode="json", exclude={"kind", "at"}) for v in votes]},
    )


def _error(message: str) -> dict[str, str]:
    """An Inspect error: ours have no traceback, only a reason."""
    return {"message": message, "traceback": "", "traceback_ansi": ""}


def _time(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _usage(input_tokens: int, output_tokens: int, cached: int, reasoning: int) -> UsageOut:
    # Inspect counts cache reads apart from input_tokens; the gateway counts them inside.
    return UsageOut(
        input_tokens=input_tokens - cached,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        input_tokens_cache_read=cached or None,
        reasoning_tokens=reasoning or None,
    )


def _usage_by_model(calls: Sequence[tuple[str, CallStep]]) -> dict[str, UsageOut]:
    """Each model's tokens over ``calls``: the agent's under the candidate, a judge's under its alias."""
    sums: dict[str, list[int]] = {}
    for name, call in calls:
        u = call.call.usage
        if u is not None:
            total = sums.setdefault(name, [0, 0, 0, 0])
            for i, n in enumerate((u.input_tokens, u.output_tokens, u.cached_tokens, u.reasoning_tokens)):
                total[i] += n
    return {name: _usage(*figures) for name, figures in sums.items()}


def eval_sample(timeline: SampleTimeline, prompt: str, consensus: dict[str, Grade], model: str) -> SampleOut:
    """One sample of the log."""
    answer = next((e for e in timeline.events if isinstance(e, AnswerStep)), None)
    votes = [e for e in timeline.events if isinstance(e, VoteStep)]
    verdict = answer.answer.verdict if answer and answer.answer else None
    response = answer.answer.response if answer and answer.answer else ""
    calls = [e for e in timeline.events if isinstance(e, CallStep) and e.call.caller == "candidate"]
    judged = [e for e in timeline.events if isinstance(e, CallStep) and e.call.caller != "candidate"]
    usage = _usage_by_model([(model, c) for c in calls] + [(c.call.judge or c.call.caller, c) for c in judged])
    failed = answer is not None and answer.status != "ok"
    return SampleOut(
        id=timeline.task_id,
        epoch=timeline.epoch,
        input=prompt,
        target="",
        messages=conversation(timeline, prompt),
        output=OutputOut(
            model=model,
            choices=[{"message": {"role": "assistant", "content": response, "source": "generate"}}],
            completion=response,
        ),
        scores={SCORER: _score(votes, consensus, verdict)},
        metadata={
            "status": timeline.status,
            "transcript": timeline.transcript,
            "answer": answer.answer.model_dump(mode="json") if answer and answer.answer else None,
            "notes": timeline.notes,
            "provenance": PROVENANCE,
            # Logged inside the sandbox, each with what the host's replay found of it (docs/trace.md).
            "sql_logged": [
                q.model_dump(mode="json", exclude={"kind"}) for q in timeline.events if isinstance(q, QueryStep)
            ],
        },
        model_usage=usage,
        started_at=_time(calls[0].at) if calls and calls[0].at else None,
        completed_at=_time(answer.at) if answer else None,
        error=_error(answer.error or answer.status) if failed and answer else None,
    )


def eval_log(record: RunRecord, samples: list[SampleOut]) -> EvalLogOut:
    """The log of a run: its spec, its scores as the record has them, and its samples."""
    model = record.candidate_model or f"none/{record.calibration or 'no-candidate'}"
    dimensions = list(record.scores.dimensions) if record.scores is not None else []
    results = None
    params = {"judges": list(record.spec.judges)}
    if record.scores is not None:
        summaries = [
            ScoreSummaryOut(
                name=d,
                scorer=SCORER,
                reducer=qualified(REDUCER),
                params=params,
                scored_samples=s.graded,
                unscored_samples=s.abstained,
                metrics={METRIC: MetricOut(name=METRIC, value=s.mean)} if s.mean is not None else {},
            )
            for d, s in record.scores.dimensions.items()
        ]
        results = {
            "total_samples": record.samples_planned,
            "completed_samples": record.samples_graded,
            "scores": [s.model_dump(mode="json") for s in summaries],
        }
    agent = record.agent_tokens
    usage = {}
    if agent is not None:
        usage[model] = _usage(agent.input_tokens, agent.output_tokens, agent.cached_tokens, agent.reasoning_tokens)
    for slot, judged in record.judge_tokens.items():
        if judged.requests:
            usage[slot] = _usage(judged.input_tokens, judged.output_tokens, 0, 0)
    status: Literal["started", "success", "error"] = "started"
    if record.status == "completed":
        status = "success"
    elif record.status == "timed_out":
        status = "error"
    return EvalLogOut(
        status=status,
        eval={
            "run_id": record.run_id,
            "eval_id": record.run_id,
            "created": record.started_at,
            "task": qualified(TASK),
            "task_registry_name": qualified(TASK),
            "task_id": record.run_id,
            "dataset": {
                "name": "ispm-crossvendor-v1",
                "samples": len({s.task_id for s in record.samples}),
                "sample_ids": sorted({s.task_id for s in record.samples}),
            },
            "model": model,
            "config": {"epochs": record.spec.epochs, "epochs_reducer": [qualified(REDUCER)]},
            "scorers": [{"name": SCORER, "options": params, "metrics": {d: [{"name": METRIC}] for d in dimensions}}],
            "packages": {"ispm": __version__},
            "metadata": {
                "official": record.official,
                "calibration": record.calibration,
                "agent_image": record.spec.agent_image,
                "judges": list(record.spec.judges),
                "digests": record.digests.model_dump(mode="json"),
            },
        },
        plan={"name": "plan", "steps": [{"solver": record.spec.agent_image, "params": {}}]},
        results=results,
        stats={
            "started_at": record.started_at,
            "completed_at": record.ended_at or "",
            "model_usage": {m: u.model_dump(mode="json", exclude_none=True) for m, u in usage.items()},
        },
        error=None
        if record.scores is not None
        else {"message": f"the run has no score ({record.status})", "traceback": ""},
        samples=samples,
    )
