"""What Codex CLI sends the gateway, unit by unit: namespace tools (allowed, their tools checked), client-run tool
search, provider-run tools refused with the setting that turns them off, Responses over WebSocket refused so that
the client falls back at once, and custom tools translated for a chat-only candidate, streamed or not."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from gateway_stage import Stage, staged
from openai.types.responses import (
    ResponseCustomToolCallInputDeltaEvent,
    ResponseCustomToolCallInputDoneEvent,
    ResponseOutputItemDoneEvent,
)

from runner.gateway import policy
from runner.gateway.protocols import TranslationError
from runner.gateway.protocols.chat_responses import (
    ChatStreamToResponses,
    chat_to_responses_response,
    responses_to_chat_request,
)

GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch" LF'}
APPLY_PATCH = {"type": "custom", "name": "apply_patch", "description": "Edit files.", "format": GRAMMAR}
EXEC = {"type": "function", "name": "exec_command", "parameters": {"type": "object"}, "strict": False}
SPAWN = {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}
MULTI_AGENT = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [SPAWN]}
TOOL_SEARCH = {"type": "tool_search", "execution": "client", "description": "Find tools.", "parameters": {}}
CODEX_TOOLS = [EXEC, APPLY_PATCH, MULTI_AGENT, TOOL_SEARCH]


@pytest.fixture(scope="module")
def stage() -> Iterator[Stage]:
    with staged() as scene:
        yield scene


def send(stage: Stage, body: Any) -> tuple[httpx.Response, int]:
    """The reply to ``body`` on /v1/responses, and how many requests reached the provider for it."""
    before = len(stage.fake.seen)
    token = stage.gateway.issue_token(f"c-{time.monotonic_ns()}")
    reply = stage.http.post("/v1/responses", json=body, headers={"authorization": f"Bearer {token}"})
    return reply, len(stage.fake.seen) - before


# -- the policy ---------------------------------------------------------------------------------------------


def test_codex_tools_pass_as_sent(stage: Stage) -> None:
    reply, reached = send(stage, {"input": "q", "tools": CODEX_TOOLS})
    assert (reply.status_code, reached) == (200, 1), reply.text
    assert stage.fake.seen[-1].body["tools"] == CODEX_TOOLS


@pytest.mark.parametrize(
    ("tools", "where", "says"),
    [
        ([EXEC, {**MULTI_AGENT, "tools": [SPAWN, {"type": "web_search"}]}], "tools[1].tools[1]", "web_search"),
        ([{**MULTI_AGENT, "tools": [{"type": "code_interpreter"}]}], "tools[0].tools[0]", "code_interpreter"),
        ([{"type": "tool_search", "execution": "server"}], "tools[0]", "tool_search"),
        ([{"type": "tool_search"}], "tools[0]", "tool_search"),
        ([{"type": "file_search", "vector_store_ids": ["vs_1"]}], "tools[0]", "file_search"),
    ],
)
def test_a_provider_run_tool_anywhere_is_refused_by_where_it_is(
    stage: Stage, tools: list[Any], where: str, says: str
) -> None:
    reply, reached = send(stage, {"input": "q", "tools": tools})
    message = reply.json()["error"]["message"]
    assert (reply.status_code, reached, reply.json()["error"]["type"]) == (400, 0, "invalid_request_error")
    assert message.startswith(f"{where} has type '{says}'") and "outside the sandbox" in message


def test_a_web_search_refusal_names_the_codex_setting_that_turns_it_off() -> None:
    why = policy.refusal("responses", {"tools": [EXEC, {"type": "web_search", "search_context_size": "low"}]})
    assert why is not None and 'web_search = "disabled"' in why and "config.toml" in why


def test_tools_handed_over_by_a_tool_search_are_checked_too(stage: Stage) -> None:
    found = {"type": "tool_search_output", "call_id": "ts_1", "execution": "client", "status": "completed"}
    history = [{"role": "user", "content": "q"}, {**found, "tools": [{"type": "mcp", "server_label": "x"}]}]
    reply, reached = send(stage, {"input": history, "tools": [TOOL_SEARCH]})
    assert (reply.status_code, reached) == (400, 0)
    assert reply.json()["error"]["message"].startswith("input[1].tools[0] has type 'mcp'")
    history[1] = {**found, "tools": [MULTI_AGENT]}
    assert send(stage, {"input": history, "tools": [TOOL_SEARCH]})[0].status_code == 200


def test_a_namespace_without_its_tools_is_refused(stage: Stage) -> None:
    reply, reached = send(stage, {"input": "q", "tools": [{"type": "namespace", "name": "n"}]})
    assert (reply.status_code, reached) == (400, 0)
    assert reply.json()["error"]["message"] == "tools[0] is a namespace without a tools list"


# -- Responses over WebSocket --------------------------------------------------------------------------------

UPGRADE = {"connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13"}


def test_responses_over_websocket_is_refused_with_426_in_openais_shape() -> None:
    with staged() as stage:
        token = stage.gateway.issue_token("ws")
        key = {"sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "openai-beta": "responses_websockets=2026-02-06"}
        reply = stage.http.get("/v1/responses", headers={**UPGRADE, **key, "authorization": f"Bearer {token}"})
        # 426, not 403/404/405: Codex 0.163.0 falls back to POST at once on it (it retries the others 7 times)
        assert reply.status_code == 426 and reply.headers["x-should-retry"] == "false"
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and "WebSocket" in error["message"]
        assert "POST /v1/responses" in error["message"] and "'websocket'" in error["message"]
        assert stage.fake.seen == []
        usage = stage.gateway.revoke("ws")
        assert usage.requests == 0 and usage.errors == []  # nothing was spent
        builder = stage.gateway.transcript("ws")
        assert builder is not None and builder.calls == 1  # the refusal is on the sample's record


def test_a_websocket_upgrade_without_a_token_is_refused_as_unauthenticated() -> None:
    with staged() as stage:
        reply = stage.http.get("/v1/responses", headers=UPGRADE)
    assert reply.status_code == 401 and reply.json()["error"]["type"] == "authentication_error"


# -- custom tools for a chat-only candidate -----------------------------------------------------------------

CALLS = {"id": "chatcmpl-1", "created": 1, "model": "m"}


def chat_reply(*calls: tuple[str, str, str]) -> dict[str, Any]:
    """A chat completion whose message makes these (id, function name, arguments) calls."""
    tool_calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {
        **CALLS,
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


def test_codex_tools_become_chat_functions() -> None:
    chat = responses_to_chat_request({"input": "q", "tools": CODEX_TOOLS}, "m")
    functions = {t["function"]["name"]: t["function"] for t in chat["tools"]}
    assert list(functions) == ["exec_command", "apply_patch", "multi_agent_v1__spawn_agent", "tool_search"]
    patch = functions["apply_patch"]
    assert patch["parameters"]["properties"] == {
        "input": {"type": "string", "description": "The tool's free-form input."}
    }
    assert patch["description"].startswith("Edit files.") and GRAMMAR["definition"] in patch["description"]


def test_a_custom_call_goes_back_to_the_agent_as_a_custom_tool_call() -> None:
    request = {"input": "q", "tools": CODEX_TOOLS}
    reply = chat_reply(
        ("c1", "apply_patch", json.dumps({"input": "*** Begin Patch\n"})),
        ("c2", "multi_agent_v1__spawn_agent", "{}"),
        ("c3", "tool_search", '{"query": "agents"}'),
        ("c4", "exec_command", '{"cmd": "ls"}'),
    )
    output = chat_to_responses_response(reply, request)["output"]
    assert [(o["type"], o.get("name"), o.get("namespace")) for o in output] == [
        ("custom_tool_call", "apply_patch", None),
        ("function_call", "spawn_agent", "multi_agent_v1"),
        ("tool_search_call", None, None),
        ("function_call", "exec_command", None),
    ]
    assert output[0]["input"] == "*** Begin Patch\n" and output[0]["call_id"] == "c1"
    assert output[2]["arguments"] == {"query": "agents"} and output[2]["execution"] == "client"


def test_a_custom_call_and_its_output_replay_as_a_chat_call_and_its_result() -> None:
    history = [
        {"role": "user", "content": "q"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** Begin Patch\n"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done!"},
        {
            "type": "function_call",
            "call_id": "c2",
            "name": "spawn_agent",
            "namespace": "multi_agent_v1",
            "arguments": "{}",
        },
        {"type": "function_call_output", "call_id": "c2", "output": "spawned"},
    ]
    messages = responses_to_chat_request({"input": history, "tools": CODEX_TOOLS}, "m")["messages"]
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "apply_patch",
        "arguments": json.dumps({"input": "*** Begin Patch\n"}),
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "Done!"}
    assert messages[3]["tool_calls"][0]["function"]["name"] == "multi_agent_v1__spawn_agent"


def test_a_streamed_custom_call_gives_the_custom_input_events() -> None:
    translator = ChatStreamToResponses({"input": "q", "tools": CODEX_TOOLS, "stream": True}, "m")
    arguments = json.dumps({"input": "*** Begin Patch\n*** End Patch\n"})
    pieces = [arguments[:10], arguments[10:]]
    chunks = [
        {
            **CALLS,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "apply_patch", "arguments": pieces[0]},
                            }
                        ]
                    },
                }
            ],
        },
        {
            **CALLS,
            "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": pieces[1]}}]}}],
        },
        {**CALLS, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    events = [e for chunk in chunks for e in translator.feed("", chunk)] + translator.close()
    names = [name for name, _ in events]
    assert names[2:] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    delta, done, item_done = (
        ResponseCustomToolCallInputDeltaEvent.model_validate(events[3][1]),
        ResponseCustomToolCallInputDoneEvent.model_validate(events[4][1]),
        ResponseOutputItemDoneEvent.model_validate(events[5][1]),
    )
    assert delta.delta == done.input == "*** Begin Patch\n*** End Patch\n"
    assert item_done.item.type == "custom_tool_call" and item_done.item.input == done.input
    assert events[-1][1]["response"]["output"][0]["input"] == done.input


def test_a_hosted_tool_in_a_namespace_cannot_be_translated_to_chat() -> None:
    with pytest.raises(TranslationError, match=r"tools\[0\]\.tools\[0\]: web_search tools are not supported"):
        responses_to_chat_request({"input": "q", "tools": [{**MULTI_AGENT, "tools": [{"type": "web_search"}]}]}, "m")
