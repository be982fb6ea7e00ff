"""A run folder written entry by entry, with fixed times, for tests that assert exact output of its trace.

``write_run`` writes what a run writes (the journal, one transcript stored by the real store, ``record.json``
built from the journal) for one sample of ``ispm-001``: an agent on Anthropic Messages that makes two streamed
calls, the SQL tool running one statement after the first (and one that failed), the agent's own trace (one
entry with a time, one without), the answer, one judge call (as a model judge's capture keeps it), and two
reference-judge slots' votes. Everything is at a fixed
instant, so the timeline and its text are the same on every machine.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runner.call import Body, ModelCall, Reply, TextBlock, ToolCallBlock, Usage
from runner.contract import Answer, QueryLogEntry, SampleOutput, SampleTimings
from runner.gateway.model import SampleUsage
from runner.grading.model import JudgeVote
from runner.grading.replay import LoggedCheck, sql_key
from runner.paths import tasks_dir
from runner.record.build import build_record, write_record
from runner.run.digests import current_digests
from runner.run.journal import JOURNAL_NAME, Journal, RunFinished, RunStarted, SampleFinished, SampleGraded
from runner.run.spec import Digests, RunSpec
from runner.sample_key import SampleKey
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.transcript.storage import TranscriptBuilder

RUN_ID = "20261201T090000Z-trace"
TASK_ID = "ispm-001"
KEY = SampleKey(task_id=TASK_ID, epoch=1)
T0 = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status"
BAD_SQL = "SELECT nope FROM okta_users"
REPLAY_CHECKS = {
    sql_key(SQL): LoggedCheck(finding="same"),
    sql_key(BAD_SQL): LoggedCheck(finding="not_replayed", detail="the sample's analysis budget was spent"),
}
"""What the host's replay found of the two logged statements, as grading journals it."""
PROMPT = "Which leavers can still sign in?"
SYSTEM = "You are an analyst.\x1b[2J Query with ispm-sql."
REPLY = "Counting users <script>window.pwned = 1</script>"
RESULT = "status | n\nACTIVE | 1224"
AGENT_SAYS = "</pre><script>window.pwned = 3</script>"
ANSWER = Answer(response="Nobody <b>left</b> can sign in.", verdict=None, queries=[SQL])


@functools.cache
def task_set() -> list[Task]:
    """The task set, read once (its YAML takes about a second to parse)."""
    return load_tasks(tasks_dir())


@functools.cache
def digests() -> Digests:
    """The run's digests, computed once."""
    return current_digests()


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def iso(seconds: float) -> str:
    """``at(seconds)`` as the journal writes times."""
    return at(seconds).isoformat()


def calls(result: str = RESULT) -> list[ModelCall]:
    """The agent's two calls, as the gateway would capture them; ``result`` is what the tool returned."""
    first_request = {
        "model": "claude-x",
        "stream": True,
        "system": SYSTEM,
        "tools": [{"name": "run_sql", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": PROMPT}],
    }
    first_reply = Reply(
        blocks=[
            TextBlock(text=REPLY),
            ToolCallBlock(id="toolu_1", name="run_sql", arguments=f'{{"sql": "{SQL}"}}', input={"sql": SQL}),
        ],
        stop_reason="tool_use",
        stream_events=9,
    )
    second_request = {
        **first_request,
        "messages": [
            {"role": "user", "content": PROMPT},
            {"role": "assistant", "content": [{"type": "text", "text": REPLY},
                                              {"type": "tool_use", "id": "toolu_1", "name": "run_sql",
                                               "input": {"sql": SQL}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]},
        ],
    }  # fmt: skip
    second_reply = Reply(blocks=[TextBlock(text="Done.")], stop_reason="end_turn", stream_events=5)
    common = {
        "caller": "candidate",
        "api": "messages",
        "provider_api": "messages",
        "requested_model": "claude-x",
        "returned_model": "claude-x-2026",
    }
    return [
        ModelCall(
            seq=0, started_at=at(1), latency_s=0.5, ttft_s=0.1, stream=True, status=200, outcome="ok",
            usage=Usage(input_tokens=120, output_tokens=30, cached_tokens=100),
            request=Body(encoding="json", content=first_request, size=300), response=first_reply, **common,
        ),
        ModelCall(
            seq=1, started_at=at(3), latency_s=0.25, ttft_s=0.05, stream=True, status=200, outcome="ok",
            usage=Usage(input_tokens=200, output_tokens=5),
            request=Body(encoding="json", content=second_request, size=600), response=second_reply, **common,
        ),
    ]  # fmt: skip


JUDGE_REPLY = '{"grades": {"answer_correctness": {"grade": "incorrect", "rationale": "misses the leavers"}}}'


def judge_call() -> ModelCall:
    """Judge A's one call, as the judges' capture keeps it (chat completions, not streamed)."""
    request = {
        "model": "judge-x",
        "messages": [
            {"role": "system", "content": "Grade the answer."},
            {"role": "user", "content": "The answer: Nobody left."},
        ],
    }
    return ModelCall(
        seq=0, caller="judge_a", judge="openai/judge-x", api="chat", provider_api="chat", requested_model="judge-x",
        stream=False, started_at=at(5.5), latency_s=0.3, status=200, outcome="ok", returned_model="judge-x-1",
        usage=Usage(input_tokens=50, output_tokens=9), request=Body(encoding="json", content=request, size=200),
        response=Reply(blocks=[TextBlock(text=JUDGE_REPLY)], stop_reason="stop"),
    )  # fmt: skip


def output() -> SampleOutput:
    """What the host collected: the query log, the agent's own trace, the answer."""
    return SampleOutput(
        task_id=TASK_ID,
        epoch=1,
        status="ok",
        answer=ANSWER,
        queries=[
            QueryLogEntry(ts=at(2.0).isoformat().replace("+00:00", "Z"), sql=SQL, row_count=5, duration_ms=4.0),
            QueryLogEntry(
                ts=at(2.5).isoformat(), sql=BAD_SQL, row_count=0, duration_ms=1.0, error="no such column: nope"
            ),
        ],
        trace=[{"ts": iso(2.2), "note": "ran the count"}, {"type": "result", "subtype": AGENT_SAYS}],
        timings=SampleTimings(create=0.5, start=0.5, agent=4.0, collect=0.5, remove=0.5),
    )


def votes() -> list[JudgeVote]:
    """Both reference slots' votes on two dimensions."""
    return [
        JudgeVote(task_id=TASK_ID, epoch=1, judge=judge, dimension=dimension, grade=grade, rationale=why)
        for judge in ("ref#1", "ref#2")
        for dimension, grade, why in (
            ("answer_correctness", "incorrect", "recall 0.00 (0/18)"),
            ("reasoning_utility", "abstain", "the reference judge does not grade reasoning utility"),
        )
    ]


def write_run(
    run_dir: Path, *, with_transcript: bool = True, result: str = RESULT, agent_calls: list[ModelCall] | None = None
) -> Path:
    """Write the run into ``run_dir``; return it. ``result`` is the tool result the second call sends back;
    ``agent_calls`` replace the agent's two calls in the transcript (the figures stay those of :func:`calls`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = RunSpec(
        agent_image="example/sdk-agent:1",
        candidate="anthropic/claude-x",
        judges=("ref#1", "ref#2"),
        epochs=1,
        concurrency=1,
        tasks=[TASK_ID],
        backend="local",
    )
    ref = judged = None
    if with_transcript:
        builder = TranscriptBuilder("candidate")
        for call in agent_calls if agent_calls is not None else calls(result):
            builder.add(call)
        ref = builder.write(run_dir, RUN_ID, KEY)
        judges = TranscriptBuilder("judges")
        judges.add(judge_call())
        judged = judges.write(run_dir, RUN_ID, KEY)
    figures = [
        ModelCall(api="messages", provider_api="messages", requested_model="claude-x", stream=True, outcome="ok",
                  status=200, usage=Usage(input_tokens=i, output_tokens=o, cached_tokens=c),
                  returned_model="claude-x-2026", latency_s=s)
        for i, o, c, s in ((120, 30, 100, 0.5), (200, 5, 0, 0.25))
    ]  # fmt: skip
    usage = SampleUsage(
        sample_id=KEY.label(),
        requests=2,
        tokens=Usage(input_tokens=320, output_tokens=35, cached_tokens=100),
        calls=figures,
    )
    entries = [
        RunStarted(ts=iso(0), run_id=RUN_ID, spec=spec, digests=digests(), runner_version="0.1.0",
                   images={"example/sdk-agent:1": "sha256:" + "ab" * 32}),
        SampleFinished(ts=iso(5), output=output(), usage=usage, transcript=ref),
        SampleGraded(ts=iso(6), task_id=TASK_ID, epoch=1, graded=True, votes=votes(), grade_s=0.5,
                     transcript=judged, replay_checks=REPLAY_CHECKS),
        RunFinished(ts=iso(7), used_s=7.0),
    ]  # fmt: skip
    with Journal(run_dir / JOURNAL_NAME) as journal:
        for entry in entries:
            journal.append(entry)
    write_record(run_dir, build_record(entries, task_set()))
    return run_dir
