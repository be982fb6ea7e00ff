"""A key shorter than a secret can be (``OPENAI_API_KEY=fake`` for a local server) never rewrites text that is not
a secret (issue 31): it is replaced only where it stands whole, so a model id that contains it stays as the provider
sent it, in preflight, in the gateway's figures and in what the agent receives. A long key is still replaced
wherever it occurs."""

from __future__ import annotations

import httpx
import pytest
from fake_provider import FakeProvider, Reply, fake_provider, openai_completion, point_clients_at

from runner.gateway.preflight import preflight
from runner.gateway.providers import PROVIDERS, Endpoint
from runner.gateway.server import Gateway
from runner.transcript.redact import redact_json, redact_raw, redact_text

__all__ = ["fake_provider"]  # the imported fixture is used by name
SHORT = "fake"
MODEL = "fake-model-resolved-2026-12-01"
LONG = "sk-live-0123456789abcdef"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (MODEL, MODEL),
        ("openai/fake", "openai/fake"),
        ("fake.v2 and fake_2 and unfaked", "fake.v2 and fake_2 and unfaked"),
        ("Authorization: Bearer fake", "Authorization: Bearer [REDACTED]"),
        ("Incorrect API key provided: fake.", "Incorrect API key provided: [REDACTED]."),
        ('{"api_key": "fake", "model": "fake-model-resolved-2026-12-01"}',
         '{"api_key": "[REDACTED]", "model": "fake-model-resolved-2026-12-01"}'),
    ],
)  # fmt: skip
def test_a_short_key_is_replaced_only_where_it_stands_whole(text: str, kept: str) -> None:
    assert redact_text(text, (SHORT,)) == kept
    assert redact_raw(text.encode(), (SHORT,)) == kept.encode()


def test_a_long_key_is_replaced_wherever_it_occurs() -> None:
    assert redact_text(f"x{LONG}-model {LONG}", (LONG,)) == "x[REDACTED]-model [REDACTED]"
    assert redact_raw(f"x{LONG}y".encode(), (LONG,)) == b"x[REDACTED]y"
    sent = {"model": f"m-{LONG}", "id": MODEL, "key": SHORT}
    assert redact_json(sent, (LONG, SHORT)) == {"model": "m-[REDACTED]", "id": MODEL, "key": "[REDACTED]"}


def test_the_endpoint_keeps_a_model_id_that_holds_its_short_key() -> None:
    endpoint = Endpoint(PROVIDERS["openai"], {"OPENAI_API_KEY": SHORT, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    body = f'{{"model": "{MODEL}", "note": "key fake"}}'
    assert endpoint.redact(body) == f'{{"model": "{MODEL}", "note": "key [REDACTED]"}}'
    assert endpoint.redact_bytes(body.encode()) == endpoint.redact(body).encode()


@pytest.fixture
def short_keyed(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, SHORT, SHORT)


def test_preflight_prints_the_model_id_the_provider_sent(short_keyed: FakeProvider) -> None:
    short_keyed.push(Reply(body=openai_completion(model=MODEL)))
    (resolved,) = preflight(["openai/fake-model"])
    assert (resolved.requested_model, resolved.returned_model) == ("fake-model", MODEL)


def test_the_gateway_passes_and_records_the_model_id_unchanged(short_keyed: FakeProvider) -> None:
    short_keyed.push(Reply(body=openai_completion(model=MODEL)))
    with Gateway("openai/fake-model") as gateway:
        token = gateway.issue_token("ispm-001.e1")
        host, port = gateway.listen_tcp()
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
        reply = httpx.post(
            f"http://{host}:{port}/v1/chat/completions", json=body, headers={"authorization": f"Bearer {token}"}
        )
        usage = gateway.usage("ispm-001.e1")
    assert reply.status_code == 200 and reply.json()["model"] == MODEL
    assert [c.returned_model for c in usage.calls] == [MODEL]
