"""A timeline as plain text for a terminal: one line per event, its content indented under it, long text cut.

What ``ispm trace`` prints without ``--json``. Every line is plain text: control characters an agent or a model
wrote (an escape sequence that would recolour or move the cursor of the reader's terminal) are shown as ``\\x..``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from runner.call import OtherBlock, ReasoningBlock, TextBlock, ToolCallBlock, Usage
from runner.prices import PRICES_LABEL, Cost, price
from runner.trace.conversation import Message, ToolResultBlock
from runner.trace.sql_text import SqlLayout, sql_of_call
from runner.trace.timeline import AgentStep, AnswerStep, CallStep, CapStep, QueryStep, SampleTimeline, Step, VoteStep

MAX_TEXT_CHARS = 400
"""Characters of one piece of content printed; the rest is counted (``--json`` prints everything)."""
MAX_AGENT_CHARS = 160
"""Characters of one of the agent's own trace entries printed: they repeat what the host saw, at length."""
INDENT = "    "
WITHHELD = "[encrypted or redacted by the provider: withheld]"
"""Printed for reasoning the provider sent only encrypted (``encrypted_content``) or redacted: never readable here."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """``text`` with every control character but newline and tab shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` up to ``limit`` characters, saying how many more there were."""
    text = inert(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def _block(text: str, prefix: str = INDENT) -> Iterator[str]:
    for line in text.splitlines() or [""]:
        yield prefix + line


def _time(step: Step) -> str:
    at = step.at
    return at.strftime("%H:%M:%S.%f")[:-3] if at is not None else "--:--:--.---"


def _tokens(step: CallStep) -> str:
    u = step.call.usage
    if u is None:
        return "no usage reported"
    cached = f", {u.cached_tokens} cached" if u.cached_tokens else ""
    return f"{u.input_tokens} in{cached} / {u.output_tokens} out"


def _reasoning(part: ReasoningBlock) -> str:
    """The reasoning text kept (a summary beside encrypted content included), and a mark for what was withheld."""
    if not part.redacted:
        return cut(part.text)
    if not part.text:
        return WITHHELD
    return f"{cut(part.text)} {WITHHELD}"


def _message(message: Message, sql: SqlLayout, role: str | None = None) -> Iterator[str]:
    who = role or message.role
    for part in message.parts:
        if isinstance(part, TextBlock):
            yield from _block(f"{who}: {cut(part.text)}")
        elif isinstance(part, ReasoningBlock):
            yield from _block(f"{who} reasoning: {_reasoning(part)}")
        elif isinstance(part, ToolCallBlock):
            found = sql_of_call(part.input)
            yield f"{INDENT}tool call {inert(part.name)} ({inert(part.id or 'no id')}): {cut(part.arguments)}"
            if found is not None:
                yield from _block(cut(sql(found)), INDENT * 2)
        elif isinstance(part, ToolResultBlock):
            error = " (error)" if part.is_error else ""
            yield from _block(f"tool result ({inert(part.call_id or 'no id')}){error}: {cut(part.text)}")
        elif isinstance(part, OtherBlock):
            yield f"{INDENT}{who}: [{inert(part.provider_type)}]"


def _call(step: CallStep, sql: SqlLayout) -> Iterator[str]:
    call = step.call
    who = "model call" if call.caller == "candidate" else f"judge call ({inert(call.judge or call.caller)})"
    route = call.api if call.provider_api in (None, call.api) else f"{call.api}->{call.provider_api}"
    model = inert(call.returned_model or call.requested_model or "?")
    ending = call.outcome if call.outcome != "ok" else (step.stop_reason or "ok")
    yield (f"{_time(step)}  {who} {step.number}  {route}  {model}  {_tokens(step)}  {call.latency_s:.2f} s  {ending}")
    if call.error:
        yield f"{INDENT}error: {cut(call.error)}"
    if step.content == "none":
        return
    if step.request_note:
        yield f"{INDENT}({inert(step.request_note)})"
    if step.system is not None:
        yield from _block(f"system: {cut(step.system)}")
    if step.tools:
        yield f"{INDENT}tools: {inert(', '.join(step.tools))}"
    if step.history_rewritten:
        yield f"{INDENT}(the request rewrote the history: the whole conversation it sent follows)"
    for message in step.sent:
        yield from _message(message, sql)
    if step.reply is not None:
        if not step.complete:
            yield f"{INDENT}(the reply was cut; what arrived:)"
        yield from _message(step.reply, sql, None if call.caller == "candidate" else "judge")


PROVENANCE = (
    "model calls captured by the host (its gateway); SQL logged by the SQL tool inside the sandbox (as the agent's "
    "user: the agent could write such a line itself), each marked as the host's replay found it; 'reported by the "
    "agent' lines written by the agent (trace.jsonl)"
)
"""Who wrote each kind of line of a trace: printed with every trace, on every page and in every export."""


def replay_words(step: QueryStep) -> str:
    """What the host's replay found of a logged statement, in words (``inert``: the detail may quote the agent)."""
    return inert(step.replay.words()) if step.replay is not None else "host replay: none recorded for this run"


def _query(step: QueryStep, sql: SqlLayout) -> Iterator[str]:
    rows = f"{step.row_count} rows" + (" (cut)" if step.truncated else "")
    outcome = f"error: {cut(step.error)}" if step.error else rows
    took = f"  {step.duration_ms:.1f} ms" if step.duration_ms is not None else ""
    yield f"{_time(step)}  SQL logged in the sandbox  {outcome}{took}  · {replay_words(step)}"
    yield from _block(cut(sql(step.sql)))


def _answer(step: AnswerStep) -> Iterator[str]:
    yield f"{_time(step)}  answer  {step.status}"
    if step.error:
        yield f"{INDENT}failure: {cut(step.error)}"
    for note in step.notes:
        yield f"{INDENT}note: {cut(note)}"
    if step.answer is None:
        yield f"{INDENT}(no answer)"
        return
    yield f"{INDENT}verdict: {step.answer.verdict or 'none'}"
    yield from _block(cut(step.answer.response))
    yield f"{INDENT}evidence: {len(step.answer.evidence)} items; declared SQL: {len(step.answer.queries)}"


def lines(timeline: SampleTimeline, sql: SqlLayout | None = None) -> Iterator[str]:
    """The timeline as text lines, a header first."""
    layout = sql or SqlLayout()
    status = timeline.status or "not collected"
    yield f"{timeline.task_id} epoch {timeline.epoch} · {status} · run {timeline.run_id or '?'}"
    a, j = timeline.agent, timeline.judges
    yield (
        f"agent: {a.calls} calls, {a.usage.input_tokens} in / {a.usage.output_tokens} out tokens · "
        f"judges: {j.calls} calls, {j.usage.input_tokens} in / {j.usage.output_tokens} out tokens · "
        f"transcript {timeline.transcript}"
    )
    yield f"who wrote what: {PROVENANCE}"
    for note in timeline.notes:
        yield f"note: {inert(note)}"
    for step in timeline.events:
        if isinstance(step, CallStep):
            yield from _call(step, layout)
        elif isinstance(step, QueryStep):
            yield from _query(step, layout)
        elif isinstance(step, AgentStep):
            text = json.dumps(step.entry, ensure_ascii=False, sort_keys=True, default=str)
            yield f"{_time(step)}  reported by the agent: {cut(text, MAX_AGENT_CHARS)}"
        elif isinstance(step, AnswerStep):
            yield from _answer(step)
        elif isinstance(step, VoteStep):
            failure = f" ({step.failure})" if step.failure else ""
            yield f"{_time(step)}  vote  {inert(step.judge)}  {step.dimension}  {step.grade}{failure}"
            yield from _block(cut(step.rationale))
        elif isinstance(step, CapStep):
            yield (
                f"{_time(step)}  capture cap reached ({step.caller}): {step.calls_omitted} calls, "
                f"{step.bytes_omitted} bytes not kept (cap {step.limit_bytes} bytes)"
            )


def render_text(timeline: SampleTimeline) -> str:
    """The whole timeline as text, lines joined."""
    return "\n".join(lines(timeline))


def sample_cost(timeline: SampleTimeline) -> tuple[Cost, Cost]:
    """The agent's and the judges' dollars on this sample, each call priced as its model's when it was made."""
    agent, judges = Cost(), Cost()
    for step in timeline.events:
        if not isinstance(step, CallStep):
            continue
        call = step.call
        usage = call.usage or Usage()
        if call.caller == "candidate":
            agent += price(timeline.candidate_model, usage, call.started_at, call.returned_model)
            if call.usage is None and call.outcome == "ok":
                agent += Cost(unpriced=("agent calls whose provider reported no usage: not counted, not priced",))
        else:
            judges += price(call.judge, usage, call.started_at, call.returned_model)
    return agent, judges


def cost_lines(timeline: SampleTimeline) -> Iterator[str]:
    """The sample's dollars, after its timeline: what ``ispm trace`` prints last."""
    agent, judges = sample_cost(timeline)
    yield f"cost: {(agent + judges).text()} · agent {agent.text()} · judges {judges.text()} · prices: {PRICES_LABEL}"
    for note in (agent + judges).unpriced:
        yield f"cost note: {inert(note)}"
