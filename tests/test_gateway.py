"""The gateway over real sockets: exact accounting, tokens, caps, faults, Unix sockets, key hygiene.

Where several claims are about one exchange, a module-scoped fixture plays it once and each claim is its own test.
HTTP framing on a raw socket is in test_gateway_http.py, what an agent may not make the provider do in
test_gateway_policy.py.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from fake_provider import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    FakeProvider,
    Reply,
    Seen,
    anthropic_message,
    fake_provider,
    point_clients_at,
)
from fake_provider import openai_completion as completion
from gateway_stage import CHAT, KEY, SETTINGS, logged, post, staged

from runner.errors import GatewayError
from runner.gateway.model import ClientSettings
from runner.gateway.server import Caps, Gateway, SampleUsage

__all__ = ["fake_provider"]  # the imported fixture is used by name


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY)


@pytest.fixture
def gateway(provider_env: FakeProvider, sleeps: list[float]) -> Iterator[Gateway]:
    with Gateway("openai/gpt-4.1", settings=SETTINGS, sleep=sleeps.append) as gw:
        yield gw


@pytest.fixture
def http(gateway: Gateway) -> Iterator[httpx.Client]:
    host, port = gateway.listen_tcp()
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as client:
        yield client


# --- accounting --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Accounting:
    """Four requests of one sample and one of another, each with its own usage."""

    statuses: list[int]
    """The status of every reply, the first sample's four first."""
    usage: SampleUsage
    """The first sample's usage, revoked."""
    other: SampleUsage
    """The second sample's usage."""
    asked_models: set[str]
    """Every model the provider was asked for."""


@pytest.fixture(scope="module")
def accounting() -> Accounting:
    usages = [(1234, 56, 1000), (2048, 512, 0), (7, 1, 7)]
    script = [Reply(body=completion(prompt_tokens=i, completion_tokens=o, cached_tokens=c)) for i, o, c in usages]
    with staged("openai/gpt-4.1", *script, Reply(body=completion(model="gpt-fake-2026-02-02"))) as stage:
        token = stage.gateway.issue_token("t1/e0")
        other = stage.gateway.issue_token("t2/e0")
        statuses = [post(stage.http, token).status_code for _ in range(4)] + [post(stage.http, other).status_code]
        usage = stage.gateway.revoke("t1/e0")
        return Accounting(statuses, usage, stage.gateway.usage("t2/e0"), {s.body["model"] for s in stage.fake.seen})


def test_every_request_of_the_accounting_is_answered(accounting: Accounting) -> None:
    assert accounting.statuses == [200] * 5


def test_a_sample_counts_its_own_requests(accounting: Accounting) -> None:
    assert accounting.usage.requests == 4


def test_a_sample_counts_the_input_tokens_exactly(accounting: Accounting) -> None:
    assert accounting.usage.tokens.input_tokens == 1234 + 2048 + 7 + 11


def test_a_sample_counts_the_output_tokens_exactly(accounting: Accounting) -> None:
    assert accounting.usage.tokens.output_tokens == 56 + 512 + 1 + 7


def test_a_sample_counts_the_cached_tokens_exactly(accounting: Accounting) -> None:
    assert accounting.usage.tokens.cached_tokens == 1007


def test_a_sample_lists_every_model_that_served_it_once(accounting: Accounting) -> None:
    assert accounting.usage.model_ids == [OPENAI_MODEL, "gpt-fake-2026-02-02"]


def test_a_sample_measures_its_latency(accounting: Accounting) -> None:
    assert accounting.usage.latency_s > 0


def test_a_sample_of_good_replies_records_no_error(accounting: Accounting) -> None:
    assert accounting.usage.errors == []


def test_a_sample_of_good_replies_records_no_refusal(accounting: Accounting) -> None:
    assert accounting.usage.refused == 0


def test_another_samples_requests_are_its_own(accounting: Accounting) -> None:
    assert accounting.other.requests == 1


def test_the_agent_does_not_choose_the_model(accounting: Accounting) -> None:
    assert accounting.asked_models == {"gpt-4.1"}


# --- a passed-through reply --------------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object"}}}]
TOOL_REPLY = completion(
    "SELECT is fine", tool_calls=[{"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": "{}"}}]
)


@pytest.fixture(scope="module")
def passed_through() -> tuple[httpx.Response, Seen]:
    """The agent's reply to a chat request with tools, and the request the provider received."""
    with staged("openai/gpt-4.1", Reply(body=TOOL_REPLY)) as stage:
        reply = post(stage.http, stage.gateway.issue_token("s"), {**CHAT, "tools": TOOLS, "tool_choice": "auto"})
        return reply, stage.fake.seen[-1]


def test_response_is_the_providers_bytes(passed_through: tuple[httpx.Response, Seen]) -> None:
    assert passed_through[0].json() == TOOL_REPLY


def test_the_agents_tools_reach_the_provider_as_sent(passed_through: tuple[httpx.Response, Seen]) -> None:
    assert passed_through[1].body["tools"] == TOOLS


def test_the_agents_tool_choice_reaches_the_provider_as_sent(passed_through: tuple[httpx.Response, Seen]) -> None:
    assert passed_through[1].body["tool_choice"] == "auto"


# --- tokens ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenCheck:
    """Tokens presented inside sample B's socket, then on the shared listener before and after A's revoke."""

    b_side: list[int]
    """Statuses inside B's socket: A's token, B's, a made-up one, none, B's without ``Bearer``."""
    requests_after_b_side: tuple[int, int]
    """A's and B's request counts after that."""
    shared_before_revoke: int
    """Status of A's token on the shared listener."""
    after_revoke: httpx.Response
    """The reply to A's token once revoked."""
    a_requests: int
    """A's request count at the end."""
    refusal_reasons: list[Any]
    """The ``reason`` of every ``token_refused`` log event, in order."""
    log_text: str
    """Every log record, as text."""
    tokens: tuple[str, str]
    """A's and B's tokens."""


@pytest.fixture(scope="module")
def token_check(tmp_path_factory: pytest.TempPathFactory) -> TokenCheck:
    with logged() as records, staged() as stage:
        gw = stage.gateway
        token_a, token_b = gw.issue_token("A"), gw.issue_token("B")
        sock_b = gw.listen_unix(tmp_path_factory.mktemp("tokens") / "b.sock", sample_id="B")
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock_b)), base_url="http://gateway") as b_side:
            statuses = [post(b_side, token).status_code for token in (token_a, token_b, "made-up-token", None)]
            no_bearer = b_side.post("/v1/chat/completions", json=CHAT, headers={"authorization": token_b})
        requests_after_b_side = (gw.usage("A").requests, gw.usage("B").requests)
        shared = post(stage.http, token_a).status_code
        gw.revoke("A")
        after_revoke = post(stage.http, token_a)
        a_requests = gw.usage("A").requests
    events = [r.msg for r in records if isinstance(r.msg, dict) and r.msg.get("event") == "token_refused"]
    log_text = "\n".join(repr(r.msg) + r.getMessage() for r in records)
    return TokenCheck(
        b_side=[*statuses, no_bearer.status_code],
        requests_after_b_side=requests_after_b_side,
        shared_before_revoke=shared,
        after_revoke=after_revoke,
        a_requests=a_requests,
        refusal_reasons=[event.get("reason") for event in events],
        log_text=log_text,
        tokens=(token_a, token_b),
    )


def test_only_the_samples_own_bearer_token_passes_its_socket(token_check: TokenCheck) -> None:
    assert token_check.b_side == [401, 200, 401, 401, 401]  # A's token in B's container is foreign


def test_a_foreign_token_costs_neither_sample_a_request(token_check: TokenCheck) -> None:
    assert token_check.requests_after_b_side == (0, 1)


def test_a_token_passes_the_shared_listener(token_check: TokenCheck) -> None:
    assert token_check.shared_before_revoke == 200


def test_a_revoked_token_gets_401(token_check: TokenCheck) -> None:
    assert token_check.after_revoke.status_code == 401


def test_a_revoked_token_gets_an_authentication_error(token_check: TokenCheck) -> None:
    assert token_check.after_revoke.json()["error"]["type"] == "authentication_error"


def test_a_revoked_tokens_request_is_not_counted(token_check: TokenCheck) -> None:
    assert token_check.a_requests == 1


def test_every_refused_token_is_logged_with_its_reason(token_check: TokenCheck) -> None:
    assert token_check.refusal_reasons == ["foreign", "unknown", "missing", "missing", "revoked"]


def test_no_token_is_logged(token_check: TokenCheck) -> None:
    assert [token for token in token_check.tokens if token in token_check.log_text] == []


def test_a_samples_socket_is_a_socket_while_its_token_lives(gateway: Gateway, tmp_path: Path) -> None:
    gateway.issue_token("S")
    assert gateway.listen_unix(tmp_path / "s.sock", sample_id="S").is_socket()


def test_revoke_closes_the_samples_socket(gateway: Gateway, tmp_path: Path) -> None:
    gateway.issue_token("S")
    sock = gateway.listen_unix(tmp_path / "s.sock", sample_id="S")
    gateway.revoke("S")
    assert not sock.exists()


def test_revoke_twice_gives_the_same_usage(gateway: Gateway) -> None:
    gateway.issue_token("S")
    assert gateway.revoke("S") == gateway.revoke("S")


def test_one_live_token_per_sample(gateway: Gateway) -> None:
    gateway.issue_token("S")
    with pytest.raises(GatewayError, match="live"):
        gateway.issue_token("S")


def test_a_rerun_of_a_revoked_sample_starts_fresh(gateway: Gateway) -> None:
    gateway.issue_token("S")
    gateway.revoke("S")
    gateway.issue_token("S")
    assert gateway.usage("S").requests == 0


# --- the Unix socket ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnixSocketVisit:
    """A client of a gateway's Unix socket: health, three requests on one connection, the model listing."""

    mode: int
    """The socket file's permission bits."""
    health: Any
    """The ``/healthz`` reply."""
    models: list[str]
    """The ``model`` of each of the three chat replies."""
    listing: Any
    """``/v1/models`` with the token."""
    listing_without_token: int
    """The status of ``/v1/models`` without it."""
    requests: int
    """The sample's request count after."""


@pytest.fixture(scope="module")
def unix_socket(tmp_path_factory: pytest.TempPathFactory) -> UnixSocketVisit:
    with staged() as stage:
        path = stage.gateway.listen_unix(tmp_path_factory.mktemp("uds") / "gw.sock")
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://gateway") as client:
            health = client.get("/healthz").json()
            token = stage.gateway.issue_token("u")
            models = [post(client, token).json()["model"] for _ in range(3)]  # keep-alive: one connection
            listing = client.get("/v1/models", headers={"authorization": f"Bearer {token}"}).json()
            without = client.get("/v1/models").status_code
        return UnixSocketVisit(
            path.stat().st_mode & 0o777, health, models, listing, without, stage.gateway.usage("u").requests
        )


def test_the_unix_socket_is_open_to_the_containers_user(unix_socket: UnixSocketVisit) -> None:
    assert unix_socket.mode == 0o666


def test_the_unix_socket_answers_health(unix_socket: UnixSocketVisit) -> None:
    assert unix_socket.health == {"ok": True}


def test_the_unix_socket_serves_every_request_of_a_kept_alive_connection(unix_socket: UnixSocketVisit) -> None:
    assert unix_socket.models == [OPENAI_MODEL] * 3


def test_the_unix_socket_lists_the_candidate_as_the_model(unix_socket: UnixSocketVisit) -> None:
    assert unix_socket.listing["data"][0]["id"] == "gpt-4.1"


def test_the_model_list_needs_a_token(unix_socket: UnixSocketVisit) -> None:
    assert unix_socket.listing_without_token == 401


def test_the_unix_socket_counts_its_requests(unix_socket: UnixSocketVisit) -> None:
    assert unix_socket.requests == 3


def test_a_unix_socket_path_too_long_is_refused(gateway: Gateway, tmp_path: Path) -> None:
    with pytest.raises(GatewayError, match="Unix socket"):
        gateway.listen_unix(tmp_path / ("x" * 120) / "gw.sock")


def test_the_process_start_up_objects_are_frozen_out_of_the_collector(gateway: Gateway) -> None:
    assert gc.get_freeze_count() > 10_000


def test_what_the_process_held_at_start_is_out_of_the_collectors_walk(gateway: Gateway) -> None:
    # A full collection over the runner's start-up objects stalls every stream; frozen, they are never walked.
    walked = gc.get_objects()
    assert not any(o is Gateway or o is httpx.AsyncClient for o in walked)


def test_loopback_only(gateway: Gateway) -> None:
    with pytest.raises(GatewayError, match="loopback"):
        gateway.listen_tcp("0.0.0.0")


# --- caps --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capped:
    """A sample against a request cap of two: two answered requests and a third refused."""

    answered: list[int]
    """The two first statuses."""
    refused: httpx.Response
    """The third reply."""
    counts: tuple[int, int, int]
    """The sample's requests and refusals, and the requests the provider received."""


@pytest.fixture(scope="module")
def request_cap() -> Capped:
    with staged(caps=Caps(max_requests=2)) as stage:
        token = stage.gateway.issue_token("c")
        answered = [post(stage.http, token).status_code for _ in range(2)]
        refused = post(stage.http, token)
        usage = stage.gateway.usage("c")
        return Capped(answered, refused, (usage.requests, usage.refused, len(stage.fake.seen)))


def test_requests_within_the_cap_are_answered(request_cap: Capped) -> None:
    assert request_cap.answered == [200, 200]


def test_a_request_over_the_cap_gets_a_429_not_to_retry(request_cap: Capped) -> None:
    assert (request_cap.refused.status_code, request_cap.refused.headers["x-should-retry"]) == (429, "false")


def test_a_request_over_the_cap_says_the_cap_was_exceeded(request_cap: Capped) -> None:
    assert request_cap.refused.json()["error"]["code"] == "ispm_cap_exceeded"


def test_a_request_over_the_cap_says_how_much_was_used(request_cap: Capped) -> None:
    assert "2 of 2" in request_cap.refused.json()["error"]["message"]


def test_a_request_over_the_cap_is_counted_as_refused_and_never_sent(request_cap: Capped) -> None:
    assert request_cap.counts == (2, 1, 2)


@pytest.fixture(scope="module")
def token_cap() -> tuple[list[int], SampleUsage]:
    with staged(caps=Caps(max_tokens=30)) as stage:
        token = stage.gateway.issue_token("c")
        codes = [post(stage.http, token).status_code for _ in range(3)]  # 18 tokens each: the second overshoots
        return codes, stage.gateway.usage("c")


def test_the_request_after_the_token_cap_is_overshot_is_refused(token_cap: tuple[list[int], SampleUsage]) -> None:
    # 403, not 429: the token limit is final for the sample, and no SDK retries a 403 (tests/test_limits.py).
    assert token_cap[0] == [200, 200, 403]


def test_the_tokens_of_the_overshooting_request_are_counted(token_cap: tuple[list[int], SampleUsage]) -> None:
    assert token_cap[1].tokens.input_tokens + token_cap[1].tokens.output_tokens == 36


# --- bad requests ------------------------------------------------------------------------------------------

#: Bodies the gateway refuses with a 400, and what the refusal says.
BAD_BODIES = [({"model": "x"}, "messages"), ({"messages": "x"}, "messages"), ([1], "JSON object")]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
def test_bad_requests_get_400_saying_why(gateway: Gateway, http: httpx.Client, body: Any, message: str) -> None:
    resp = post(http, gateway.issue_token("s"), body)
    assert (resp.status_code, message in resp.json()["error"]["message"]) == (400, True)


def test_a_body_that_is_not_json_gets_400_saying_so(gateway: Gateway, http: httpx.Client) -> None:
    token = gateway.issue_token("s")
    resp = http.post("/v1/chat/completions", content="not json", headers={"authorization": f"Bearer {token}"})
    assert (resp.status_code, "not JSON" in resp.json()["error"]["message"]) == (400, True)


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
def test_bad_requests_cost_nothing(gateway: Gateway, http: httpx.Client, body: Any, message: str) -> None:
    post(http, gateway.issue_token("s"), body)
    assert gateway.usage("s").requests == 0


# --- provider faults ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Faults:
    """One sample through a 429, a 500, a hang, malformed replies, a 400 and a 404, then a good reply."""

    replies: dict[str, httpx.Response]
    """Each fault's reply to the agent, by name."""
    sleeps: list[float]
    """The waits between retries."""
    usage: SampleUsage
    """The sample's usage after."""


@pytest.fixture(scope="module")
def faults() -> Faults:
    script: list[tuple[str, list[Reply]]] = [
        ("429", [Reply(429, {"error": "busy"}, headers={"Retry-After": "0.4"}), Reply(body=completion())]),
        ("500", [Reply(500, "oops"), Reply(body=completion())]),
        ("hang", [Reply(hang=True), Reply(hang=True)]),
        ("malformed", [Reply(malformed=True), Reply(malformed=True)]),
        ("400", [Reply(400, {"error": {"message": "context too long"}})]),
        ("404", [Reply(404, {"error": "no such model"})]),
        ("after", []),
    ]
    with staged() as stage:
        token = stage.gateway.issue_token("f")
        replies = {}
        for name, answers in script:
            stage.fake.push(*answers)
            replies[name] = post(stage.http, token)
        return Faults(replies, stage.sleeps, stage.gateway.usage("f"))


def test_a_429_is_retried_to_a_200(faults: Faults) -> None:
    assert faults.replies["429"].status_code == 200


def test_a_429_is_retried_after_its_retry_after(faults: Faults) -> None:
    assert faults.sleeps[0] == 0.4


def test_a_500_is_retried_to_a_200(faults: Faults) -> None:
    assert faults.replies["500"].status_code == 200


def test_a_provider_that_hangs_gives_a_504(faults: Faults) -> None:
    assert faults.replies["hang"].status_code == 504


def test_a_provider_that_hangs_is_tried_every_attempt(faults: Faults) -> None:
    assert faults.replies["hang"].json()["error"]["attempts"] == 2


def test_a_malformed_reply_gives_a_502(faults: Faults) -> None:
    assert faults.replies["malformed"].status_code == 502


def test_a_providers_400_reaches_the_agent_with_its_message(faults: Faults) -> None:
    bad = faults.replies["400"]
    assert (bad.status_code, "context too long" in bad.json()["error"]["message"]) == (400, True)


def test_a_providers_404_is_a_502_the_agent_did_not_pick_the_model(faults: Faults) -> None:
    assert faults.replies["404"].status_code == 502


def test_the_gateway_carries_on_after_provider_faults(faults: Faults) -> None:
    assert faults.replies["after"].status_code == 200


def test_every_final_provider_fault_is_recorded_with_its_attempts(faults: Faults) -> None:
    assert [(e.kind, e.status, e.attempts) for e in faults.usage.errors] == [
        ("timeout", None, 2),
        ("malformed", 200, 2),
        ("http_status", 400, 1),
        ("http_status", 404, 1),
    ]


def test_every_request_through_faults_is_counted(faults: Faults) -> None:
    assert faults.usage.requests == 7


def test_only_the_answered_requests_tokens_are_counted(faults: Faults) -> None:
    assert faults.usage.tokens.input_tokens == 3 * 11


@pytest.fixture(scope="module")
def unreachable() -> tuple[httpx.Response, list[float], SampleUsage]:
    """A chat request through a gateway whose provider's port has nothing listening."""
    with socket.socket() as closed:  # a port that was bound and released: nothing listens there
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    sleeps: list[float] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", KEY)
        patch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
        with Gateway("openai/gpt-4.1", settings=SETTINGS, sleep=sleeps.append) as gw:
            host, port = gw.listen_tcp()
            with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as http:
                resp = post(http, gw.issue_token("u"))
            return resp, sleeps, gw.usage("u")


Unreachable = tuple[httpx.Response, list[float], SampleUsage]


def test_an_unreachable_provider_gives_a_502(unreachable: Unreachable) -> None:
    assert unreachable[0].status_code == 502


def test_an_unreachable_provider_is_retried_once(unreachable: Unreachable) -> None:
    assert len(unreachable[1]) == 1


def test_an_unreachable_provider_is_a_connection_error_not_a_timeout(unreachable: Unreachable) -> None:
    assert [(e.kind, e.attempts) for e in unreachable[2].errors] == [("connection", 2)]


def test_an_unreachable_providers_error_names_the_failed_connect(unreachable: Unreachable) -> None:
    assert "ClientConnectorError" in unreachable[2].errors[0].message


def test_key_never_leaves_the_host_side(
    gateway: Gateway,
    http: httpx.Client,
    provider_env: FakeProvider,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    token = gateway.issue_token("k")
    captured: list[str] = []
    provider_env.push(
        Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}),
        Reply(500, f"upstream trace: key={KEY}"),
        Reply(500, f"upstream trace: key={KEY}"),
        Reply(body={**completion(), "system_fingerprint": KEY}),
        Reply(malformed=True),
        Reply(malformed=True),
    )
    for _ in range(4):
        resp = post(http, token)
        captured += [resp.text, json.dumps(dict(resp.headers))]
    captured += [post(http, KEY).text]  # an agent presenting the real key gets nothing for it
    sock = gateway.listen_unix(tmp_path / "g.sock")
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://g") as client:
        captured += [client.get("/v1/chat/completions", headers={"authorization": f"Bearer {token}"}).text]
    usage = gateway.usage("k")
    captured += [usage.model_dump_json(), repr(gateway.upstream.endpoint), repr(usage), repr(gateway.upstream)]
    out, err = capfd.readouterr()
    captured += [caplog.text, out, err, *(repr(r.__dict__) for r in caplog.records)]
    # preconditions, so that no leak is not an empty look: the key was used, and the logs hold the failures
    assert any(seen.headers.get("authorization") == f"Bearer {KEY}" for seen in provider_env.seen)
    assert "token_refused" in caplog.text and "provider_failed" in caplog.text
    leaks = [text for text in captured if KEY in text]
    assert leaks == []


# --- a chat agent and an Anthropic candidate ---------------------------------------------------------------

LIST_TABLES = [
    {
        "type": "function",
        "function": {"name": "list_tables", "parameters": {"type": "object", "properties": {}}},
    }
]


@dataclass(frozen=True)
class RoundTrip:
    """Two chat steps translated to an Anthropic candidate: a tool call, then the answer after its result."""

    first: Any
    """The chat reply to the first step."""
    second: Any
    """The chat reply to the second."""
    sent: Any
    """The Messages request the provider received for the second step."""
    usage: SampleUsage
    """The sample's usage after both."""


@pytest.fixture(scope="module")
def round_trip() -> RoundTrip:
    tool_use = [{"type": "tool_use", "id": "toolu_9", "name": "list_tables", "input": {}}]
    script = [
        Reply(
            body=anthropic_message(tool_use, input_tokens=100, output_tokens=20, cache_read=50, stop_reason="tool_use")
        ),
        Reply(body=anthropic_message([{"type": "text", "text": "Done."}], input_tokens=200, output_tokens=10)),
    ]
    with staged("anthropic/claude-sonnet-4-6", *script) as stage:
        token = stage.gateway.issue_token("a")
        first = post(stage.http, token, {**CHAT, "tools": LIST_TABLES}).json()
        result = {"role": "tool", "tool_call_id": "toolu_9", "content": "okta_users"}
        history = [*CHAT["messages"], first["choices"][0]["message"], result]
        second = post(stage.http, token, {**CHAT, "messages": history, "tools": LIST_TABLES}).json()
        return RoundTrip(first, second, stage.fake.seen[-1].body, stage.gateway.usage("a"))


def test_a_tool_use_reply_finishes_with_tool_calls(round_trip: RoundTrip) -> None:
    assert round_trip.first["choices"][0]["finish_reason"] == "tool_calls"


def test_a_tool_use_reply_without_text_has_null_content(round_trip: RoundTrip) -> None:
    assert round_trip.first["choices"][0]["message"]["content"] is None


def test_a_tool_use_without_input_becomes_a_call_with_empty_arguments(round_trip: RoundTrip) -> None:
    assert round_trip.first["choices"][0]["message"]["tool_calls"][0]["function"] == {
        "name": "list_tables",
        "arguments": "{}",
    }


def test_a_translated_reply_names_the_model_that_served_it(round_trip: RoundTrip) -> None:
    assert round_trip.first["model"] == ANTHROPIC_MODEL


def test_a_translated_reply_counts_cache_reads_as_prompt_tokens(round_trip: RoundTrip) -> None:
    assert round_trip.first["usage"]["prompt_tokens"] == 150


def test_the_answer_after_a_tool_result_reaches_the_agent(round_trip: RoundTrip) -> None:
    assert round_trip.second["choices"][0]["message"]["content"] == "Done."


def test_the_anthropic_candidate_is_asked_by_its_own_name(round_trip: RoundTrip) -> None:
    assert round_trip.sent["model"] == "claude-sonnet-4-6"


def test_a_tool_message_reaches_anthropic_as_a_tool_result_in_a_user_turn(round_trip: RoundTrip) -> None:
    assert round_trip.sent["messages"][-1] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "okta_users"}],
    }


def test_a_translated_sample_counts_requests_and_tokens_exactly(round_trip: RoundTrip) -> None:
    usage = round_trip.usage
    tokens = usage.tokens
    assert (usage.requests, tokens.input_tokens, tokens.output_tokens, tokens.cached_tokens) == (2, 350, 30, 50)


def test_a_translated_sample_lists_the_model_that_served_it(round_trip: RoundTrip) -> None:
    assert round_trip.usage.model_ids == [ANTHROPIC_MODEL]


# --- a revoke while a request is with the provider ---------------------------------------------------------


@dataclass(frozen=True)
class LateRevoke:
    """A revoke at once while a request waits 0.2 s on the provider, then one that waits for it."""

    early: SampleUsage
    """The usage the first revoke gave."""
    final: SampleUsage
    """The usage the second gave."""
    answered: list[int]
    """The agent's status."""
    seen: int
    """The requests the provider received."""


@pytest.fixture(scope="module")
def late_revoke() -> LateRevoke:
    reply = Reply(body=completion(prompt_tokens=500, completion_tokens=50), delay=0.2)
    answered: list[int] = []
    with staged("openai/gpt-4.1", reply, settings=ClientSettings(read_timeout=10)) as stage:
        gw = stage.gateway
        token = gw.issue_token("late")
        agent = threading.Thread(target=lambda: answered.append(post(stage.http, token).status_code))
        agent.start()
        while gw.usage("late").in_flight == 0:  # wait until the request is with the provider
            time.sleep(0.005)
        early = gw.revoke("late", settle=0)
        final = gw.revoke("late")
        agent.join()
        return LateRevoke(early, final, answered, len(stage.fake.seen))


def test_a_revoke_at_once_shows_the_request_in_flight_and_not_yet_counted(late_revoke: LateRevoke) -> None:
    assert (late_revoke.early.in_flight, late_revoke.early.tokens.input_tokens) == (1, 0)


def test_a_second_revoke_waits_for_the_straggler_and_counts_it(late_revoke: LateRevoke) -> None:
    final = late_revoke.final
    assert (final.in_flight, final.requests, final.tokens.input_tokens, final.tokens.output_tokens) == (0, 1, 500, 50)


def test_a_request_forwarded_before_the_revoke_is_still_answered(late_revoke: LateRevoke) -> None:
    assert (late_revoke.answered, late_revoke.seen) == ([200], 1)


# --- internal errors ---------------------------------------------------------------------------------------


async def _bug(self: Any, request: Any, **kwargs: Any) -> Any:  # the request, key included, is in scope
    raise RuntimeError("a bug deep in the wire")


@pytest.fixture(scope="module")
def internal_error() -> tuple[httpx.Response, list[logging.LogRecord]]:
    """A chat request whose provider hop hits a bug, and the log records it left."""
    with logged() as records, pytest.MonkeyPatch.context() as patch, staged() as stage:
        patch.setattr(httpx.AsyncClient, "send", _bug)
        return post(stage.http, stage.gateway.issue_token("bug")), records


def test_an_internal_error_gives_the_agent_a_500(
    internal_error: tuple[httpx.Response, list[logging.LogRecord]],
) -> None:
    resp, _ = internal_error
    assert (resp.status_code, "internal_error" in resp.text) == (500, True)


def test_internal_error_tracebacks_never_show_the_key(
    internal_error: tuple[httpx.Response, list[logging.LogRecord]],
) -> None:
    records = [r for r in internal_error[1] if r.exc_info]
    assert records, "the internal error is logged with its traceback"  # precondition: something to look at
    rendered = io.StringIO()
    for record in records:  # as the console renders them (rich, every frame's locals), but untruncated
        assert record.exc_info is not None
        structlog.dev.RichTracebackFormatter(width=200, locals_max_string=10**6)(rendered, record.exc_info)
    text = rendered.getvalue()
    assert "upstream.py" in text and "a bug deep in the wire" in text  # precondition: the whole traceback
    assert KEY not in text
