"""The reference agent end to end: a real container, the real gateway, a scripted provider on loopback.

The provider is :class:`fake_provider.FakeProvider`; the gateway (``runner.gateway.server``) forwards to it with
a host "key" that is a unique marker, so any leak of it into the container, its output or the logs is visible.
A provider that keeps failing must end in a recorded failure answer (status ``agent_error``: the agent writes
the answer, then exits 1), never a crash and never a missing answer.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import logging
import sqlite3
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from docker_fixtures import docker_backend
from fake_provider import OPENAI_MODEL, FakeProvider, Reply, openai_completion

from runner.call import Usage
from runner.contract import Answer, SampleOutput
from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway, SampleUsage
from runner.paths import tasks_dir, world_dir
from runner.sandbox.backend import SampleSpec, gateway_link
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ImageRef, images_dir
from runner.sandbox.local import LocalBackend
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.view import agent_files

__all__ = ["docker_backend"]  # fixtures, imported for pytest
RUN = f"test-refagent-{uuid.uuid4().hex[:8]}"
TASK_ID = "ispm-001"
# The host's provider key for these tests: unique, so a hit anywhere is a leak and nothing else.
MARKER = f"sk-refagent-marker-{uuid.uuid4().hex}"
SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
SETTINGS = ClientSettings(read_timeout=5.0, max_attempts=2, backoff_initial=0.01, backoff_max=0.05)
SUBMITTED = {
    "response": "Yes: the scripted investigation found what it was told to find.",
    "verdict": "yes",
    "evidence": [{"vendor": "okta", "kind": "account", "identifier": "00u-scripted", "fact": "It is scripted."}],
    "queries": [SQL],
}


@pytest.fixture(scope="module")
def task() -> Task:
    return {t.id: t for t in load_tasks(tasks_dir())}[TASK_ID]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        monkeypatch.setenv("OPENAI_API_KEY", MARKER)
        monkeypatch.setenv("OPENAI_BASE_URL", provider.openai_base)
        yield provider


@pytest.fixture
def gateway(fake: FakeProvider) -> Iterator[Gateway]:
    with Gateway("openai/gpt-4.1", settings=SETTINGS) as gw:
        yield gw


@pytest.fixture(scope="module")
def agent() -> Iterator[ModuleType]:
    """The agent's source, imported on the host: its helpers are plain functions."""
    spec = importlib.util.spec_from_file_location("reference_agent", images_dir() / "agents" / "reference" / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look the module up by name while the class is made.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def make_spec(task: Task, image: str, **overrides: Any) -> SampleSpec:
    settings: dict[str, Any] = {
        "task_id": task.id,
        "run_id": RUN,
        "image": image,
        "task_files": agent_files(task, time_limit_seconds=60),
        "time_limit_s": 60,
        "memory_bytes": 256 * 1024**2,
        "pids": 64,
        "env": {"ISPM_MODEL": "scripted-model", "ISPM_REQUEST_TIMEOUT_S": "20"},
        **overrides,
    }
    return SampleSpec(**settings)


def run_with_gateway(docker_backend: DockerBackend, gateway: Gateway, spec: SampleSpec) -> tuple[SampleOutput, str]:
    """Run ``spec`` through the gateway path; returns the output and the (now revoked) token."""
    with gateway_link(gateway, spec.sample_id) as (folder, token):
        out = docker_backend.run_sample(spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token}))
    return out, token.get_secret_value()


def tool_call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def push_script(fake: FakeProvider) -> None:
    """The scripted investigation: list the tables, run one real query, submit."""
    fake.push(
        Reply(
            body=openai_completion(
                None, prompt_tokens=101, completion_tokens=11, tool_calls=[tool_call("c1", "list_tables", {})]
            )
        ),
        Reply(
            body=openai_completion(
                "Counting Okta users by status.",
                prompt_tokens=202,
                completion_tokens=22,
                cached_tokens=50,
                tool_calls=[tool_call("c2", "run_sql", {"sql": SQL})],
            )
        ),
        Reply(
            body=openai_completion(
                None, prompt_tokens=303, completion_tokens=33, tool_calls=[tool_call("c3", "submit_answer", SUBMITTED)]
            )
        ),
    )


def post_chat(port: int, token: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        conn.request("POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {token}"})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.docker
def test_the_reference_agent_completes_a_scripted_investigation(
    docker_backend: DockerBackend,
    gateway: Gateway,
    fake: FakeProvider,
    refs: dict[str, ImageRef],
    task: Task,
    world_db: sqlite3.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    push_script(fake)
    _, port = gateway.listen_tcp()  # an unbound host-side listener, to try the token after the sample
    spec = make_spec(task, refs["agent-reference"].tag)
    out, token = run_with_gateway(docker_backend, gateway, spec)
    usage = gateway.usage(spec.sample_id)

    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.answer == Answer.model_validate(SUBMITTED)
    # Both the table listing and the model's query went through ispm-sql, so both are logged.
    logged = [q.sql for q in out.queries]
    assert SQL in logged and any("sqlite_master" in sql for sql in logged)
    entry = next(q for q in out.queries if q.sql == SQL)
    assert entry.error is None and entry.row_count == len(world_db.execute(SQL).fetchall())
    steps = [e for e in out.trace if e.get("role") in ("assistant", "tool")]
    assert [e.get("tool") for e in steps if e["role"] == "tool"] == ["list_tables", "run_sql", "submit_answer"]
    assert [e["tokens"]["prompt_tokens"] for e in steps if e["role"] == "assistant"] == [101, 202, 303]

    # The gateway's accounting is exactly the script.
    assert usage == SampleUsage(
        sample_id=spec.sample_id,
        requests=3,
        tokens=Usage(input_tokens=606, output_tokens=66, cached_tokens=50),
        latency_s=usage.latency_s,
        model_ids=[OPENAI_MODEL],
        calls=usage.calls,
    )
    assert [(c.api, c.provider_api, c.stream, c.outcome, c.usage and c.usage.input_tokens) for c in usage.calls] == [
        ("chat", "chat", False, "ok", tokens) for tokens in (101, 202, 303)
    ]
    assert len(fake.seen) == 3
    assert all(s.headers["authorization"] == f"Bearer {MARKER}" for s in fake.seen)  # the host key was used
    first = fake.seen[0].body
    assert [t["function"]["name"] for t in first["tools"]] == [
        "list_tables",
        "describe_table",
        "run_sql",
        "submit_answer",
    ]
    system = first["messages"][0]["content"]
    assert "2026-06-30T00:00:00Z" in system
    # The prompt withholds what the contract withholds: the task's witness SQL and its truth.
    requests_text = json.dumps([s.body for s in fake.seen])
    assert task.witness_sql not in requests_text and task.dual_sql not in requests_text
    # The tool results went back to the model: the table list, then the query's rows.
    assert "okta_users" in json.dumps(fake.seen[1].body["messages"][-1])
    assert '"columns": ["status", "n"]' in fake.seen[2].body["messages"][-1]["content"]

    # The token died with the sample.
    assert post_chat(port, token) == 401
    assert len(fake.seen) == 3

    # The key is in no part of what the sample produced, its spec, or the logs.
    assert MARKER not in spec.model_dump_json() and MARKER not in json.dumps(spec.env)
    assert MARKER not in out.model_dump_json()
    assert MARKER not in caplog.text and all(MARKER not in repr(r.__dict__) for r in caplog.records)
    assert "token_refused" in caplog.text  # the logs were captured, not silently empty


@pytest.mark.docker
def test_the_key_is_not_in_the_container_environment_or_files(
    docker_backend: DockerBackend, gateway: Gateway, refs: dict[str, ImageRef], task: Task
) -> None:
    # The marker is built at run time from two halves, so it is not in the command line the container gets,
    # and handed to grep on stdin, so it is not in the container's files either.
    half = len(MARKER) // 2
    probe = textwrap.dedent(
        f"""
        import json, os, subprocess
        marker = {MARKER[:half]!r} + {MARKER[half:]!r}
        env = "\\n".join(f"{{k}}={{v}}" for k, v in os.environ.items())
        grep = subprocess.run(
            ["grep", "-rlF", "-f", "-", "/", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev"],
            input=marker, capture_output=True, text=True,
        )
        facts = {{"env_hit": marker in env, "grep_exit": grep.returncode, "files": grep.stdout.split(),
                  "grep_errors": grep.stderr.splitlines(),
                  "has_token": bool(os.environ.get("OPENAI_API_KEY")), "names": sorted(os.environ)}}
        json.dump({{"response": json.dumps(facts)}}, open("/output/answer.json", "w"))
        """
    )
    spec = make_spec(task, refs["agent-reference"].tag, command=["python3", "-c", probe])
    out, _ = run_with_gateway(docker_backend, gateway, spec)
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.answer is not None
    facts = json.loads(out.answer.response)
    assert facts["has_token"] and "OPENAI_API_KEY" in facts["names"]
    assert facts["env_hit"] is False
    # grep exits 1 for "no match", 2 when some files were unreadable: those the agent cannot read either.
    assert facts["grep_exit"] in (1, 2) and facts["files"] == []
    unexpected = [e for e in facts["grep_errors"] if not e.endswith(("Permission denied", "No such file or directory"))]
    assert unexpected == []


@pytest.mark.docker
def test_a_failing_provider_ends_in_a_recorded_failure_answer(
    docker_backend: DockerBackend, gateway: Gateway, fake: FakeProvider, refs: dict[str, ImageRef], task: Task
) -> None:
    fake.push(*[Reply(500, {"error": {"message": "upstream is down"}}) for _ in range(10)])
    spec = make_spec(task, refs["agent-reference"].tag)
    out, _ = run_with_gateway(docker_backend, gateway, spec)
    usage = gateway.usage(spec.sample_id)

    # The agent writes its failure answer and exits 1: agent_error, with the answer kept.
    assert out.status == "agent_error", (out.error, out.stderr_tail)
    assert out.exit_code == 1 and out.error == "the agent exited with code 1"
    assert out.answer is not None and out.answer.verdict is None
    assert "the model gateway failed" in out.answer.response and "HTTP 502" in out.answer.response
    assert [e.get("event") for e in out.trace][-2:] == ["gateway_failure", "end"]
    # The gateway retried the provider (2 attempts) and said not to retry again; the agent obeyed.
    assert len(fake.seen) == 2
    assert usage.requests == 1 and usage.tokens.input_tokens == 0
    assert [(e.kind, e.status, e.attempts) for e in usage.errors] == [("http_status", 500, 2)]


@pytest.mark.docker
def test_the_agent_stops_within_its_time_budget_with_a_best_effort_answer(
    docker_backend: DockerBackend, gateway: Gateway, fake: FakeProvider, refs: dict[str, ImageRef], task: Task
) -> None:
    fake.push(Reply(body=openai_completion("too late"), delay=3.0))
    spec = make_spec(task, refs["agent-reference"].tag)
    spec = spec.model_copy(update={"env": {**spec.env, "ISPM_TIME_BUDGET_S": "2"}})
    out, _ = run_with_gateway(docker_backend, gateway, spec)
    # The gateway answers the abandoned request just after the sample and logs the hang-up: let that
    # happen inside the test, where the log is captured, rather than on the terminal after it.
    time.sleep(0.3)
    assert gateway.usage(spec.sample_id).requests == 1  # the abandoned call is still billed and counted
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.timings.agent < 3.0
    assert out.answer is not None and out.answer.verdict is None
    assert out.answer.response.startswith("No final answer was submitted: the time budget of 2 s ran out")
    assert "budget_exhausted" in [e.get("event") for e in out.trace]


def test_the_reference_agent_runs_on_the_local_backend(gateway: Gateway, fake: FakeProvider, task: Task) -> None:
    # The same agent file, run from the checkout: it honours the ISPM_* paths the local backend sets.
    push_script(fake)
    command = [sys.executable, "-I", str(images_dir() / "agents" / "reference" / "agent.py")]
    spec = make_spec(task, "local", command=command)
    with gateway_link(gateway, spec.sample_id) as (folder, token):
        out = LocalBackend().run_sample(spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token}))
    assert out.status == "ok", (out.error, out.stderr_tail)
    assert out.answer == Answer.model_validate(SUBMITTED)
    assert SQL in [q.sql for q in out.queries]
    assert gateway.usage(spec.sample_id).requests == 3


# -- the agent's helpers, on the host ------------------------------------------------------------------------


def host_config(agent: ModuleType, tmp_path: Path) -> Any:
    return agent.Config(
        base_url="http://127.0.0.1:9/v1",
        token="t",
        model="m",
        max_steps=3,
        budget_s=60.0,
        request_timeout_s=5.0,
        task_dir=tmp_path,
        output_dir=tmp_path,
        docs_dir=world_dir() / "docs",
        sql_tool="ispm-sql",
        kind="enumeration",
        prompt="p",
        as_of=agent.read_as_of(world_dir() / "docs"),
    )


def test_describe_table_returns_the_tables_section_only(agent: ModuleType, tmp_path: Path) -> None:
    cfg = host_config(agent, tmp_path)
    section = agent.describe_table(cfg, "okta_users")
    assert section.startswith("### `okta_users`") and "| `status` |" in section
    assert "okta_groups`" not in section
    missing = agent.describe_table(cfg, "okta_nothing")
    assert missing.startswith("error: 'okta_nothing' is not documented") and "okta_users" in missing
    assert agent.describe_table(cfg, "payroll").startswith("error: unknown table")


def test_the_system_prompt_states_the_as_of_and_no_task_specifics(agent: ModuleType, tmp_path: Path) -> None:
    cfg = host_config(agent, tmp_path)
    assert cfg.as_of == "2026-06-30T00:00:00Z"
    prompt = agent.system_prompt(cfg)
    assert "as of 2026-06-30T00:00:00Z" in prompt and "enumeration task" in prompt and "verdict: null" in prompt
    assert "SELECT" not in prompt.upper().replace("SELECT STATEMENT", "")


def test_clean_answer_coerces_what_models_get_wrong(agent: ModuleType) -> None:
    args = {
        "response": "Two accounts.",
        "verdict": "Yes ",
        "evidence": [
            {"vendor": "OKTA", "kind": "account", "identifier": "00u1", "fact": "active"},
            {"vendor": "salesforce", "kind": "account", "identifier": "x"},
            {"vendor": "aws", "identifier": ""},
            "not an object",
        ],
    }
    answer = Answer.model_validate(agent.clean_answer(args, ["SELECT 1"]))
    assert answer.verdict == "yes" and answer.queries == ["SELECT 1"]
    assert [(e.vendor, e.identifier) for e in answer.evidence] == [("okta", "00u1")]
    assert Answer.model_validate(agent.clean_answer({}, [])).response == ""


def test_the_default_budget_keeps_a_margin(agent: ModuleType) -> None:
    assert agent.default_budget(900) == 840  # 60 s margin at most
    assert agent.default_budget(60) == 54  # 10 %
    assert agent.default_budget(20) == 15  # 5 s at least
