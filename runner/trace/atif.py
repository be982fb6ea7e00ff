"""``ispm export --format atif``: each sample's timeline as an ATIF trajectory (Harbor's Agent Trajectory
Interchange Format), version ``ATIF-v1.8`` (docs/trace.md, "Exports").

One trajectory per sample, one file each. The steps are what the host saw:

- a ``system`` step with the system prompt, and a ``user`` step with the first user turn, as the agent sent them
  (the task's prompt when the run kept no transcript);
- an ``agent`` step per model call of the agent: the reply's text, reasoning and tool calls, the call's tokens as
  ``metrics``, and as its ``observation`` the tool results the agent sent back on its next call; the SQL the tool
  ran during the turn is in the step's ``extra.queries``, from the host's query log;
- a ``user`` step for any later user turn the agent sent;
- a ``system`` step per SQL statement run when there was no model call to hang it on (an agent that queries without
  a model, such as the replay agent), and a last ``system`` step with the collected answer.

ATIF has no place for grades: the judges' votes, the epoch's consensus, the sample's status and the agent's own
``trace.jsonl`` (unchecked by the host) are in the trajectory's ``extra.ispm``.

The models below are the subset of ATIF this writes, typed here so the exporter needs no ATIF library at run time;
the tests validate every file against the ``atif`` package's own models (ATIF v1.8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner import __version__
from runner.call import ReasoningBlock, TextBlock, ToolCallBlock
from runner.sample_key import SampleKey
from runner.trace.conversation import Message, ToolResultBlock
from runner.trace.text import PROVENANCE, replay_words
from runner.trace.timeline import (
    AgentStep,
    AnswerStep,
    CallStep,
    QueryStep,
    SampleTimeline,
    VoteStep,
)

ATIF_VERSION = "ATIF-v1.8"
"""The ATIF version every exported trajectory declares."""


class _Atif(BaseModel):
    # ATIF's own models forbid unknown fields; so do these, and None fields are left out when written.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class AtifAgent(_Atif):
    """The agent system that produced the trajectory."""

    name: str
    """The agent image the run ran."""
    version: str
    """The image's id as the engine resolved it (``unknown`` when the run did not record one)."""
    model_name: str | None = None
    """The run's candidate model alias."""
    extra: dict[str, Any] | None = None
    """The runner's version."""


class AtifToolCall(_Atif):
    """One tool call of an agent step."""

    tool_call_id: str
    """The call's id, which an observation result refers to."""
    function_name: str
    """The tool's name."""
    arguments: dict[str, Any]
    """The arguments; ``{"raw": ...}`` when the model's text was not a JSON object."""


class AtifObservationResult(_Atif):
    """One result: a tool's output, or an event of the host's."""

    source_call_id: str | None = None
    """The tool call it answers; ``None`` for a host event."""
    content: str | None = None
    """The output as text."""
    extra: dict[str, Any] | None = None
    """``is_error`` when the agent marked the result as an error."""


class AtifObservation(_Atif):
    """What came back after a step."""

    results: list[AtifObservationResult]
    """One per tool result or event."""


class AtifMetrics(_Atif):
    """One model call's tokens."""

    prompt_tokens: int | None = None
    """Prompt tokens, cached ones included."""
    completion_tokens: int | None = None
    """Completion tokens, reasoning included."""
    cached_tokens: int | None = None
    """Prompt tokens served from the provider's cache."""
    extra: dict[str, Any] | None = None
    """``reasoning_tokens``, latency and time to first token."""


class AtifStep(_Atif):
    """One step of a trajectory."""

    step_id: int
    """Its number, from 1."""
    timestamp: str | None = None
    """When it began (ISO 8601, UTC)."""
    source: Literal["system", "user", "agent"]
    """Who it is from."""
    model_name: str | None = None
    """The model id the provider returned (agent steps only)."""
    message: str
    """The text of the turn."""
    reasoning_content: str | None = None
    """The reasoning the provider returned (agent steps only)."""
    tool_calls: list[AtifToolCall] | None = None
    """The tool calls of the turn (agent steps only)."""
    observation: AtifObservation | None = None
    """The tool results, or the host's event."""
    metrics: AtifMetrics | None = None
    """The call's tokens (agent steps only)."""
    extra: dict[str, Any] | None = None
    """What ATIF has no field for: the call's outcome and API, the SQL run during the turn."""
    llm_call_count: int | None = None
    """1 for a model call."""


class AtifFinalMetrics(_Atif):
    """The trajectory's totals."""

    total_prompt_tokens: int
    """Prompt tokens over every call."""
    total_completion_tokens: int
    """Completion tokens over every call."""
    total_cached_tokens: int
    """Cached prompt tokens over every call."""
    total_steps: int
    """Steps in the trajectory."""


class AtifTrajectory(_Atif):
    """One sample's trajectory."""

    schema_version: str = ATIF_VERSION
    """The ATIF version written."""
    session_id: str | None
    """The run's id."""
    trajectory_id: str
    """``<run>/<task>.e<epoch>``."""
    agent: AtifAgent
    """The agent system."""
    steps: list[AtifStep]
    """Every step, in time order."""
    notes: str | None = None
    """What is missing or approximate, from the timeline's notes."""
    final_metrics: AtifFinalMetrics
    """Totals over the agent's calls."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """``ispm``: the task, epoch, status, answer, votes, the epoch's consensus and the agent's own trace."""


def _time(at: datetime | None) -> str | None:
    return at.isoformat().replace("+00:00", "Z") if at is not None else None


def _texts(message: Message | None) -> tuple[str, str | None, list[AtifToolCall]]:
    """A message's text, reasoning and tool calls."""
    if message is None:
        return "", None, []
    text = "\n".join(p.text for p in message.parts if isinstance(p, TextBlock))
    thought = "\n".join(p.text for p in message.parts if isinstance(p, ReasoningBlock) and p.text)
    calls = [
        AtifToolCall(
            tool_call_id=p.id or f"call-{i}",
            function_name=p.name,
            arguments=p.input if isinstance(p.input, dict) else {"raw": p.arguments},
        )
        for i, p in enumerate(message.parts)
        if isinstance(p, ToolCallBlock)
    ]
    return text, thought or None, calls


def _user_turns(messages: Sequence[Message]) -> list[str]:
    """The text of each user message that is a turn of its own, not a tool result."""
    turns = []
    for m in messages:
        if m.role in ("user", "system") and not any(isinstance(p, ToolResultBlock) for p in m.parts):
            text = "\n".join(p.text for p in m.parts if isinstance(p, TextBlock))
            if text:
                turns.append(text)
    return turns


def _results(messages: Sequence[Message], ids: set[str]) -> list[AtifObservationResult]:
    found = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolResultBlock):
                matched = p.call_id if p.call_id in ids else None
                found.append(
                    AtifObservationResult(
                        source_call_id=matched, content=p.text, extra={"is_error": True} if p.is_error else None
                    )
                )
    return found


def _query(q: QueryStep) -> dict[str, Any]:
    # logged_by and replay come along: who wrote the line, and what the host's replay found of it.
    return q.model_dump(mode="json", exclude={"kind"})


def _agent_step(call: CallStep, following: CallStep | None, queries: list[QueryStep]) -> AtifStep:
    text, thought, tool_calls = _texts(call.reply)
    results = _results(following.sent, {c.tool_call_id for c in tool_calls}) if following else []
    figures = call.call
    usage = figures.usage
    extra: dict[str, Any] = {"api": figures.api, "outcome": figures.outcome, "stop_reason": call.stop_reason}
    if figures.error:
        extra["error"] = figures.error
    if call.content != "kept":
        extra["content"] = call.content
    if queries:
        extra["queries"] = [_query(q) for q in queries]
    return AtifStep(
        step_id=0,
        timestamp=_time(call.at),
        source="agent",
        model_name=figures.returned_model or figures.requested_model,
        message=text,
        reasoning_content=thought,
        tool_calls=tool_calls or None,
        observation=AtifObservation(results=results) if results else None,
        metrics=AtifMetrics(
            prompt_tokens=usage.input_tokens if usage else None,
            completion_tokens=usage.output_tokens if usage else None,
            cached_tokens=usage.cached_tokens if usage else None,
            extra={
                "reasoning_tokens": usage.reasoning_tokens if usage else 0,
                "latency_s": figures.latency_s,
                "ttft_s": figures.ttft_s,
            },
        ),
        extra=extra,
        llm_call_count=1,
    )


def trajectory_steps(timeline: SampleTimeline, prompt: str | None) -> list[AtifStep]:
    """The ATIF steps of one timeline (numbered from 1)."""
    calls = [e for e in timeline.events if isinstance(e, CallStep) and e.call.caller == "candidate"]
    queries = [e for e in timeline.events if isinstance(e, QueryStep)]
    answer = next((e for e in timeline.events if isinstance(e, AnswerStep)), None)
    steps: list[AtifStep] = []
    first = calls[0] if calls else None
    if first is not None and first.system:
        steps.append(AtifStep(step_id=0, timestamp=_time(first.at), source="system", message=first.system))
    opening = _user_turns(first.sent) if first is not None else []
    if not opening and prompt is not None:
        opening = [prompt]
    for text in opening:
        steps.append(AtifStep(step_id=0, timestamp=_time(first.at if first else None), source="user", message=text))
    # Each query goes with the model call whose turn it ran in: the last call that began before it.
    by_call: dict[int, list[QueryStep]] = {}
    loose: list[QueryStep] = []
    for q in queries:
        before = [i for i, c in enumerate(calls) if c.at is not None and q.at is not None and c.at <= q.at]
        if before:
            by_call.setdefault(before[-1], []).append(q)
        elif calls and all(c.at is None for c in calls):
            by_call.setdefault(len(calls) - 1, []).append(q)
        else:
            loose.append(q)
    for q in loose:
        outcome = q.error or f"{q.row_count} rows"
        steps.append(
            AtifStep(
                step_id=0,
                timestamp=_time(q.at),
                source="system",
                message=f"The SQL tool inside the sandbox logged a statement ({replay_words(q)}): {q.sql}",
                observation=AtifObservation(results=[AtifObservationResult(content=outcome)]),
                extra={"query": _query(q)},
            )
        )
    for i, call in enumerate(calls):
        following = calls[i + 1] if i + 1 < len(calls) else None
        if i > 0:
            for text in _user_turns(call.sent):
                steps.append(AtifStep(step_id=0, timestamp=_time(call.at), source="user", message=text))
        steps.append(_agent_step(call, following, by_call.get(i, [])))
    if answer is not None:
        response = answer.answer.response if answer.answer else "(no answer)"
        steps.append(
            AtifStep(
                step_id=0,
                timestamp=_time(answer.at),
                source="system",
                message=f"The host collected the answer (status {answer.status}): {response}",
            )
        )
    return [s.model_copy(update={"step_id": n}) for n, s in enumerate(steps, start=1)]


def trajectory(
    timeline: SampleTimeline,
    *,
    agent_image: str,
    image_id: str | None,
    prompt: str | None,
    consensus: Mapping[str, str] | None = None,
) -> AtifTrajectory:
    """The ATIF trajectory of one sample's timeline."""
    steps = trajectory_steps(timeline, prompt)
    answer = next((e for e in timeline.events if isinstance(e, AnswerStep)), None)
    votes = [e.model_dump(mode="json", exclude={"kind"}) for e in timeline.events if isinstance(e, VoteStep)]
    reported = [e.entry for e in timeline.events if isinstance(e, AgentStep)]
    a = timeline.agent
    return AtifTrajectory(
        session_id=timeline.run_id,
        trajectory_id=f"{timeline.run_id or 'run'}/{SampleKey(task_id=timeline.task_id, epoch=timeline.epoch).label()}",
        agent=AtifAgent(
            name=agent_image,
            version=image_id or "unknown",
            model_name=timeline.candidate_model,
            extra={"runner": f"ispm {__version__}"},
        ),
        steps=steps,
        notes="; ".join(timeline.notes) or None,
        final_metrics=AtifFinalMetrics(
            total_prompt_tokens=a.usage.input_tokens,
            total_completion_tokens=a.usage.output_tokens,
            total_cached_tokens=a.usage.cached_tokens,
            total_steps=len(steps),
        ),
        extra={
            "ispm": {
                "task_id": timeline.task_id,
                "epoch": timeline.epoch,
                "status": timeline.status,
                "transcript": timeline.transcript,
                "answer": answer.answer.model_dump(mode="json") if answer and answer.answer else None,
                "error": answer.error if answer else None,
                "votes": votes,
                "epoch_consensus": dict(consensus or {}),
                "agent_reported_trace": reported,
                "provenance": PROVENANCE,
            }
        },
    )
