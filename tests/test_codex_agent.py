"""Codex CLI end to end: the real binary in the real sandbox, behind the real gateway, against scripted fakes.

The image (``images/agents/codex``) configures Codex through its own ``config.toml`` only: a provider block
pointing at the gateway (``wire_api = "responses"``) and ``web_search = "disabled"``; its multi-agent tools stay on,
so every request offers the ``multi_agent_v1`` namespace. The script is the investigation of
``test_agent_stacks.py``: one shell call that runs ``ispm-sql``, one that writes the answer, then the last word.
With a chat-only candidate (``vllm/``) the gateway translates Responses to chat completions, custom tools
(``apply_patch``) and namespaces included.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from docker_fixtures import docker_backend, run_locked_down
from fake_provider import FakeProvider, Reply, Seen, ToolCall, Turn, Usage, openai_completion, point_clients_at
from test_agent_stacks import (
    ANSWER,
    ANTHROPIC_MARKER,
    OPENAI_MARKER,
    RUN,
    SETTINGS,
    SQL,
    assert_the_investigation_succeeded,
    make_spec,
    run_with_gateway,
    task,
)

from runner.call import ModelCall, ToolCallBlock
from runner.gateway.server import Gateway
from runner.record.model import RunRecord
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ImageRef
from runner.sandbox.trial import resolve_image
from runner.tasks.model import Task
from runner.transcript.model import SampleKey
from runner.transcript.storage import read_stored, resolve

__all__ = ["RUN", "docker_backend", "task"]  # fixtures, imported for pytest; RUN: what docker_backend sweeps
CODEX_VERSION = "codex-cli 0.163.0"
ISPM = Path(sys.executable).with_name("ispm")
VLLM_MARKER = "vllm-codex-marker"

CODEX_TURNS = [
    Turn(
        text="",
        tool_calls=[ToolCall("exec_command", {"cmd": f'ispm-sql "{SQL}"'}, id="call_sql")],
        usage=Usage(input_tokens=2101, output_tokens=31, cached_tokens=1024),
    ),
    Turn(
        text="",
        tool_calls=[
            ToolCall(
                "exec_command",
                {"cmd": f"cat > /output/answer.json <<'EOF'\n{json.dumps(ANSWER)}\nEOF"},
                id="call_answer",
            )
        ],
        usage=Usage(input_tokens=2302, output_tokens=52, cached_tokens=2048, reasoning_tokens=12),
    ),
    Turn(text="The answer is in /output/answer.json.", usage=Usage(input_tokens=2403, output_tokens=9)),
]


# On a chat-only candidate the answer is written with Codex's custom apply_patch tool (free-form, a grammar).
PATCH = f"*** Begin Patch\n*** Add File: /output/answer.json\n+{json.dumps(ANSWER)}\n*** End Patch\n"
PATCH_TURNS = [
    CODEX_TURNS[0],
    Turn(
        text="",
        tool_calls=[ToolCall("apply_patch", {"input": PATCH}, id="call_patch")],
        usage=Usage(input_tokens=2302, output_tokens=52, cached_tokens=2048, reasoning_tokens=12),
    ),
    CODEX_TURNS[2],
]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        monkeypatch.setenv("VLLM_BASE_URL", provider.openai_base)
        monkeypatch.setenv("VLLM_API_KEY", VLLM_MARKER)
        yield point_clients_at(monkeypatch, provider, OPENAI_MARKER, ANTHROPIC_MARKER)


def tool_types(body: dict[str, Any]) -> dict[str, str]:
    """Each tool a Responses request offers, by name: its type (a namespace's tools as ``namespace/name``)."""
    types: dict[str, str] = {}
    for tool in body.get("tools") or []:
        types[tool.get("name", tool["type"])] = tool["type"]
        for inner in tool.get("tools") or []:
            types[f"{tool['name']}/{inner['name']}"] = inner["type"]
    return types


def shell_outputs(body: dict[str, Any]) -> dict[str, str]:
    """The outputs of the shell calls a Responses request replays, by call id."""
    items = body.get("input") or []
    return {i["call_id"]: str(i["output"]) for i in items if i.get("type") == "function_call_output"}


def completed(trace: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The items of this type that Codex's JSON events say were completed."""
    return [e["item"] for e in trace if e.get("type") == "item.completed" and e["item"]["type"] == kind]


def assert_the_trace_shows_the_query(trace: list[dict[str, Any]], commands_run: int = 2) -> None:
    """Codex's JSON events are the trace: the ``ispm-sql`` command ran, with the SQL, and exited 0."""
    commands = completed(trace, "command_execution")
    assert len(commands) == commands_run
    assert SQL in commands[0]["command"] and "ispm-sql" in commands[0]["command"]
    assert commands[0]["exit_code"] == 0 and re.search(r"\bstatus\b.*\bn\b", commands[0]["aggregated_output"])
    assert [e["type"] for e in trace if e.get("type", "").startswith("turn.")] == ["turn.started", "turn.completed"]


@pytest.mark.docker
@pytest.mark.slow
def test_codex_completes_a_scripted_investigation(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    fake.push(*CODEX_TURNS)
    spec = make_spec(task, refs["agent-codex"].tag, "gpt-scripted-1")
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        out, usage = run_with_gateway(docker_backend, gateway, spec)
        builder = gateway.transcript(spec.sample_id)

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    assert usage.requests == 3 and len(fake.seen) == 3

    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/responses")
        assert seen.headers["authorization"] == f"Bearer {OPENAI_MARKER}"
        assert seen.body["model"] == "gpt-scripted-1" and seen.body["stream"] is True
        # Nothing but the provider block and web_search = "disabled": the multi-agent namespace is offered, and
        # no tool the provider would run.
        types = tool_types(seen.body)
        assert types["exec_command"] == "function" and types["multi_agent_v1"] == "namespace"
        assert types["multi_agent_v1/spawn_agent"] == "function"
        assert not {"web_search", "file_search", "code_interpreter", "image_generation"} & set(types.values())
    said = [p["text"] for i in fake.seen[0].body["input"] if i.get("role") == "user" for p in i["content"]]
    assert task.prompt.strip() in "".join(said)
    developer = [p["text"] for i in fake.seen[0].body["input"] if i.get("role") == "developer" for p in i["content"]]
    assert any("`ispm-sql`" in text and "/output/answer.json" in text for text in developer)  # our instructions
    # The query's rows went back to the model as the shell call's output.
    assert re.search(r"\bstatus\b.*\bn\b", shell_outputs(fake.seen[1].body)["call_sql"])
    assert_the_trace_shows_the_query(out.trace)
    assert [e["usage"] for e in out.trace if e.get("type") == "turn.completed"] == [
        {
            "input_tokens": 6806,
            "cached_input_tokens": 3072,
            "cache_write_input_tokens": 0,
            "output_tokens": 92,
            "reasoning_output_tokens": 12,
        }
    ]
    # The gateway's transcript holds the tool call, with its SQL, as the model made it.
    assert builder is not None
    stored = read_stored(builder.encode(spec.run_id, SampleKey(task_id=task.id, epoch=1)), "test")
    calls = [e for e in resolve(stored, "test") if isinstance(e, ModelCall)]
    assert len(calls) == 3 and calls[0].response is not None
    tool = calls[0].response.blocks[0]
    assert isinstance(tool, ToolCallBlock) and (tool.id, tool.name) == ("call_sql", "exec_command")
    assert tool.input == {"cmd": f'ispm-sql "{SQL}"'}
    assert OPENAI_MARKER not in out.model_dump_json() and ANTHROPIC_MARKER not in out.model_dump_json()


@pytest.mark.docker
@pytest.mark.slow
def test_codex_without_an_answer_leaves_a_failure_answer(
    docker_backend: DockerBackend, fake: FakeProvider, refs: dict[str, ImageRef], task: Task
) -> None:
    fake.push(Turn(text="I will not look.", usage=Usage(input_tokens=900, output_tokens=9)))
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        out, usage = run_with_gateway(
            docker_backend, gateway, make_spec(task, refs["agent-codex"].tag, "gpt-scripted-1")
        )

    assert out.exit_code == 1 and out.status == "agent_error", (out.error, out.stderr_tail)
    assert out.answer is not None and out.answer.verdict is None and out.answer.evidence == []
    assert out.answer.response == (
        "No answer was written: Codex exited with code 0.\n\nCodex's final message:\nI will not look."
    )
    assert (usage.requests, usage.tokens.input_tokens, usage.tokens.output_tokens) == (1, 900, 9)


def chat_tool_names(seen: Seen) -> list[str]:
    return [t["function"]["name"] for t in seen.body.get("tools") or []]


@pytest.mark.docker
@pytest.mark.slow
def test_codex_runs_on_a_chat_only_candidate_with_its_custom_tools(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    """A model name Codex knows (gpt-5.5) brings the custom ``apply_patch`` tool (a grammar) and client-run tool
    search; the candidate speaks chat only: the gateway translates both ways, streamed, and the model's call of
    apply_patch reaches Codex as a custom tool call, which writes the answer."""
    fake.push(*PATCH_TURNS)
    with Gateway("vllm/scripted-chat-1", settings=SETTINGS) as gateway:
        out, usage = run_with_gateway(docker_backend, gateway, make_spec(task, refs["agent-codex"].tag, "gpt-5.5"))

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {VLLM_MARKER}"
        assert seen.body["model"] == "scripted-chat-1" and seen.body["stream"] is True
        names = chat_tool_names(seen)
        assert {"exec_command", "apply_patch", "tool_search"} <= set(names)
        patch = next(t["function"] for t in seen.body["tools"] if t["function"]["name"] == "apply_patch")
        assert patch["parameters"]["required"] == ["input"] and "*** Begin Patch" in patch["description"]
    assert {(c.api, c.provider_api, c.requested_model, c.outcome) for c in usage.calls} == {
        ("responses", "chat", "gpt-5.5", "ok")
    }
    result = fake.seen[1].body["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_sql"
    assert re.search(r"\bstatus\b.*\bn\b", result["content"])
    # Codex replayed its custom call as the chat call the model made, and its output as the tool's result.
    replayed = fake.seen[2].body["messages"]
    call = replayed[-2]["tool_calls"][0]
    assert (call["id"], call["function"]["name"], json.loads(call["function"]["arguments"])) == (
        "call_patch",
        "apply_patch",
        {"input": PATCH},
    )
    assert replayed[-1]["role"] == "tool" and replayed[-1]["tool_call_id"] == "call_patch"
    assert_the_trace_shows_the_query(out.trace, commands_run=1)
    assert [c["path"] for item in completed(out.trace, "file_change") for c in item["changes"]] == [
        "/output/answer.json"
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_codex_runs_on_an_anthropic_candidate_with_its_multi_agent_tools(
    docker_backend: DockerBackend,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
) -> None:
    """Responses -> chat -> Messages and back, streamed; the multi-agent namespace's tools reach Claude by name."""
    fake.push(*CODEX_TURNS)
    with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
        spec = make_spec(task, refs["agent-codex"].tag, "gpt-scripted-1")
        out, usage = run_with_gateway(docker_backend, gateway, spec)

    assert_the_investigation_succeeded(out, usage, fake, world_db)
    for seen in fake.seen:
        assert (seen.method, seen.path) == ("POST", "/v1/messages")
        assert seen.headers["x-api-key"] == ANTHROPIC_MARKER and seen.body["stream"] is True
        names = [t["name"] for t in seen.body["tools"]]
        assert "exec_command" in names and "multi_agent_v1__spawn_agent" in names
    assert {(c.api, c.provider_api, c.requested_model) for c in usage.calls} == {
        ("responses", "messages", "gpt-scripted-1")
    }
    tool_result = fake.seen[1].body["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "call_sql"
    assert_the_trace_shows_the_query(out.trace)


@pytest.mark.docker
@pytest.mark.slow
def test_the_codex_cli_starts_in_the_lockdown(refs: dict[str, ImageRef]) -> None:
    assert resolve_image("codex") == refs["agent-codex"].tag  # --agent-image codex
    engine = docker.from_env()
    try:
        image = engine.images.get(refs["agent-codex"].tag)
    finally:
        engine.close()
    assert (image.labels["ispm.agent.contract"], image.labels["ispm.agent.name"]) == ("ispm.agent/v1", "codex")
    assert run_locked_down(refs["agent-codex"].tag, "/opt/codex/bin/codex", ["--version"]) == CODEX_VERSION


@pytest.mark.docker
@pytest.mark.slow
def test_ispm_run_with_agent_image_codex_completes_a_sample(refs: dict[str, ImageRef], tmp_path: Path) -> None:
    """What a user types: ``ispm run --agent-image codex``, the real process, against the scripted fake."""
    script = list(CODEX_TURNS)

    def answer(seen: Seen) -> Turn | Reply:
        if seen.path.endswith("/responses"):
            return script.pop(0)
        return Reply(body=openai_completion("ok", model="cand-2026-11-01"))  # preflight's probe of the candidate

    with FakeProvider(responder=answer) as fake:
        env = {**os.environ, "OPENAI_API_KEY": OPENAI_MARKER, "OPENAI_BASE_URL": fake.openai_base}
        args = ["run", "--agent-image", "codex", "--candidate", "openai/cand", "--task", "ispm-001"]
        args += [
            "--judge",
            "ref#1",
            "--judge",
            "ref#2",
            "--epochs",
            "1",
            "--concurrency",
            "1",
            "--run-dir",
            str(tmp_path / "run"),
        ]
        done = subprocess.run([str(ISPM), *args], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    record = RunRecord.model_validate_json((tmp_path / "run" / "record.json").read_text(encoding="utf-8"))
    (sample,) = record.samples
    assert sample.status == "ok", sample.error
    assert sample.queries_declared == [SQL]
    assert sample.agent is not None and script == []
    assert (sample.agent.requests, sample.agent.input_tokens, sample.agent.output_tokens) == (3, 6806, 92)
    assert [(c.api, c.stream, c.outcome) for c in sample.agent_calls] == [("responses", True, "ok")] * 3
