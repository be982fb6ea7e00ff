"""The Gemini agent image end to end: the real ``google-genai`` SDK in the real sandbox, behind the real gateway.

The image (``images/agents/gemini``) runs a streamed tool loop on the SDK, configured by the environment alone. Its
candidate is a scripted provider on loopback (:class:`fake_provider.FakeProvider`): a ``google/`` model, reached on
Gemini's own API and passed through, or a chat-completions model, reached through the gateway's translation. The
script: ``run_sql`` on the first turn, ``submit_answer`` on the second. The checks: the sample is ``ok`` with the
scripted answer, the SQL is in the query log, every token the provider reported is counted, the requests are what
the SDK sends, and the sample's transcript (read back as its timeline after a whole run) shows the call and the SQL.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker_fixtures import docker_backend
from fake_provider import FakeProvider, Reply, Seen, ToolCall, Turn, Usage, openai_completion, point_clients_at
from test_agent_stacks import ANSWER, SETTINGS, SQL, assert_the_investigation_succeeded, make_spec, run_with_gateway

from runner.gateway.server import Gateway
from runner.paths import tasks_dir
from runner.pipeline import start_run
from runner.record.model import RunRecord
from runner.run.calibration import CALIBRATION_JUDGES
from runner.run.spec import RunSpec
from runner.sandbox import images
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ImageRef
from runner.sandbox.trial import resolve_image
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.trace.conversation import ToolResultBlock
from runner.trace.timeline import AnswerStep, CallStep, QueryStep, read_timeline

__all__ = ["docker_backend"]  # fixtures, imported for pytest
pytestmark = [pytest.mark.docker, pytest.mark.slow]
RUN = f"test-gemini-{uuid.uuid4().hex[:8]}"
TASK_ID = "ispm-001"
GEMINI_MARKER = f"gk-stacks-gemini-{uuid.uuid4().hex}"
OPENAI_MARKER = f"sk-stacks-openai-{uuid.uuid4().hex}"
MODEL = "gemini-scripted-1"
ISPM = Path(sys.executable).with_name("ispm")
# Gemini sends no call ids: the agent must answer each call by name, and the gateway pass that through.
TURNS = [
    Turn(text="", tool_calls=[ToolCall("run_sql", {"sql": SQL})], usage=Usage(101, 11)),
    Turn(
        text="",
        tool_calls=[ToolCall("submit_answer", {k: v for k, v in ANSWER.items() if k != "format"})],
        usage=Usage(202, 22, cached_tokens=50, reasoning_tokens=7),
    ),
]
COLUMNS = '"columns": ["status", "n"]'  # what ispm-sql's JSON result for SQL holds


@pytest.fixture(scope="module")
def task() -> Task:
    return {t.id: t for t in load_tasks(tasks_dir())}[TASK_ID]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        point_clients_at(monkeypatch, provider, OPENAI_MARKER, "sk-ant-unused-0000")
        monkeypatch.setenv("GEMINI_API_KEY", GEMINI_MARKER)
        monkeypatch.setenv("GEMINI_BASE_URL", provider.gemini_base)
        provider.push(*TURNS)
        yield provider


def test_the_gemini_agent_completes_on_a_gemini_candidate_passed_through(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    with Gateway(f"google/{MODEL}", settings=SETTINGS) as gateway:
        out, usage = run_with_gateway(docker_backend, gateway, make_spec(task, refs["agent-gemini"].tag, MODEL))

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    assert usage.requests == 2  # submit_answer ends the loop: no request after it
    assert {(c.api, c.provider_api, c.requested_model, c.stream) for c in usage.calls} == {
        ("gemini", "gemini", MODEL, True)
    }
    for seen in fake.seen:
        # Gemini's own API, one level above GEMINI_BASE_URL, the model in the path and the key in its own header.
        assert (seen.method, seen.path) == ("POST", f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse")
        assert seen.headers["x-goog-api-key"] == GEMINI_MARKER and "authorization" not in seen.headers
        assert "model" not in seen.body and "stream" not in seen.body  # Gemini refuses fields it does not know
        (tool,) = seen.body["tools"]
        assert [d["name"] for d in tool["functionDeclarations"]] == ["run_sql", "submit_answer"]
    assert fake.seen[0].body["contents"] == [{"role": "user", "parts": [{"text": task.prompt.rstrip() + "\n"}]}]
    _, called, answered = fake.seen[1].body["contents"]
    assert called["role"] == "model" and called["parts"][0]["functionCall"] == {"name": "run_sql", "args": {"sql": SQL}}
    (result,) = answered["parts"]
    assert (
        result["functionResponse"]["name"] == "run_sql" and COLUMNS in result["functionResponse"]["response"]["result"]
    )

    assert [e["name"] for e in out.trace if e.get("event") == "tool_call"] == ["run_sql", "submit_answer"]
    assert GEMINI_MARKER not in out.model_dump_json() and OPENAI_MARKER not in out.model_dump_json()


def test_the_gemini_agent_completes_on_a_chat_candidate_through_the_translation(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    """The SDK streams Gemini; the candidate speaks chat completions: translated both ways, streamed."""
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        out, usage = run_with_gateway(docker_backend, gateway, make_spec(task, refs["agent-gemini"].tag, "gpt-5"))

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    assert {(c.api, c.provider_api, c.requested_model) for c in usage.calls} == {("gemini", "chat", "gpt-5")}
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {OPENAI_MARKER}"
        assert seen.body["model"] == "gpt-scripted-1" and seen.body["stream"] is True
        assert [t["function"]["name"] for t in seen.body["tools"]] == ["run_sql", "submit_answer"]
        verdict = seen.body["tools"][1]["function"]["parameters"]["properties"]["verdict"]
        assert verdict["type"] == ["string", "null"]  # Gemini's nullable STRING, as JSON Schema
    # The call's chat id went to the agent as functionCall.id, and came back on its functionResponse.
    call, result = fake.seen[1].body["messages"][-2:]
    assert call["tool_calls"][0]["id"] == "call_fake1_0" and json.loads(
        call["tool_calls"][0]["function"]["arguments"]
    ) == {"sql": SQL}
    assert result["role"] == "tool" and result["tool_call_id"] == "call_fake1_0" and COLUMNS in result["content"]


def test_the_transcript_shows_the_tool_call_its_sql_and_the_result(
    refs: dict[str, ImageRef], tmp_path: Path, fake: FakeProvider
) -> None:
    """A whole run (``start_run``, as ``ispm run --agent-image gemini`` makes it), its sample read back."""
    spec = RunSpec(
        agent_image=refs["agent-gemini"].tag,
        candidate=f"google/{MODEL}",
        judges=CALIBRATION_JUDGES,
        epochs=1,
        concurrency=1,
        sample_limit_s=90,
        tasks=[TASK_ID],
        backend="docker",
    )
    backend = DockerBackend(sweep_on_start=False)
    try:
        with Gateway(f"google/{MODEL}", settings=SETTINGS) as gateway:
            start_run(spec, tmp_path / "run", backend=backend, gateway=gateway, images={})
    finally:
        backend.close()
    timeline = read_timeline(tmp_path / "run", TASK_ID, 1)
    assert timeline.transcript == "kept" and timeline.status == "ok", timeline.notes
    kinds = [e.kind for e in timeline.events if isinstance(e, CallStep | QueryStep | AnswerStep)]
    assert kinds == ["model_call", "query", "model_call", "answer"]
    first, second = (e for e in timeline.events if isinstance(e, CallStep))
    assert first.reply is not None
    (call,) = [p for p in first.reply.parts if p.type == "tool_call"]
    assert (call.name, call.input) == ("run_sql", {"sql": SQL})
    assert next(e for e in timeline.events if isinstance(e, QueryStep)).sql == SQL
    # The second call sent back only the tool's result: the history is shown once.
    (sent,) = second.sent
    (result,) = sent.parts
    assert isinstance(result, ToolResultBlock) and COLUMNS in result.text


def test_the_image_carries_the_contract_label_and_its_name(refs: dict[str, ImageRef]) -> None:
    engine = docker.from_env()
    try:
        labels = engine.images.get(refs["agent-gemini"].tag).labels
    finally:
        engine.close()
    assert (labels["ispm.agent.contract"], labels["ispm.agent.name"]) == ("ispm.agent/v1", "gemini")
    assert labels[images.LABEL_DIGEST] == refs["agent-gemini"].input_digest


def test_the_short_name_gemini_names_the_image(refs: dict[str, ImageRef]) -> None:
    assert resolve_image("gemini") == refs["agent-gemini"].tag


def test_ispm_run_with_agent_image_gemini_completes_a_sample(refs: dict[str, ImageRef], tmp_path: Path) -> None:
    """What a user types: ``ispm run --agent-image gemini``, the real process, against the scripted fake (its
    generateContent turns for the agent; a chat reply for preflight's probe of the candidate)."""
    script = list(TURNS)

    def answer(seen: Seen) -> Turn | Reply:
        if "GenerateContent" in seen.path or "generateContent" in seen.path:
            return script.pop(0)
        return Reply(body=openai_completion("ok", model=MODEL))

    with FakeProvider(responder=answer) as fake:
        env = {**os.environ, "GEMINI_API_KEY": GEMINI_MARKER, "GEMINI_BASE_URL": fake.gemini_base}
        args = ["run", "--agent-image", "gemini", "--candidate", f"google/{MODEL}", "--task", TASK_ID]
        args += ["--judge", "ref#1", "--judge", "ref#2", "--epochs", "1", "--run-dir", str(tmp_path / "run")]
        done = subprocess.run([str(ISPM), *args], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    record = RunRecord.model_validate_json((tmp_path / "run" / "record.json").read_text(encoding="utf-8"))
    (sample,) = record.samples
    assert sample.status == "ok", sample.error
    assert sample.queries_declared == [SQL] and script == []
    assert sample.agent is not None
    assert (sample.agent.requests, sample.agent.input_tokens, sample.agent.output_tokens) == (2, 303, 33)
    assert [(c.api, c.stream, c.outcome) for c in sample.agent_calls] == [("gemini", True, "ok")] * 2
