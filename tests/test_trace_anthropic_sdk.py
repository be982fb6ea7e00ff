"""The issue's first "done when": an agent on the official Anthropic SDK, run against the fake provider, leaves a
trace showing the prompt it sent, the streamed reply assembled, and the SQL it ran after both calls, in order.

A real run (``start_run``) of a small agent written on ``anthropic`` (the test extra's pinned SDK), behind the real
gateway and its capture, through the ``local`` sandbox backend (a subprocess: the SDK is on the host, not in an
image) with the base image's real ``ispm-sql``. It streams two calls (a plan, then a tool call naming the SQL),
runs the SQL, and writes its answer.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_provider import FakeProvider, ToolCall, Turn, Usage, point_clients_at

from runner.call import TextBlock, ToolCallBlock
from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway
from runner.paths import tasks_dir
from runner.pipeline import start_run
from runner.run.calibration import CALIBRATION_JUDGES
from runner.run.spec import RunSpec
from runner.sandbox.backend import SampleHandle, SampleSpec
from runner.sandbox.local import LocalBackend
from runner.tasks.load import load_tasks
from runner.trace.conversation import Message
from runner.trace.timeline import AnswerStep, CallStep, QueryStep, SampleTimeline, read_timeline

TASK_ID = "ispm-001"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
PLAN = "I will count the Okta users by status, then look at the leavers."
AGENT = """
import json, os, subprocess
import anthropic

task, out = os.environ["ISPM_TASK_DIR"], os.environ["ISPM_OUTPUT_DIR"]
prompt = open(os.path.join(task, "prompt.md"), encoding="utf-8").read()
tools = [{"name": "run_sql", "description": "Run one read-only SQL query.",
          "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}}]
client = anthropic.Anthropic(max_retries=0)
messages = [{"role": "user", "content": prompt}]
with client.messages.stream(model=os.environ["ISPM_MODEL"], max_tokens=512, messages=messages, tools=tools) as s:
    first = s.get_final_message()
messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
             {"role": "user", "content": "Go on."}]
with client.messages.stream(model=os.environ["ISPM_MODEL"], max_tokens=512, messages=messages, tools=tools) as s:
    second = s.get_final_message()
sql = next(b for b in second.content if b.type == "tool_use").input["sql"]
subprocess.run([os.environ["ISPM_SQL"], sql], check=True, capture_output=True)
answer = {"response": "Counted the users by status.", "verdict": None, "evidence": [], "queries": [sql]}
with open(os.path.join(out, "answer.json"), "w", encoding="utf-8") as f:
    json.dump(answer, f)
"""
SETTINGS = ClientSettings(read_timeout=30.0, max_attempts=1)
pytestmark = pytest.mark.slow


class SdkAgentBackend(LocalBackend):
    """The local backend, running the agent above for every sample."""

    def __init__(self, script: Path) -> None:
        super().__init__()
        self.script = script

    def create(self, spec: SampleSpec) -> SampleHandle:
        return super().create(spec.model_copy(update={"command": [sys.executable, str(self.script)]}))


@pytest.fixture(scope="module")
def timeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleTimeline]:
    folder = tmp_path_factory.mktemp("sdk-trace")
    script = folder / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    spec = RunSpec(
        agent_image="example/anthropic-sdk-agent:1",
        candidate="anthropic/claude-scripted-1",
        judges=CALIBRATION_JUDGES,
        epochs=1,
        concurrency=1,
        sample_limit_s=60,
        tasks=[TASK_ID],
        backend="local",
    )
    monkeypatch = pytest.MonkeyPatch()
    try:
        with FakeProvider() as fake:
            point_clients_at(monkeypatch, fake, "sk-sdk-openai-unused", "sk-ant-sdk-8d2e41")
            fake.push(
                Turn(text=PLAN, usage=Usage(input_tokens=300, output_tokens=20)),
                Turn(
                    text="Running it.",
                    tool_calls=[ToolCall("run_sql", {"sql": SQL}, id="toolu_sql")],
                    usage=Usage(input_tokens=340, output_tokens=30),
                ),
            )
            with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
                start_run(spec, folder / "run", backend=SdkAgentBackend(script), gateway=gateway, images={})
        yield read_timeline(folder / "run", TASK_ID, 1)
    finally:
        monkeypatch.undo()


def _text(message: Message | None) -> str:
    assert message is not None
    return "".join(p.text for p in message.parts if isinstance(p, TextBlock))


def test_the_trace_shows_the_prompt_the_streamed_reply_and_then_the_sql(timeline: SampleTimeline) -> None:
    assert (timeline.status, timeline.transcript) == ("ok", "kept"), timeline.notes
    steps = [e for e in timeline.events if isinstance(e, CallStep | QueryStep | AnswerStep)]
    assert [e.kind for e in steps] == ["model_call", "model_call", "query", "answer"]
    first, second, query, _ = steps
    assert isinstance(first, CallStep) and isinstance(second, CallStep) and isinstance(query, QueryStep)
    # The prompt it sent: the task's own.
    prompt = next(t.prompt for t in load_tasks(tasks_dir()) if t.id == TASK_ID)
    assert [(m.role, _text(m)) for m in first.sent] == [("user", prompt)]
    # The streamed replies, assembled.
    assert first.call.stream and first.complete and _text(first.reply) == PLAN
    usage = first.call.usage
    assert usage is not None and (usage.input_tokens, usage.output_tokens) == (300, 20)
    assert [(m.role, _text(m)) for m in second.sent] == [("user", "Go on.")]  # the history once, not again
    assert second.reply is not None
    (call,) = [p for p in second.reply.parts if isinstance(p, ToolCallBlock)]
    assert (call.name, call.input) == ("run_sql", {"sql": SQL})
    # The SQL, from the host's query log, after both calls.
    assert (query.sql, query.error, query.row_count) == (SQL, None, 5)
    assert first.at is not None and second.at is not None and query.at is not None
    assert first.at < second.at < query.at
