"""What an agent may not make the provider do (runner/gateway/policy.py): tools the provider would run itself are
refused, tools the agent runs pass as sent; and a request the translation cannot read is refused by name."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_provider import Seen
from gateway_stage import CHAT, Stage, post, staged

MESSAGES = {"max_tokens": 10, "messages": [{"role": "user", "content": "q"}]}
#: (path, request body, refusal fragment).
OUTSIDE_THE_SANDBOX = [
    (
        "/v1/messages",
        {**MESSAGES, "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        "web_search_20250305",
    ),
    (
        "/v1/messages",
        {**MESSAGES, "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
        "web_fetch_20250910",
    ),
    ("/v1/messages", {**MESSAGES, "tools": [{"type": "code_execution_20250825", "name": "c"}]}, "code_execution"),
    (
        "/v1/messages",
        {**MESSAGES, "mcp_servers": [{"type": "url", "url": "https://example.org/mcp", "name": "x"}]},
        "mcp_servers",
    ),
    ("/v1/responses", {"input": "q", "tools": [{"type": "web_search"}]}, "'web_search'"),
    (
        "/v1/responses",
        {"input": "q", "tools": [{"type": "mcp", "server_url": "https://example.org", "server_label": "x"}]},
        "'mcp'",
    ),
    (
        "/v1/responses",
        {"input": "q", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]},
        "code_interpreter",
    ),
    ("/v1/responses", {"input": "q", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "file_search"),
    ("/v1/chat/completions", {**CHAT, "web_search_options": {}}, "web_search_options"),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": "web_search"}]}, "'web_search'"),
]
#: (candidate, path, request body): tools the agent runs itself, in its own sandbox.
AGENT_RUN_TOOLS = [
    (
        "anthropic/claude-sonnet-4-6",
        "/v1/messages",
        {**MESSAGES, "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]},
    ),
    ("anthropic/claude-sonnet-4-6", "/v1/messages", {**MESSAGES, "tools": [{"type": "bash_20250124", "name": "bash"}]}),
    (
        "openai/gpt-4.1",
        "/v1/responses",
        {"input": "q", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
    ),
    ("openai/gpt-4.1", "/v1/chat/completions", {**CHAT, "tools": [{"type": "function", "function": {"name": "f"}}]}),
]


@pytest.fixture(scope="module")
def policy_stage() -> Iterator[Stage]:
    with staged() as stage:
        yield stage


def _refused_tools(stage: Stage, path: str, body: Any) -> tuple[httpx.Response, int, int]:
    """The reply to ``body``, and how many requests the provider and the sample saw for it."""
    seen_before = len(stage.fake.seen)
    sample = f"p-{time.monotonic_ns()}"
    token = stage.gateway.issue_token(sample)
    resp = stage.http.post(path, json=body, headers={"authorization": f"Bearer {token}"})
    return resp, len(stage.fake.seen) - seen_before, stage.gateway.usage(sample).requests


@pytest.mark.parametrize(("path", "body", "says"), OUTSIDE_THE_SANDBOX)
def test_tools_the_provider_would_run_are_refused_with_a_400(
    policy_stage: Stage, path: str, body: Any, says: str
) -> None:
    assert _refused_tools(policy_stage, path, body)[0].status_code == 400


@pytest.mark.parametrize(("path", "body", "says"), OUTSIDE_THE_SANDBOX)
def test_a_refused_tool_is_named_as_running_outside_the_sandbox(
    policy_stage: Stage, path: str, body: Any, says: str
) -> None:
    text = _refused_tools(policy_stage, path, body)[0].text
    assert (says in text, "outside the sandbox" in text) == (True, True)


@pytest.mark.parametrize(("path", "body", "says"), OUTSIDE_THE_SANDBOX)
def test_a_refused_tool_never_reaches_the_provider(policy_stage: Stage, path: str, body: Any, says: str) -> None:
    assert _refused_tools(policy_stage, path, body)[1:] == (0, 0)


@pytest.fixture(scope="module", params=AGENT_RUN_TOOLS, ids=lambda case: f"{case[1]}-{case[2]['tools'][0]}")
def agent_run_tools(request: pytest.FixtureRequest) -> tuple[httpx.Response, Seen, Any]:
    """The reply to a request with a tool the agent runs, what the provider received, and the request's tools."""
    candidate, path, body = request.param
    with staged(candidate) as stage:
        resp = stage.http.post(path, json=body, headers={"x-api-key": stage.gateway.issue_token("a")})
        return resp, stage.fake.seen[-1], body["tools"]


def test_tools_the_agent_runs_are_allowed(agent_run_tools: tuple[httpx.Response, Seen, Any]) -> None:
    resp, _, _ = agent_run_tools
    assert resp.status_code == 200, resp.text


def test_tools_the_agent_runs_reach_the_provider_as_sent(agent_run_tools: tuple[httpx.Response, Seen, Any]) -> None:
    _, seen, tools = agent_run_tools
    assert seen.body["tools"] == tools


def test_a_chat_agents_malformed_tool_call_to_an_anthropic_candidate_gets_a_400_naming_it() -> None:
    history = [*CHAT["messages"], {"role": "assistant", "content": None, "tool_calls": ["run_sql"]}]
    with staged("anthropic/claude-sonnet-4-6") as stage:
        resp = post(stage.http, stage.gateway.issue_token("t"), {**CHAT, "messages": history})
    assert (resp.status_code, "tool calls must be objects" in resp.json()["error"]["message"]) == (400, True)
