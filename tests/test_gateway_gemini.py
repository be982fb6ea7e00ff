"""Gemini's API at the gateway, through the official ``google-genai`` client, streamed and not.

Two steps of an investigation (a function call, then the answer after its response) against each kind of candidate:
a ``google/`` model passed through on Gemini's own API, a chat-completions model and an Anthropic one reached through
the translation. The fake provider renders each scripted turn from the SDKs' own types and reports what it put on
the wire, so the gateway's accounting is compared with it exactly. Then what the gateway refuses: each a 4xx in
Google's error shape, naming what was refused, that the SDK raises as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fake_provider import FakeProvider, Seen, StreamError, ToolCall, Turn, Usage, point_clients_at, total_usage
from google import genai
from google.genai import errors, types

from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway, SampleUsage

KEY = "gk-live-GEMINI-MARKER-7a1c9e"
SETTINGS = ClientSettings(read_timeout=2.0, max_attempts=2, backoff_initial=0.01, backoff_max=0.02)
SQL = "SELECT id FROM hibob_people WHERE status = 'terminated'"
CANDIDATES = {
    "google": ("google/gemini-2.5-flash", "gemini"),
    "openai": ("openai/gpt-4.1", "chat"),
    "anthropic": ("anthropic/claude-sonnet-4-6", "messages"),
}
INVESTIGATION = [
    Turn(
        text="Checking the leavers.",
        tool_calls=[ToolCall("run_sql", {"sql": SQL})],
        usage=Usage(input_tokens=1200, output_tokens=40, cached_tokens=1000, reasoning_tokens=12),
    ),
    Turn(text="Two leavers can still sign in.", usage=Usage(input_tokens=1300, output_tokens=25)),
]
RUN_SQL = types.FunctionDeclaration(
    name="run_sql",
    description="Run one SQL query",
    parameters=types.Schema(
        type=types.Type.OBJECT, properties={"sql": types.Schema(type=types.Type.STRING)}, required=["sql"]
    ),
)
CONFIG = types.GenerateContentConfig(
    system_instruction="You are an analyst.",
    tools=[types.Tool(function_declarations=[RUN_SQL])],
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)


def client(gw: Gateway, token: str) -> genai.Client:
    host, port = gw.listen_tcp()
    return genai.Client(api_key=token, http_options=types.HttpOptions(base_url=f"http://{host}:{port}"))


def step(sdk: genai.Client, contents: list[types.Content], stream: bool, config: Any = CONFIG) -> list[types.Part]:
    """One model turn as the SDK's caller sees it: every part of candidate 0."""
    if not stream:
        response = sdk.models.generate_content(model="gemini-agent-pick", contents=contents, config=config)
        return list(response.candidates[0].content.parts or []) if response.candidates else []
    parts: list[types.Part] = []
    for chunk in sdk.models.generate_content_stream(model="gemini-agent-pick", contents=contents, config=config):
        candidate = chunk.candidates[0] if chunk.candidates else None
        parts += candidate.content.parts or [] if candidate and candidate.content else []
    return parts


def readable(parts: list[types.Part]) -> tuple[str, list[tuple[str | None, dict[str, Any] | None]]]:
    text = "".join(p.text or "" for p in parts if not p.thought)
    return text, [(p.function_call.name, p.function_call.args) for p in parts if p.function_call]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Any:
    with FakeProvider() as fake:
        point_clients_at(monkeypatch, fake, KEY + "-openai", KEY + "-anthropic")
        monkeypatch.setenv("GEMINI_API_KEY", KEY)
        monkeypatch.setenv("GEMINI_BASE_URL", fake.gemini_base)
        yield fake


@dataclass(frozen=True)
class Investigation:
    first: tuple[str, list[Any]]
    second: tuple[str, list[Any]]
    usage: SampleUsage
    sent: Usage
    seen: list[Seen]
    provider_api: str


@pytest.fixture(
    params=[(name, stream) for name in CANDIDATES for stream in (False, True)],
    ids=lambda p: f"{p[0]}-{'streamed' if p[1] else 'plain'}",
)
def investigation(request: pytest.FixtureRequest, env: FakeProvider) -> Investigation:
    name, stream = request.param
    candidate, provider_api = CANDIDATES[name]
    env.push(*INVESTIGATION)
    with Gateway(candidate, settings=SETTINGS) as gw:
        sdk = client(gw, gw.issue_token("s"))
        contents = [types.Content(role="user", parts=[types.Part(text="Leavers?")])]
        first = step(sdk, contents, stream)
        responses = [
            types.Part(
                function_response=types.FunctionResponse(
                    id=p.function_call.id, name=p.function_call.name, response={"result": "2 rows"}
                )
            )
            for p in first
            if p.function_call
        ]
        contents += [types.Content(role="model", parts=first), types.Content(role="user", parts=responses)]
        second = step(sdk, contents, stream)
        usage = gw.revoke("s")
    return Investigation(readable(first), readable(second), usage, total_usage(env.reported), env.seen, provider_api)


def test_the_agent_reads_each_steps_text_and_function_call(investigation: Investigation) -> None:
    assert investigation.first == ("Checking the leavers.", [("run_sql", {"sql": SQL})])
    assert investigation.second == ("Two leavers can still sign in.", [])


def test_every_token_counted_is_one_the_provider_reported(investigation: Investigation) -> None:
    tokens, sent = investigation.usage.tokens, investigation.sent
    assert (tokens.input_tokens, tokens.output_tokens, tokens.cached_tokens, tokens.reasoning_tokens) == (
        (sent.input_tokens, sent.output_tokens, sent.cached_tokens, sent.reasoning_tokens)
    )
    assert (tokens.input_tokens, tokens.output_tokens, tokens.cached_tokens, tokens.reasoning_tokens) == (
        2500,
        65,
        1000,
        12,
    )


def test_each_call_records_the_path_s_model_the_api_and_the_provider_api(investigation: Investigation) -> None:
    assert [(c.api, c.provider_api, c.requested_model, c.outcome) for c in investigation.usage.calls] == [
        ("gemini", investigation.provider_api, "gemini-agent-pick", "ok")
    ] * 2


def test_the_function_response_reached_the_provider_paired_with_its_call(investigation: Investigation) -> None:
    body = investigation.seen[1].body
    if investigation.provider_api == "gemini":
        assert body["contents"][-1]["parts"][0]["functionResponse"]["response"] == {"result": "2 rows"}
    elif investigation.provider_api == "chat":
        call, result = body["messages"][-2:]
        assert result == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "2 rows"}
    else:
        call, result = body["messages"][-2:]
        (use,) = [b for b in call["content"] if b["type"] == "tool_use"]
        assert result["content"][0]["tool_use_id"] == use["id"]


def test_a_google_candidate_is_asked_on_its_own_api_with_its_key_in_googles_header(env: FakeProvider) -> None:
    env.push(INVESTIGATION[1])
    with Gateway("google/gemini-2.5-flash", settings=SETTINGS) as gw:
        step(client(gw, gw.issue_token("s")), [types.Content(role="user", parts=[types.Part(text="q")])], True)
        gw.revoke("s")
    (seen,) = env.seen
    assert seen.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert seen.headers["x-goog-api-key"] == KEY and "authorization" not in seen.headers
    assert "model" not in seen.body and "stream" not in seen.body


@pytest.mark.parametrize("candidate", ["google/gemini-2.5-flash", "openai/gpt-4.1"])
def test_an_error_in_the_providers_stream_ends_the_agents_in_googles_shape(env: FakeProvider, candidate: str) -> None:
    """The stream's last event is ``{"error": {...}}``, which google-genai raises (3.x; the 1.20 here only parses)."""
    env.push(Turn(text="Checking the leavers now.", error=StreamError(after=2, message="Overloaded")))
    with Gateway(candidate, settings=SETTINGS) as gw:
        host, port = gw.listen_tcp()
        url = f"http://{host}:{port}/v1beta/models/m:streamGenerateContent?alt=sse"
        headers = {"x-goog-api-key": gw.issue_token("s")}
        answer = httpx.post(url, json={"contents": [{"role": "user", "parts": [{"text": "q"}]}]}, headers=headers)
        usage = gw.revoke("s")
    events = [json.loads(line[len("data: ") :]) for line in answer.text.splitlines() if line.startswith("data: ")]
    assert events[0]["candidates"][0]["content"]["parts"][0]["text"] == "Checking"
    error = events[-1]["error"]
    assert (error["code"], error["status"]) == (500, "INTERNAL") and "Overloaded" in error["message"]
    assert [c.outcome for c in usage.calls] == ["stream_cut"]


# --- what the gateway refuses, in Google's error shape -------------------------------------------------------


def test_a_provider_run_tool_is_refused_with_a_400_the_sdk_raises_and_the_sample_records(env: FakeProvider) -> None:
    config = CONFIG.model_copy(update={"tools": [types.Tool(google_search=types.GoogleSearch())]})
    with Gateway("google/gemini-2.5-flash", settings=SETTINGS) as gw:
        with pytest.raises(errors.ClientError) as caught:
            step(
                client(gw, gw.issue_token("s")),
                [types.Content(role="user", parts=[types.Part(text="q")])],
                False,
                config,
            )
        usage = gw.revoke("s")
    assert (caught.value.code, caught.value.status) == (400, "INVALID_ARGUMENT")
    assert "tools[0] has 'googleSearch', a tool the provider runs itself" in str(caught.value.message)
    assert env.seen == [] and usage.requests == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("POST", "/v1beta/models/m:countTokens", {"contents": []}, 404, "generateContent, streamGenerateContent only"),
        ("POST", "/v1beta/models/m:streamGenerateContent", {"contents": []}, 400, "needs ?alt=sse"),
        ("POST", "/v1/models/m:generateContent", {"prompt": "q"}, 400, "the request needs a 'contents' list"),
        ("POST", "/v1beta/cachedContents", {}, 404, "no route POST /v1beta/cachedContents"),
        ("GET", "/v1beta/files", None, 404, "no route GET /v1beta/files"),
        ("GET", "/v1beta/models/", None, 404, "no route GET /v1beta/models/"),
    ],
)
def test_what_the_gateway_does_not_serve_is_a_4xx_in_googles_shape_naming_it(
    env: FakeProvider, method: str, path: str, body: Any, status: int, says: str
) -> None:
    with Gateway("google/gemini-2.5-flash", settings=SETTINGS) as gw:
        host, port = gw.listen_tcp()
        headers = {"x-goog-api-key": gw.issue_token("s")}
        answer = httpx.request(method, f"http://{host}:{port}{path}", json=body, headers=headers)
        gw.revoke("s")
    error = answer.json()["error"]
    assert (answer.status_code, error["code"]) == (status, status)
    assert error["status"] in ("INVALID_ARGUMENT", "NOT_FOUND") and says in error["message"]
    assert env.seen == []


def test_the_sdk_lists_and_gets_the_candidate_in_googles_shape(env: FakeProvider) -> None:
    with Gateway("google/gemini-2.5-flash", settings=SETTINGS) as gw:
        sdk = client(gw, gw.issue_token("s"))
        listed = [m.name for m in sdk.models.list()]
        got = sdk.models.get(model="gemini-agent-pick")
        gw.revoke("s")
    assert listed == ["models/gemini-2.5-flash"]
    assert (got.name, got.display_name, got.supported_actions) == (
        "models/gemini-agent-pick",
        "gemini-2.5-flash",
        ["generateContent", "streamGenerateContent"],
    )
    assert env.seen == []  # answered by the gateway: nothing is asked of the provider


def test_a_request_without_a_live_token_is_a_401_in_googles_shape(env: FakeProvider) -> None:
    with Gateway("google/gemini-2.5-flash", settings=SETTINGS) as gw, pytest.raises(errors.ClientError) as caught:
        step(client(gw, "not-a-token"), [types.Content(role="user", parts=[types.Part(text="q")])], False)
    assert (caught.value.code, caught.value.status) == (401, "UNAUTHENTICATED")
