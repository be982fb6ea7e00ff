"""Claude Code (built on Anthropic's official SDK) in the real sandbox: its transcript shows what it asked and what it
was answered.

The real image runs in a real locked-down container behind the real gateway, whose candidate is the scripted fake
provider on loopback. After the sample, the gateway hands its transcript over as a run does, and the test reads it
back through the store.
"""

from __future__ import annotations

import gzip
import uuid
from collections.abc import Iterator

import pytest
from claude_code_script import claude_code_turns, claude_responder, tool_names
from docker_fixtures import docker_backend
from fake_provider import FakeProvider, Usage, point_clients_at

from runner.call import ModelCall, TextBlock, ToolCallBlock
from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway
from runner.paths import tasks_dir
from runner.sample_key import SampleKey
from runner.sandbox.backend import SampleSpec, gateway_link
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ImageRef
from runner.tasks.load import load_tasks
from runner.tasks.view import agent_files
from runner.transcript.storage import read_stored, resolve

__all__ = ["docker_backend"]  # a fixture, imported for pytest
RUN = f"test-capture-cc-{uuid.uuid4().hex[:8]}"
TASK_ID = "ispm-001"
KEY = f"sk-ant-capture-cc-{uuid.uuid4().hex}"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
ANSWER = {"format": "ispm.answer/v1", "response": "Scripted.", "verdict": None, "evidence": [], "queries": [SQL]}
TURNS = claude_code_turns(
    SQL,
    ANSWER,
    opening="Counting Okta users by status.",
    usages=(Usage(input_tokens=1201, output_tokens=41), Usage(input_tokens=1302, output_tokens=52), Usage(1403, 13)),
)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(responder=claude_responder(TURNS)) as provider:
        yield point_clients_at(monkeypatch, provider, "sk-unused-openai-0000", KEY)


@pytest.mark.docker
@pytest.mark.slow
def test_a_claude_code_sample_leaves_the_prompt_it_sent_and_each_streamed_reply_assembled(
    docker_backend: DockerBackend, fake: FakeProvider, refs: dict[str, ImageRef]
) -> None:
    task = {t.id: t for t in load_tasks(tasks_dir())}[TASK_ID]
    spec = SampleSpec(
        task_id=TASK_ID,
        run_id=RUN,
        image=refs["agent-claude-code"].tag,
        task_files=agent_files(task, time_limit_seconds=90),
        time_limit_s=90,
        env={"ISPM_MODEL": "claude-scripted-1"},
    )
    settings = ClientSettings(read_timeout=30.0, max_attempts=2, backoff_initial=0.01, backoff_max=0.05)
    with Gateway("anthropic/claude-scripted-1", settings=settings) as gateway:
        with gateway_link(gateway, spec.sample_id) as (folder, token):
            out = docker_backend.run_sample(
                spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token})
            )
        builder = gateway.transcript(spec.sample_id)
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert builder is not None
    data = builder.encode(RUN, SampleKey(task_id=TASK_ID, epoch=1))
    assert KEY not in gzip.decompress(data).decode()
    calls = [e for e in resolve(read_stored(data, "test"), "test") if isinstance(e, ModelCall)]
    loop = [c for c in calls if "Bash" in tool_names(c.request.content)]
    assert len(loop) == 3 and len(calls) == len(fake.seen)

    first = loop[0]
    sent = "".join(block.get("text", "") for block in first.request.content["messages"][0]["content"])
    assert task.prompt.strip() in sent
    assert first.stream and first.request_headers["user-agent"].startswith("claude-cli/")
    assert first.response is not None and first.response.complete
    assert first.response.blocks[0] == TextBlock(text="Counting Okta users by status.")
    tool = first.response.blocks[1]
    assert isinstance(tool, ToolCallBlock) and (tool.id, tool.name) == ("toolu_sql", "Bash")
    assert tool.input == {"command": f'ispm-sql "{SQL}"', "description": "Count users"}
    result = loop[1].request.content["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_sql"
    assert loop[2].response is not None
    assert loop[2].response.blocks == [TextBlock(text="The answer is in /output/answer.json.")]
