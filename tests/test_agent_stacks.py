"""Off-the-shelf agent stacks end to end: Claude Code and the OpenAI Agents SDK in the real sandbox.

Each sample runs the real image in a real locked-down container (``DockerBackend``), behind the real gateway
(``gateway_link``), whose candidate is a scripted provider on loopback (:class:`fake_provider.FakeProvider`)
reached with host "keys" that are unique markers. The script is a short investigation: one tool call that runs
``ispm-sql``, then the answer. The checks: the sample is ``ok``, its answer validates and is the scripted one, the
SQL is in the query log, and the gateway's token counts are exactly what the provider reported.

What each stack sends is described in docs/agents.md; the assertions on request shapes below hold it to that.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import pytest
from claude_code_script import claude_code_turns, claude_responder, tool_names
from click.testing import CliRunner
from docker_fixtures import docker_backend, run_locked_down
from fake_provider import FakeProvider, Seen, ToolCall, Turn, Usage, point_clients_at, total_usage

from runner import paths
from runner.call import ModelCall, TextBlock, ToolCallBlock
from runner.cli import main
from runner.contract import Answer, SampleOutput
from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway, SampleUsage
from runner.paths import tasks_dir
from runner.sandbox import images, vendoring
from runner.sandbox.backend import SampleSpec, gateway_link
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ImageRef
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.view import agent_files
from runner.transcript.model import SampleKey
from runner.transcript.storage import read_stored, resolve

__all__ = ["docker_backend"]  # fixtures, imported for pytest
RUN = f"test-stacks-{uuid.uuid4().hex[:8]}"
TASK_ID = "ispm-001"
OPENAI_MARKER = f"sk-stacks-openai-{uuid.uuid4().hex}"
ANTHROPIC_MARKER = f"sk-ant-stacks-{uuid.uuid4().hex}"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
ANSWER = {
    "format": "ispm.answer/v1",
    "response": "Scripted: the investigation counted Okta users by status.",
    "verdict": None,
    "evidence": [{"vendor": "okta", "kind": "account", "identifier": "00u-scripted", "fact": "It is scripted."}],
    "queries": [SQL],
}
SETTINGS = ClientSettings(read_timeout=30.0, max_attempts=2, backoff_initial=0.01, backoff_max=0.05)
CLAUDE_VERSION = "2.1.332 (Claude Code)"


@pytest.fixture(scope="module")
def task() -> Task:
    return {t.id: t for t in load_tasks(tasks_dir())}[TASK_ID]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield point_clients_at(monkeypatch, provider, OPENAI_MARKER, ANTHROPIC_MARKER)


def make_spec(task: Task, image: str, model: str) -> SampleSpec:
    # The sandbox's default memory, pids and /tmp: the stacks must run within them (docs/agents.md).
    return SampleSpec(
        task_id=task.id,
        run_id=RUN,
        image=image,
        task_files=agent_files(task, time_limit_seconds=90),
        time_limit_s=90,
        env={"ISPM_MODEL": model},
    )


def run_with_gateway(backend: DockerBackend, gateway: Gateway, spec: SampleSpec) -> tuple[SampleOutput, SampleUsage]:
    with gateway_link(gateway, spec.sample_id) as (folder, token):
        out = backend.run_sample(spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token}))
    return out, gateway.usage(spec.sample_id)


def assert_usage_is_what_the_provider_reported(usage: SampleUsage, fake: FakeProvider) -> None:
    reported = total_usage(fake.reported)
    assert usage.requests == len(fake.seen) == len(fake.reported)
    tokens = usage.tokens
    assert (tokens.input_tokens, tokens.output_tokens, tokens.cached_tokens, tokens.reasoning_tokens) == (
        reported.input_tokens,
        reported.output_tokens,
        reported.cached_tokens,
        reported.reasoning_tokens,
    )
    assert usage.errors == [] and usage.refused == 0 and usage.in_flight == 0


def assert_the_investigation_succeeded(
    out: SampleOutput, usage: SampleUsage, fake: FakeProvider, world_db: sqlite3.Connection
) -> None:
    """The sample is ok, its answer is the scripted one, its SQL is logged, and every token is accounted for."""
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.answer == Answer.model_validate(ANSWER)
    assert_sql_logged(out, world_db)
    assert_usage_is_what_the_provider_reported(usage, fake)


def assert_sql_logged(out: SampleOutput, world_db: sqlite3.Connection) -> None:
    entry = next(q for q in out.queries if q.sql == SQL)
    assert entry.error is None and entry.row_count == len(world_db.execute(SQL).fetchall())


# -- Claude Code ---------------------------------------------------------------------------------------------

CLAUDE_TURNS = claude_code_turns(
    SQL,
    ANSWER,
    opening="Counting Okta users by status.",
    usages=(
        Usage(input_tokens=1201, output_tokens=41, cached_tokens=1000),
        Usage(input_tokens=1302, output_tokens=52, cached_tokens=1200, cache_write_tokens=100),
        Usage(input_tokens=1403, output_tokens=13),
    ),
)


def main_loop(fake: FakeProvider) -> list[Seen]:
    return [s for s in fake.seen if "Bash" in tool_names(s.body)]


@pytest.mark.docker
@pytest.mark.slow
def test_claude_code_completes_a_scripted_investigation(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    fake.responder = claude_responder(CLAUDE_TURNS)
    with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-claude-code"].tag, "claude-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)

    assert_the_investigation_succeeded(out, usage, fake, world_db)

    # Claude Code's own requests, as docs/agents.md describes them.
    loop = main_loop(fake)
    assert len(loop) == 3
    for seen in fake.seen:
        # Claude Code posts /v1/messages?beta=true; the query is the gateway's to keep or drop.
        assert (seen.method, urlsplit(seen.path).path) == ("POST", "/v1/messages")
        # Its bodies use beta fields (context_management, output_config): its beta header must reach the provider.
        betas = seen.headers["anthropic-beta"].split(",")
        assert {"claude-code-20250219", "context-management-2025-06-27", "effort-2025-11-24"} <= set(betas)
        assert {"context_management", "output_config", "thinking"} <= set(seen.body)
        assert seen.headers["x-api-key"] == ANTHROPIC_MARKER  # the gateway's host key, not the sample's token
        assert seen.body["model"] == "claude-scripted-1" and seen.body["stream"] is True
    assert [t["name"] for t in loop[0].body["tools"]] == ["Bash", "Read"]
    first_user = loop[0].body["messages"][0]["content"]
    assert task.prompt.strip() in "".join(block.get("text", "") for block in first_user)
    # The query's rows went back to the model as the Bash tool's result.
    result = loop[1].body["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_sql"
    assert re.search(r"\bstatus\b.*\bn\b", str(result["content"]))

    # The stream-json events are the trace; the last one is Claude Code's result.
    final = [e for e in out.trace if e.get("type") == "result"]
    assert [(e["subtype"], e["num_turns"], e["is_error"]) for e in final] == [("success", 3, False)]
    assert ANTHROPIC_MARKER not in out.model_dump_json() and OPENAI_MARKER not in out.model_dump_json()


@pytest.mark.docker
@pytest.mark.slow
def test_claude_code_without_an_answer_leaves_a_failure_answer(
    docker_backend: DockerBackend, fake: FakeProvider, refs: dict[str, ImageRef], task: Task
) -> None:
    fake.responder = claude_responder([Turn(text="I will not look.", usage=Usage(input_tokens=900, output_tokens=9))])
    with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-claude-code"].tag, "claude-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)

    assert out.exit_code == 1 and out.status == "agent_error", (out.error, out.stderr_tail)
    assert out.answer is not None and out.answer.verdict is None and out.answer.evidence == []
    assert out.answer.response == (
        "No answer was written: Claude Code exited with code 0.\n\nClaude Code's final message:\nI will not look."
    )
    assert_usage_is_what_the_provider_reported(usage, fake)
    assert len(main_loop(fake)) == 1


# -- OpenAI Agents SDK ---------------------------------------------------------------------------------------

OPENAI_TURNS = [
    Turn(text="", tool_calls=[ToolCall("run_sql", {"sql": SQL}, id="call_sql")], usage=Usage(101, 11)),
    Turn(
        text="",
        tool_calls=[ToolCall("submit_answer", {k: v for k, v in ANSWER.items() if k != "format"}, id="call_answer")],
        usage=Usage(202, 22, cached_tokens=50, reasoning_tokens=7),
    ),
]


@pytest.mark.docker
@pytest.mark.slow
def test_openai_agents_completes_a_scripted_investigation(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    fake.push(*OPENAI_TURNS)
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-openai-agents"].tag, "gpt-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    assert usage.requests == 2  # submit_answer ends the run: no request after it

    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/responses")
        assert seen.headers["authorization"] == f"Bearer {OPENAI_MARKER}"
        body = seen.body
        assert body["model"] == "gpt-scripted-1" and body["stream"] is True and body["store"] is False
        assert "previous_response_id" not in body  # the whole conversation is sent every time
        assert [t["name"] for t in body["tools"]] == ["run_sql", "submit_answer"]
        assert all(t["type"] == "function" and t["strict"] is True for t in body["tools"])
    assert fake.seen[0].body["input"] == [{"role": "user", "content": task.prompt.rstrip() + "\n"}]
    replayed = fake.seen[1].body["input"]
    assert [item.get("type") for item in replayed[1:]] == ["function_call", "function_call_output"]
    assert replayed[2]["call_id"] == "call_sql" and '"columns": ["status", "n"]' in replayed[2]["output"]

    called = [e["item"]["name"] for e in out.trace if e.get("event") == "tool_called"]
    assert called == ["run_sql", "submit_answer"]
    assert OPENAI_MARKER not in out.model_dump_json() and ANTHROPIC_MARKER not in out.model_dump_json()


# -- mini-swe-agent ------------------------------------------------------------------------------------------

# mini-swe-agent 2.x's default config (mini.yaml) gives the model one `bash` tool on chat completions (its v1 read
# commands out of markdown code blocks; 2.x's default agent does not). It ends when a command's output starts with
# COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT: the second turn writes the answer and submits in one command.
MINI_SQL_COMMAND = f'ispm-sql "{SQL}"'
MINI_ANSWER_COMMAND = (
    f"cat > /output/answer.json <<'EOF'\n{json.dumps(ANSWER)}\nEOF\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
)
MINI_TURNS = [
    Turn(
        text="THOUGHT: Count the Okta users by status.",
        tool_calls=[ToolCall("bash", {"command": MINI_SQL_COMMAND}, id="call_sql")],
        usage=Usage(1101, 31),
    ),
    Turn(
        text="THOUGHT: Write the answer, then submit.",
        tool_calls=[ToolCall("bash", {"command": MINI_ANSWER_COMMAND}, id="call_answer")],
        usage=Usage(1202, 42, cached_tokens=1000, reasoning_tokens=5),
    ),
]


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_completes_a_scripted_investigation(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    fake.push(*MINI_TURNS)
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-mini-swe-agent"].tag, "gpt-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)
        builder = gateway.transcript(spec.sample_id)

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    assert usage.requests == 2  # the submit ends the run: no request after it

    # What mini-swe-agent 2.4.6 sends through litellm: chat completions, not streamed, one bash tool.
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {OPENAI_MARKER}"
        assert seen.body["model"] == "gpt-scripted-1" and not seen.body.get("stream")
        assert [t["function"]["name"] for t in seen.body["tools"]] == ["bash"]
    first = fake.seen[0].body["messages"]
    assert [m["role"] for m in first] == ["system", "user"]
    assert task.prompt.strip() in first[1]["content"] and "ispm-sql" in first[1]["content"]
    result = fake.seen[1].body["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_sql"
    assert re.search(r"\bstatus\b.*\bn\b", result["content"])

    # The transcript shows the command and its SQL, as the model sent it and as it went back.
    assert builder is not None
    data = builder.encode(RUN, SampleKey(task_id=TASK_ID, epoch=1))
    assert OPENAI_MARKER not in gzip.decompress(data).decode()
    calls = [e for e in resolve(read_stored(data, "test"), "test") if isinstance(e, ModelCall)]
    assert len(calls) == 2 and calls[0].response is not None
    assert calls[0].response.blocks == [
        TextBlock(text="THOUGHT: Count the Okta users by status."),
        ToolCallBlock(
            id="call_sql", name="bash", arguments=json.dumps({"command": MINI_SQL_COMMAND}),
            input={"command": MINI_SQL_COMMAND},
        ),
    ]  # fmt: skip
    tool = calls[0].response.blocks[1]
    assert isinstance(tool, ToolCallBlock) and SQL in tool.arguments

    # Its trajectory is the trace: the model's two bash calls, then how it ended.
    calls_made: list[Any] = [c for e in out.trace for c in e.get("tool_calls") or []]  # type: ignore[attr-defined]
    commands = [c["function"]["arguments"] for c in calls_made]
    assert [json.loads(c)["command"] for c in commands] == [MINI_SQL_COMMAND, MINI_ANSWER_COMMAND]
    assert out.trace[-1] == {"event": "end", "exit_status": "Submitted", "api_calls": 2, "mini_version": "2.4.6"}
    assert OPENAI_MARKER not in out.model_dump_json() and ANTHROPIC_MARKER not in out.model_dump_json()


@pytest.mark.docker
@pytest.mark.slow
def test_ispm_run_names_mini_swe_agent_and_completes_a_sample(
    fake: FakeProvider, refs: dict[str, ImageRef], tmp_path: Path
) -> None:
    """`ispm run --agent-image mini-swe-agent`, as a user types it: preflight, the sample, grading, the record."""
    turns = iter(MINI_TURNS)
    # The agent's requests carry its bash tool; preflight's probe does not, and gets the fake's canned answer.
    fake.responder = lambda seen: next(turns) if isinstance(seen.body, dict) and seen.body.get("tools") else None
    run_dir = tmp_path / "run"
    done = CliRunner().invoke(main, [
        "run", "--agent-image", "mini-swe-agent", "--candidate", "openai/gpt-scripted-1", "--judge", "ref#1",
        "--judge", "ref#2", "--task", TASK_ID, "--epochs", "1", "--concurrency", "1", "--run-dir", str(run_dir),
    ])  # fmt: skip
    assert done.exit_code == 0, done.output
    record = json.loads((run_dir / "record.json").read_text())
    assert record["images"] == {refs["agent-mini-swe-agent"].tag: refs["agent-mini-swe-agent"].id}
    (sample,) = record["samples"]
    assert sample["status"] == "ok", sample.get("error")
    assert sample["queries_declared"] == [SQL]
    scripted = MINI_TURNS[0].usage + MINI_TURNS[1].usage
    agent = sample["agent"]
    assert (agent["requests"], agent["input_tokens"], agent["output_tokens"], agent["cached_tokens"]) == (
        2, scripted.input_tokens, scripted.output_tokens, scripted.cached_tokens,
    )  # fmt: skip
    # What a user reads: `ispm trace` shows the bash tool call with its command, and the SQL laid out under it.
    trace = CliRunner().invoke(main, ["trace", str(run_dir), "--task", TASK_ID, "--text"])
    assert trace.exit_code == 0, trace.output
    assert f"tool call bash (call_sql): {json.dumps({'command': MINI_SQL_COMMAND})}" in trace.stdout
    assert "FROM okta_users" in trace.stdout and "SQL logged in the sandbox" in trace.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_without_an_answer_leaves_a_failure_answer(
    docker_backend: DockerBackend, fake: FakeProvider, refs: dict[str, ImageRef], task: Task
) -> None:
    submit = ToolCall("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}, id="call_submit")
    fake.push(Turn(text="I will not look.", tool_calls=[submit], usage=Usage(900, 9)))
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-mini-swe-agent"].tag, "gpt-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)

    assert out.exit_code == 1 and out.status == "agent_error", (out.error, out.stderr_tail)
    assert out.answer is not None and out.answer.verdict is None and out.answer.evidence == []
    assert out.answer.response == (
        "No answer was written: mini-swe-agent exited with code 0 (Submitted).\n\n"
        "mini-swe-agent's final message:\nI will not look."
    )
    assert_usage_is_what_the_provider_reported(usage, fake)


# -- across APIs: each stack with the other provider, through the gateway's translation ---------------------


@pytest.mark.docker
@pytest.mark.slow
def test_claude_code_runs_on_an_openai_candidate(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    """Claude Code streams Messages; the candidate speaks chat completions: translated both ways, streamed."""
    fake.responder = claude_responder(CLAUDE_TURNS)
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-claude-code"].tag, "claude-opus-5-5")
        out, usage = run_with_gateway(docker_backend, gateway, spec)
    assert_the_investigation_succeeded(out, usage, fake, world_db)
    assert len(main_loop(fake)) == 3
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {OPENAI_MARKER}"
        assert seen.body["model"] == "gpt-scripted-1" and seen.body["stream"] is True
        assert seen.body["stream_options"] == {"include_usage": True}
    assert {(c.api, c.provider_api, c.requested_model, c.outcome) for c in usage.calls} == {
        ("messages", "chat", "claude-opus-5-5", "ok")
    }
    # The Bash tool's result went back to the model as a chat tool message.
    result = main_loop(fake)[1].body["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "toolu_sql"


@pytest.mark.docker
@pytest.mark.slow
def test_openai_agents_runs_on_an_anthropic_candidate(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    """The Agents SDK streams Responses; the candidate speaks Messages: Responses -> chat -> Messages and back."""
    fake.push(*OPENAI_TURNS)
    with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-openai-agents"].tag, "gpt-5")
        out, usage = run_with_gateway(docker_backend, gateway, spec)

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/messages")
        assert seen.headers["x-api-key"] == ANTHROPIC_MARKER
        assert seen.body["model"] == "claude-scripted-1" and seen.body["stream"] is True
        assert [t["name"] for t in seen.body["tools"]] == ["run_sql", "submit_answer"]
    assert {(c.api, c.provider_api, c.requested_model) for c in usage.calls} == {("responses", "messages", "gpt-5")}
    tool_result = fake.seen[1].body["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and '"columns": ["status", "n"]' in str(tool_result["content"])


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_runs_on_an_anthropic_candidate(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    """mini-swe-agent speaks chat completions; the candidate speaks Messages: translated both ways. With a Claude
    name it also marks its last message with cache_control (mini-swe-agent's default for such names)."""
    fake.push(*MINI_TURNS)
    with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-mini-swe-agent"].tag, "claude-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)
        builder = gateway.transcript(spec.sample_id)

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/messages")
        assert seen.body["model"] == "claude-scripted-1"
    assert {(c.api, c.provider_api, c.requested_model) for c in usage.calls} == {
        ("chat", "messages", "claude-scripted-1")
    }
    tool_result = fake.seen[1].body["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "call_sql"
    assert builder is not None
    data = builder.encode(RUN, SampleKey(task_id=TASK_ID, epoch=1))
    sent = next(e for e in resolve(read_stored(data, "test"), "test") if isinstance(e, ModelCall)).request
    assert sent is not None and '"cache_control": {"type": "ephemeral"}' in json.dumps(sent.content)
    # ...and the mark reaches the candidate on the translated Messages block, so its prefix stays cacheable.
    assert all('"cache_control": {"type": "ephemeral"}' in json.dumps(s.body["messages"]) for s in fake.seen)


# -- the images ------------------------------------------------------------------------------------------------

STACKS = {
    "agent-claude-code": "claude-code",
    "agent-openai-agents": "openai-agents",
    "agent-mini-swe-agent": "mini-swe-agent",
}


@pytest.mark.docker
@pytest.mark.slow
def test_make_images_builds_both_stacks_with_their_labels(refs: dict[str, ImageRef]) -> None:
    # What `make images` runs; everything is reused here (the session's refs fixture built it).
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "images"], capture_output=True, text=True, check=True, timeout=600
    )
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    engine = docker.from_env()
    try:
        for name, agent in STACKS.items():
            assert lines[refs[name].tag].endswith("reused")
            labels = engine.images.get(refs[name].tag).labels
            assert labels["ispm.agent.contract"] == "ispm.agent/v1"
            assert labels["ispm.agent.name"] == agent
            assert labels[images.LABEL_DIGEST] == refs[name].input_digest
    finally:
        engine.close()


@pytest.mark.docker
@pytest.mark.slow
def test_the_claude_code_cli_starts_in_the_lockdown(refs: dict[str, ImageRef]) -> None:
    assert (
        run_locked_down(refs["agent-claude-code"].tag, "/opt/claude-code/bin/claude", ["--version"]) == CLAUDE_VERSION
    )


def test_vendored_tags_follow_the_pins_not_the_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "images"
    shutil.copytree(images.images_dir(), copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(images, "images_dir", lambda: copy)
    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path / ".cache")  # so .cache/wheels/ is a scratch folder too
    before = images.expected_tags([])
    cache = vendoring.wheel_cache("agent-claude-code")
    cache.mkdir(parents=True)
    (cache / "claude_agent_sdk-0.2.189-py3-none-manylinux_2_17_x86_64.whl").write_bytes(b"not the pinned wheel")
    assert images.expected_tags([]) == before
    requirements = copy / "agents" / "claude-code" / "requirements.txt"
    requirements.write_text(requirements.read_text().replace("b26a6a30", "c26a6a30"))
    after = images.expected_tags([])
    assert {name for name in after if after[name] != before[name]} == {"agent-claude-code"}


def test_only_wheels_with_a_pinned_hash_count_as_fetched(tmp_path: Path) -> None:
    pinned, other, stray = b"pinned wheel", b"the same release for another platform", b"stray wheel"
    digest, alternative = hashlib.sha256(pinned).hexdigest(), hashlib.sha256(other).hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(
        f"# a comment\na==1 \\\n    --hash=sha256:{digest} \\\n    --hash=sha256:{alternative}\n"
        f"b==2 --hash=sha256:{'0' * 64}  # pinned too\n"
    )
    assert vendoring.pinned_requirements(requirements) == {"a==1": {digest, alternative}, "b==2": {"0" * 64}}
    assert vendoring.pinned_hashes(requirements) == {digest, alternative, "0" * 64}
    assert vendoring.missing_wheels(requirements, tmp_path / "absent") == {"a==1", "b==2"}
    (tmp_path / "a-1-py3-none-any.whl").write_bytes(stray)
    assert vendoring.missing_wheels(requirements, tmp_path) == {"a==1", "b==2"}
    (tmp_path / "renamed-anything.whl").write_bytes(pinned)  # one allowed wheel of a release is enough
    assert vendoring.missing_wheels(requirements, tmp_path) == {"b==2"}


@pytest.mark.parametrize("folder", ["claude-code", "openai-agents", "codex", "gemini", "mini-swe-agent"])
def test_every_requirement_is_pinned_by_version_and_hash(folder: str) -> None:
    requirements = images.repo_root() / "images" / "agents" / folder / "requirements.txt"
    text = "\n".join(line for line in requirements.read_text().splitlines() if not line.startswith("#"))
    entries = [e.strip() for e in text.replace("\\\n", " ").splitlines() if e.strip()]
    assert entries
    for entry in entries:
        assert re.fullmatch(r"[a-z0-9-]+==[0-9][0-9a-z.]*( +--hash=sha256:[0-9a-f]{64})+", entry), entry
    pins = vendoring.pinned_requirements(requirements)
    assert len(pins) == len(entries) and all(len(digests) == 1 for digests in pins.values())
