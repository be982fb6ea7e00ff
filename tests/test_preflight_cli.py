"""``ispm preflight`` through the real CLI against a scripted provider on loopback."""

from __future__ import annotations

import json
import socket
import uuid

import pytest
from click.testing import CliRunner
from fake_provider import ANTHROPIC_MODEL, OPENAI_MODEL, FakeProvider, Reply, fake_provider, point_clients_at

from runner.cli import main

__all__ = ["fake_provider"]  # the imported fixture is used by name

KEY = f"sk-preflight-marker-{uuid.uuid4().hex}"


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY)


def closed_port() -> int:
    # Bound then closed: nothing listens there, so a connection is refused at once.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_preflight_prints_each_returned_model_id(provider_env: FakeProvider) -> None:
    # The judges' dry run has its own tests (test_breakers.py); this one is about the probes.
    args = ["preflight", "--no-dry-run", "--candidate", "openai/gpt-4.1", "--judge", "anthropic/claude-sonnet-4-6"]
    result = CliRunner().invoke(main, [*args, "--judge", "openai/gpt-4.1-mini"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("candidate") and "openai/gpt-4.1" in lines[0] and OPENAI_MODEL in lines[0]
    assert lines[1].startswith("judge") and "anthropic/claude-sonnet-4-6" in lines[1] and ANTHROPIC_MODEL in lines[1]
    assert lines[2].startswith("judge") and "openai/gpt-4.1-mini" in lines[2]
    # One minimal request per alias, each with the host's key.
    assert [s.path for s in provider_env.seen] == ["/v1/chat/completions", "/v1/messages", "/v1/chat/completions"]
    assert [s.body["model"] for s in provider_env.seen] == ["gpt-4.1", "claude-sonnet-4-6", "gpt-4.1-mini"]
    assert KEY not in result.output


def test_preflight_json(provider_env: FakeProvider) -> None:
    args = ["preflight", "--no-dry-run", "--candidate", "openai/gpt-4.1", "--judge", "anthropic/claude-sonnet-4-6"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert [(m["role"], m["alias"], m["returned_model"]) for m in payload] == [
        ("candidate", "openai/gpt-4.1", OPENAI_MODEL),
        ("judge", "anthropic/claude-sonnet-4-6", ANTHROPIC_MODEL),
    ]
    assert payload[0]["base_url"] == provider_env.openai_base and payload[0]["requested_model"] == "gpt-4.1"
    assert KEY not in result.output


def test_a_missing_key_names_its_variable_and_spends_no_request(
    provider_env: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = CliRunner().invoke(
        main, ["preflight", "--candidate", "openai/gpt-4.1", "--judge", "anthropic/claude-sonnet-4-6"]
    )
    assert result.exit_code == 1
    assert "ANTHROPIC_API_KEY" in result.output and "missing" in result.output
    assert provider_env.seen == []


def test_an_unknown_alias_is_refused(provider_env: FakeProvider) -> None:
    result = CliRunner().invoke(main, ["preflight", "--candidate", "openai/gpt-4.1", "--judge", "mistral/large"])
    assert result.exit_code == 1
    assert "unknown model reference 'mistral/large'" in result.output
    assert provider_env.seen == []


def test_an_unreachable_endpoint_is_named(provider_env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    result = CliRunner().invoke(
        main, ["preflight", "--candidate", "openai/gpt-4.1", "--judge", "anthropic/claude-sonnet-4-6"]
    )
    assert result.exit_code == 1
    assert "anthropic/claude-sonnet-4-6: cannot reach http://127.0.0.1:" in result.output
    assert "openai/gpt-4.1" not in result.output  # the reachable candidate is not reported as a problem
    assert KEY not in result.output


def test_a_rejected_key_names_its_variable(provider_env: FakeProvider) -> None:
    provider_env.push(Reply(401, {"error": {"message": "bad key"}}))
    result = CliRunner().invoke(main, ["preflight", "--candidate", "openai/gpt-4.1"])
    assert result.exit_code == 1
    assert "rejected the key in OPENAI_API_KEY (HTTP 401)" in result.output


def test_the_candidate_is_required() -> None:
    result = CliRunner().invoke(main, ["preflight", "--judge", "openai/gpt-4.1"])
    assert result.exit_code == 2
    assert "--candidate" in result.output
