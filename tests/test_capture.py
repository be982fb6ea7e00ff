"""Host capture in the gateway, over real sockets against the fake provider: what each call said, kept whole.

The agents here are the official SDKs (``anthropic``, ``openai``) and raw HTTP where an SDK would refuse to send
what a hostile agent sends. Each test takes the sample's transcript from the gateway after revoking its token, as
the run does, and reads it back through the store.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import socket
import time
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
from fake_provider import FakeProvider, Reply, StreamError, ToolCall, Turn, Usage, point_clients_at
from test_judge import make_item

from runner.call import Body, ModelCall, ReasoningBlock, TextBlock, ToolCallBlock
from runner.gateway.model import ClientSettings
from runner.gateway.protocols.messages import MessagesReader
from runner.gateway.providers import client_for
from runner.gateway.server import Gateway
from runner.grading.judge import LLMJudge
from runner.sample_key import SampleKey
from runner.transcript.capture import MAX_UNTAKEN, Capture, JudgeCapture
from runner.transcript.model import REDACTED, CapReachedEvent
from runner.transcript.storage import read_stored, resolve

OPENAI_KEY = "sk-capture-openai-7e1f0c2b9a8d"
ANTHROPIC_KEY = "sk-ant-capture-5c4b3a29180f"
SETTINGS = ClientSettings(read_timeout=2.0, max_attempts=1)
KEY = SampleKey(task_id="ispm-001", epoch=1)
SAMPLE = "ispm-001.e1"
SSE = {"content-type": "text/event-stream"}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield point_clients_at(monkeypatch, provider, OPENAI_KEY, ANTHROPIC_KEY)


@pytest.fixture
def claude(fake: FakeProvider) -> Iterator[tuple[Gateway, str]]:
    with Gateway("anthropic/claude-scripted-1", settings=SETTINGS) as gateway:
        host, port = gateway.listen_tcp()
        yield gateway, f"http://{host}:{port}"


@pytest.fixture
def gpt(fake: FakeProvider) -> Iterator[tuple[Gateway, str]]:
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS) as gateway:
        host, port = gateway.listen_tcp()
        yield gateway, f"http://{host}:{port}"


def transcript_of(gateway: Gateway, sample: str = SAMPLE) -> tuple[bytes, list[ModelCall | CapReachedEvent]]:
    gateway.revoke(sample)
    builder = gateway.transcript(sample)
    assert builder is not None
    data = builder.encode("run-1", KEY)
    return data, resolve(read_stored(data, "test"), "test")


def calls_of(gateway: Gateway, sample: str = SAMPLE) -> list[ModelCall]:
    return [e for e in transcript_of(gateway, sample)[1] if isinstance(e, ModelCall)]


def test_an_anthropic_sdk_stream_is_kept_as_the_request_sent_and_the_reply_assembled(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    fake.push(
        Turn(
            text="Counting Okta users.",
            tool_calls=[ToolCall("run_sql", {"sql": "SELECT 1"}, id="toolu_1")],
            usage=Usage(input_tokens=120, output_tokens=30, cached_tokens=100),
        )
    )
    token = gateway.issue_token(SAMPLE)
    client = anthropic.Anthropic(api_key=token, base_url=url, max_retries=0)
    tools = [{"name": "run_sql", "description": "Run SQL", "input_schema": {"type": "object"}}]
    with client.messages.stream(
        model="claude-whatever",
        max_tokens=512,
        system="You investigate with SQL.",
        messages=[{"role": "user", "content": "Who lacks MFA?"}],
        tools=tools,  # type: ignore[arg-type]
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"

    [call] = calls_of(gateway)
    assert (call.caller, call.api, call.provider_api, call.stream, call.outcome, call.status) == (
        "candidate",
        "messages",
        "messages",
        True,
        "ok",
        200,
    )
    assert call.requested_model == "claude-whatever"
    assert call.request.encoding == "json"
    assert call.request.content["system"] == "You investigate with SQL."
    assert call.request.content["messages"] == [{"role": "user", "content": "Who lacks MFA?"}]
    assert call.request.content["tools"] == tools
    assert call.request_headers["authorization"] == REDACTED  # this SDK sends its key as a bearer token
    assert call.request_headers["user-agent"].startswith("Anthropic/Python")
    response = call.response
    assert response is not None and response.complete
    assert response.blocks == [
        TextBlock(text="Counting Okta users."),
        ToolCallBlock(id="toolu_1", name="run_sql", arguments='{"sql": "SELECT 1"}', input={"sql": "SELECT 1"}),
    ]
    assert response.stop_reason == "tool_use"
    assert call.usage is not None and call.returned_model is not None
    assert (call.usage.input_tokens, call.usage.output_tokens, call.usage.cached_tokens) == (120, 30, 100)
    assert response.stream_events > 5 and call.ttft_s is not None and call.cut is None


def test_an_openai_sdk_call_translated_to_messages_keeps_the_agents_request_and_the_providers_reply(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    fake.push(Turn(text="Forty-two."))
    token = gateway.issue_token(SAMPLE)
    client = openai.OpenAI(api_key=token, base_url=url + "/v1", max_retries=0)
    reply = client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "How many?"}])
    assert reply.choices[0].message.content == "Forty-two."

    [call] = calls_of(gateway)
    assert (call.api, call.provider_api, call.stream) == ("chat", "messages", False)
    assert call.request.content["messages"] == [{"role": "user", "content": "How many?"}]
    assert call.response is not None and call.returned_model is not None
    assert call.response.blocks == [TextBlock(text="Forty-two.")]
    assert call.response.stop_reason == "end_turn"


def test_keys_planted_in_headers_and_body_never_reach_the_transcript(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    token = gateway.issue_token(SAMPLE)
    secrets = f"{ANTHROPIC_KEY} {OPENAI_KEY} {token}"
    fake.push(Turn(text=f"I saw {ANTHROPIC_KEY} and {token}."))
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": f"remember {secrets}"}],
        "metadata": {"user_id": token, OPENAI_KEY: "as a key"},
    }
    headers = {"x-api-key": token, "x-planted": secrets, "cookie": f"session={ANTHROPIC_KEY}"}
    reply = httpx.post(f"{url}/v1/messages", json=body, headers=headers, timeout=5)
    assert reply.status_code == 200

    data, events = transcript_of(gateway)
    plain = gzip.decompress(data).decode()
    for secret in (ANTHROPIC_KEY, OPENAI_KEY, token):
        assert secret not in plain
    [call] = [e for e in events if isinstance(e, ModelCall)]
    assert call.request_headers["x-planted"] == f"{REDACTED} {REDACTED} {REDACTED}"
    assert call.request_headers["cookie"] == call.request_headers["x-api-key"] == REDACTED
    assert call.request.content["messages"][0]["content"] == f"remember {REDACTED} {REDACTED} {REDACTED}"
    assert call.request.content["metadata"] == {"user_id": REDACTED, REDACTED: "as a key"}
    assert call.response is not None and call.response.blocks == [TextBlock(text=f"I saw {REDACTED} and {REDACTED}.")]


def test_a_stream_the_provider_cuts_mid_way_keeps_what_arrived(claude: tuple[Gateway, str], fake: FakeProvider) -> None:
    gateway, url = claude
    fake.push(Turn(text="The first part and the rest", cut_after=4))
    token = gateway.issue_token(SAMPLE)
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers={"x-api-key": token}, timeout=5) as reply:
        reply.read()

    [call] = calls_of(gateway)
    assert call.outcome == "stream_cut" and call.cut is not None
    assert call.cut.by == "provider" and call.cut.events_received == 4
    assert call.response is not None and not call.response.complete and call.response.stop_reason is None
    assert call.response.stream_events == 4


def test_an_error_event_mid_stream_is_kept_with_the_text_before_it(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    fake.push(Turn(text="partial answer", error=StreamError(after=4, message="Overloaded")))
    token = gateway.issue_token(SAMPLE)
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers={"x-api-key": token}, timeout=5) as reply:
        reply.read()

    [call] = calls_of(gateway)
    assert call.outcome == "stream_cut" and call.cut is not None and call.cut.by == "provider"
    assert "Overloaded" in (call.error or "")
    assert call.response is not None and not call.response.complete


def test_a_stream_the_agent_abandons_is_kept_as_cut_by_the_caller(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    fake.push(Turn(text=" ".join(["word"] * 40), delay_between=0.05))
    token = gateway.issue_token(SAMPLE)
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers={"x-api-key": token}, timeout=5) as reply:
        for _ in reply.iter_bytes():
            break  # the agent hangs up after its first chunk

    deadline = time.monotonic() + 5
    while gateway.usage(SAMPLE).in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    [call] = calls_of(gateway)
    assert call.outcome == "agent_disconnected" and call.cut is not None and call.cut.by == "caller"
    assert call.response is not None and not call.response.complete


def test_a_provider_failure_is_kept_with_its_status_and_the_error_the_agent_got(
    gpt: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = gpt
    fake.push(Reply(status=503, body={"error": {"message": "down for maintenance"}}))
    token = gateway.issue_token(SAMPLE)
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {token}"},
        timeout=5,
    )
    assert reply.status_code == 502

    [call] = calls_of(gateway)
    assert (call.outcome, call.status, call.response) == ("provider_error", 502, None)
    assert "503" in (call.error or "")
    assert call.error_body is not None and call.error_body.encoding == "json"
    assert "down for maintenance" in json.dumps(call.error_body.content)


def test_bodies_that_are_not_json_not_utf8_or_too_large_are_recorded_as_such_and_the_gateway_serves_on(
    fake: FakeProvider,
) -> None:
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS, max_body_bytes=4096) as gateway:
        host, port = gateway.listen_tcp()
        url = f"http://{host}:{port}/v1/chat/completions"
        token = gateway.issue_token(SAMPLE)
        auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        assert httpx.post(url, content=b'{"messages": [', headers=auth).status_code == 400
        assert httpx.post(url, content=b"\xff\xfe\x00binary\x89PNG", headers=auth).status_code == 400
        assert httpx.post(url, content=b"[" * 5000, headers=auth).status_code == 413
        assert httpx.post(url, content=b"[1, 2]", headers=auth).status_code == 400
        good = {"model": "m", "messages": [{"role": "user", "content": "still there?"}]}
        assert httpx.post(url, json=good, headers=auth).status_code == 200
        calls = calls_of(gateway)

    assert [(c.outcome, c.status, c.request.encoding) for c in calls] == [
        ("refused", 400, "text"),
        ("refused", 400, "binary"),
        ("refused", 413, "omitted"),
        ("refused", 400, "json"),
        ("ok", 200, "json"),
    ]
    assert calls[0].request.content == '{"messages": [' and calls[0].request.note == "not JSON"
    assert calls[1].request.note == "not UTF-8" and calls[1].request.size == 13
    assert calls[2].request.size == 5000 and calls[2].request.note == "the request body is too large"
    assert calls[3].request.content == [1, 2]  # JSON, but not the object the API needs
    assert [c.seq for c in calls] == [0, 1, 2, 3, 4]


def test_a_stream_cut_mid_event_by_the_agent_sending_half_a_body_is_refused_and_recorded(
    gpt: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = gpt
    token = gateway.issue_token(SAMPLE)
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\n"
            "content-type: application/json\r\ncontent-length: 400\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"model": "m", "messages": [{"role": "us')
        sock.shutdown(socket.SHUT_WR)
        sock.recv(4096)
    gateway.revoke(SAMPLE)
    # Whatever the server made of the half body, the listener lives on and serves the next request.
    token2 = gateway.issue_token("ispm-002.e1")
    ok = httpx.post(
        f"{url}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {token2}"},
        timeout=5,
    )
    assert ok.status_code == 200
    assert [c.outcome for c in calls_of(gateway, "ispm-002.e1")] == ["ok"]


def test_past_the_cap_calls_keep_their_figures_and_the_sample_goes_on(fake: FakeProvider) -> None:
    with Gateway("openai/gpt-scripted-1", settings=SETTINGS, transcript_limit_bytes=1500) as gateway:
        host, port = gateway.listen_tcp()
        token = gateway.issue_token(SAMPLE)
        history: list[dict[str, str]] = []
        for turn in range(6):
            history.append({"role": "user", "content": f"question {turn} " + "x" * 400})
            reply = httpx.post(
                f"http://{host}:{port}/v1/chat/completions",
                json={"model": "m", "messages": history},
                headers={"authorization": f"Bearer {token}"},
                timeout=5,
            )
            assert reply.status_code == 200
        events = transcript_of(gateway)[1]

    cap = events[-1]
    assert isinstance(cap, CapReachedEvent) and cap.limit_bytes == 1500
    calls = [e for e in events if isinstance(e, ModelCall)]
    assert len(calls) == 6 and all(c.outcome == "ok" for c in calls)
    omitted = [c for c in calls if c.content_omitted]
    assert cap.calls_omitted == len(omitted) >= 1 and cap.bytes_omitted > 0
    assert all(c.response is not None and c.response.blocks == [] and c.usage is not None for c in omitted)


def test_a_reasoning_stream_keeps_its_thinking(claude: tuple[Gateway, str], fake: FakeProvider) -> None:
    gateway, url = claude
    events = [
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "claude-x", "usage": {}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Check MFA."}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Done."}},
        ),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    sse = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    fake.push(Reply(body=sse, headers={"content-type": "text/event-stream"}))
    token = gateway.issue_token(SAMPLE)
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers={"x-api-key": token}, timeout=5) as reply:
        reply.read()

    [call] = calls_of(gateway)
    assert call.response is not None
    assert call.response.blocks == [ReasoningBlock(text="Check MFA.", signature="sig"), TextBlock(text="Done.")]
    assert (call.response.id, call.returned_model, call.response.stop_reason) == ("msg_1", "claude-x", "end_turn")
    assert call.usage is not None and (call.usage.input_tokens, call.usage.output_tokens) == (0, 9)


def test_a_capture_whose_transcripts_are_never_taken_keeps_only_the_latest() -> None:
    capture = Capture()
    try:
        for n in range(MAX_UNTAKEN + 1):
            capture.open(f"t.e{n}")
        assert capture.take("t.e0") is None
        assert capture.take(f"t.e{MAX_UNTAKEN}") is not None
    finally:
        capture.close()


def test_flush_waits_until_every_call_is_in_and_the_writers_cpu_is_counted() -> None:
    capture = Capture()
    try:
        capture.open(SAMPLE)
        history = [{"role": "user", "content": f"message {n}"} for n in range(100_000)]  # tenths of a second to store
        before = capture.writer_cpu_s()
        request = Body(encoding="json", content={"model": "m", "messages": history}, size=0)
        capture.submit(
            SAMPLE,
            ModelCall(api="messages", provider_api="messages", requested_model="m", stream=False, latency_s=0.1,
                      status=200, outcome="ok", request=request),
        )  # fmt: skip

        assert not capture.flush(timeout=0.001)
        assert capture.flush(timeout=30)
        builder = capture.take(SAMPLE, timeout=0)  # no waiting here: flush did
        assert builder is not None and builder.calls == 1
        assert capture.writer_cpu_s() - before > 0.01
    finally:
        capture.close()


def test_a_judges_failed_call_is_kept_under_its_slot_with_the_status_and_no_key(fake: FakeProvider) -> None:
    fake.push(Reply(status=503, body={"error": {"message": f"overloaded, key {OPENAI_KEY}"}}))
    client, _ = client_for("openai/judge-x", ClientSettings(max_attempts=1))
    judge = LLMJudge("openai/judge-x", client=client, max_attempts=1)
    judge.capture, judge.slot = JudgeCapture(), "judge_b"
    votes = judge.judge(make_item())
    assert {v.grade for v in votes} == {"abstain"}

    builder = judge.capture.take(SampleKey(task_id="ispm-042", epoch=2))
    assert builder is not None
    data = builder.encode("run-1", SampleKey(task_id="ispm-042", epoch=2))
    assert OPENAI_KEY not in gzip.decompress(data).decode()
    [call] = [e for e in resolve(read_stored(data, "test"), "test") if isinstance(e, ModelCall)]
    assert (call.caller, call.judge, call.api, call.provider_api) == ("judge_b", "openai/judge-x", "chat", "chat")
    assert (call.outcome, call.status, call.response) == ("provider_error", 503, None)
    assert "503" in (call.error or "") and REDACTED in (call.error or "")
    assert "# Rubrics" in call.request.content["messages"][0]["content"]


def test_a_request_nested_deeper_than_the_store_encodes_is_kept_as_its_text(
    gpt: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = gpt
    token = gateway.issue_token(SAMPLE)
    deep = "[" * 300 + "]" * 300
    raw = '{"model": "m", "messages": [{"role": "user", "content": "hi", "extra": ' + deep + "}]}"
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    assert httpx.post(f"{url}/v1/chat/completions", content=raw, headers=headers, timeout=5).status_code == 200

    [call] = calls_of(gateway)
    assert (call.outcome, call.request.encoding) == ("ok", "text")
    assert call.request.note == "nested too deeply for the store: kept as its JSON text"
    assert json.loads(call.request.content) == json.loads(raw)


def _message_start(message_id: str) -> dict[str, object]:
    return {"type": "message_start", "message": {"id": message_id, "model": "claude-x", "usage": {"input_tokens": 5}}}


TEXT_START: dict[str, object] = {
    "type": "content_block_start",
    "index": 0,
    "content_block": {"type": "text", "text": ""},
}


def _text_delta(text: str) -> dict[str, object]:
    return {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}


def _framed(*events: dict[str, object]) -> str:
    """Events framed as the Messages API streams them."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def _stream_one(gateway: Gateway, url: str) -> str:
    """One streamed Messages call of the sample, as the agent reads it."""
    token = gateway.issue_token(SAMPLE)
    body = {"model": "m", "max_tokens": 10, "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.stream("POST", f"{url}/v1/messages", json=body, headers={"x-api-key": token}, timeout=5) as reply:
        return reply.read().decode()


def test_a_stream_cut_mid_event_keeps_the_whole_events_before_the_cut(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    whole = _framed(_message_start("msg_cut"), TEXT_START, _text_delta("Half of it"))
    fake.push(Reply(body=whole + 'event: content_block_delta\ndata: {"type": "content_block_de', headers=SSE))
    _stream_one(gateway, url)

    [call] = calls_of(gateway)
    assert call.outcome == "stream_cut" and call.cut is not None and call.cut.events_received == 3
    assert call.response is not None and call.response.blocks == [TextBlock(text="Half of it")]
    assert (call.response.id, call.response.complete) == ("msg_cut", False)


def test_an_event_of_an_odd_shape_is_relayed_and_read_as_far_as_it_makes_sense(
    claude: tuple[Gateway, str], fake: FakeProvider
) -> None:
    gateway, url = claude
    odd: dict[str, object] = {"type": "content_block_delta", "index": [0], "delta": {"type": "input_json_delta"}}
    end: dict[str, object] = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}
    stop: dict[str, object] = {"type": "message_stop"}
    fake.push(
        Reply(
            body=_framed(_message_start("msg_odd"), TEXT_START, odd, _text_delta("still here"), end, stop), headers=SSE
        )
    )
    relayed = _stream_one(gateway, url)

    assert "still here" in relayed and "event: message_stop" in relayed  # the agent got all of it
    [call] = calls_of(gateway)
    assert (call.status, call.outcome, call.request.encoding) == (200, "ok", "json")
    assert call.response is not None and call.response.blocks == [TextBlock(text="still here")]


def test_a_stream_the_gateway_cannot_read_is_cut_saying_so_and_booked_as_cut(
    claude: tuple[Gateway, str], fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway, url = claude
    read = MessagesReader.feed

    def broken(self: MessagesReader, event: str, data: dict[str, object]) -> bool:
        if self.events == 2:
            raise KeyError("a bug")
        return read(self, event, data)

    monkeypatch.setattr(MessagesReader, "feed", broken)
    end: dict[str, object] = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}
    fake.push(Reply(body=_framed(_message_start("m"), TEXT_START, _text_delta("a"), end), headers=SSE))
    relayed = _stream_one(gateway, url)

    assert "event: error" in relayed and "the gateway could not read the provider's stream: KeyError" in relayed
    [call] = calls_of(gateway)
    assert (call.outcome, call.cut is not None and call.cut.by) == ("stream_cut", "provider")
    assert gateway.usage(SAMPLE).errors[0].kind == "stream"


def test_a_stream_past_the_events_read_for_its_transcript_is_relayed_whole_and_kept_as_far_as_read(
    claude: tuple[Gateway, str], fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway, url = claude
    monkeypatch.setattr("runner.gateway.protocols.reply.MAX_EVENTS", 4)  # message_start, block start, two deltas
    fake.push(Turn(text="one two three four five six"))
    relayed = _stream_one(gateway, url)

    assert "six" in relayed and "event: message_stop" in relayed  # the agent got all of it
    [call] = calls_of(gateway)
    assert call.outcome == "ok" and call.response is not None  # its end was read, past the bound
    assert call.usage is not None and call.usage.output_tokens > 0
    assert not call.response.complete and call.response.stream_events > 4
    [block] = call.response.blocks
    assert isinstance(block, TextBlock) and "six" not in block.text and block.text.startswith("one")


def test_an_image_resent_every_turn_is_kept_as_sent_and_stored_once(gpt: tuple[Gateway, str]) -> None:
    gateway, url = gpt
    token = gateway.issue_token(SAMPLE)
    png = base64.b64encode(random.Random(1).randbytes(30_000)).decode()  # incompressible, as an image is
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png}}
    history: list[dict[str, object]] = [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]}]
    for turn in range(3):
        reply = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "m", "messages": history},
            headers={"authorization": f"Bearer {token}"},
            timeout=5,
        )
        assert reply.status_code == 200
        history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"and now {turn}?"}]
    data, events = transcript_of(gateway)

    calls = [e for e in events if isinstance(e, ModelCall)]
    assert [c.request.content["messages"][0]["content"][1] for c in calls] == [image] * 3
    assert len(data) < 2 * len(gzip.compress(json.dumps(image).encode()))  # once, not three times


def test_an_openai_sdk_responses_stream_is_assembled(gpt: tuple[Gateway, str], fake: FakeProvider) -> None:
    gateway, url = gpt
    fake.push(Turn(text="Two admins.", tool_calls=[ToolCall("run_sql", {"sql": "SELECT 1"}, id="call_1")]))
    token = gateway.issue_token(SAMPLE)
    client = openai.OpenAI(api_key=token, base_url=url + "/v1", max_retries=0)
    with client.responses.create(model="gpt-x", input="Who is admin?", stream=True) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.completed"

    [call] = calls_of(gateway)
    assert (call.api, call.provider_api, call.outcome) == ("responses", "responses", "ok")
    assert call.request.content["input"] == "Who is admin?"
    assert call.response is not None and call.response.complete
    assert call.response.blocks == [
        TextBlock(text="Two admins."),
        ToolCallBlock(id="call_1", name="run_sql", arguments='{"sql": "SELECT 1"}', input={"sql": "SELECT 1"}),
    ]
    assert call.usage is not None and call.usage.output_tokens == 7


def test_an_openai_sdk_chat_stream_with_tool_calls_is_assembled(gpt: tuple[Gateway, str], fake: FakeProvider) -> None:
    gateway, url = gpt
    fake.push(Turn(text="Looking.", tool_calls=[ToolCall("run_sql", {"sql": "SELECT 2"}, id="call_2")]))
    token = gateway.issue_token(SAMPLE)
    client = openai.OpenAI(api_key=token, base_url=url + "/v1", max_retries=0)
    chunks = list(
        client.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "Look."}], stream=True)
    )
    assert chunks[-1].choices[0].finish_reason == "tool_calls"

    [call] = calls_of(gateway)
    assert call.response is not None and call.response.stop_reason == "tool_calls"
    assert call.response.blocks == [
        TextBlock(text="Looking."),
        ToolCallBlock(id="call_2", name="run_sql", arguments='{"sql": "SELECT 2"}', input={"sql": "SELECT 2"}),
    ]
    assert call.usage is not None  # asked of the provider by the gateway, though the agent did not
