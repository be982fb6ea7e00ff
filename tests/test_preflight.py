"""Preflight against a real loopback provider: each model probed once, static problems first, endpoint failures
explained, and no key in what it records or says."""

from __future__ import annotations

import socket
from dataclasses import dataclass

import pytest
from fake_provider import ANTHROPIC_MODEL, FakeProvider, Reply, fake_provider, openai_completion
from provider_stage import KEY, env, provider

from runner.gateway.model import ClientSettings
from runner.gateway.preflight import PreflightError, ResolvedModel, preflight

__all__ = ["env", "fake_provider"]  # the imported fixtures are used by name


@dataclass(frozen=True)
class Preflight:
    """A preflight of an OpenAI model (twice) and an Anthropic one."""

    resolved: list[ResolvedModel]
    """What it resolved, one per entry."""
    requests: int
    """The requests the provider received."""
    anthropic_base: str
    """The fake's Anthropic base URL."""


@pytest.fixture(scope="module")
def preflight_run() -> Preflight:
    with provider(Reply(body=openai_completion(model="gpt-4.1-2025-04-14"))) as fake:  # anthropic: the canned reply
        resolved = preflight(["openai/gpt-4.1", "anthropic/claude-sonnet-4-6", "openai/gpt-4.1"])
        return Preflight(resolved, len(fake.seen), fake.anthropic_base)


def test_preflight_records_returned_ids(preflight_run: Preflight) -> None:
    assert [(r.alias, r.requested_model, r.returned_model) for r in preflight_run.resolved] == [
        ("openai/gpt-4.1", "gpt-4.1", "gpt-4.1-2025-04-14"),
        ("anthropic/claude-sonnet-4-6", "claude-sonnet-4-6", ANTHROPIC_MODEL),
        ("openai/gpt-4.1", "gpt-4.1", "gpt-4.1-2025-04-14"),
    ]


def test_preflight_probes_a_model_named_twice_once(preflight_run: Preflight) -> None:
    assert preflight_run.requests == 2


def test_preflight_records_each_models_base_url(preflight_run: Preflight) -> None:
    assert preflight_run.resolved[1].base_url == preflight_run.anthropic_base


def test_preflight_records_no_key(preflight_run: Preflight) -> None:
    assert KEY not in "".join(r.model_dump_json() for r in preflight_run.resolved)


def static_problems(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(PreflightError) as info:
        preflight(["openai/gpt-4.1", "anthropic/claude-sonnet-4-6", "gemini/pro"])
    return info.value.problems


def test_preflight_names_a_missing_key_then_an_unknown_provider(
    env: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    problems = static_problems(monkeypatch)
    assert [("ANTHROPIC_API_KEY" in problems[0]), ("'gemini/pro'" in problems[1]), len(problems)] == [True, True, 2]


def test_preflight_spends_nothing_before_the_configuration_is_whole(
    env: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    static_problems(monkeypatch)
    assert env.seen == []


def endpoint_failures(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> PreflightError:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{s.getsockname()[1]}")
    env.push(Reply(401, {"error": f"bad key {KEY}"}))
    with pytest.raises(PreflightError) as info:
        preflight(["openai/gpt-4.1", "anthropic/claude-sonnet-4-6"], ClientSettings(max_attempts=1))
    return info.value


def test_preflight_says_which_key_was_rejected(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "rejected the key in OPENAI_API_KEY" in endpoint_failures(env, monkeypatch).problems[0]


def test_preflight_says_which_endpoint_is_unreachable(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "cannot reach http://127.0.0.1:" in endpoint_failures(env, monkeypatch).problems[1]


def test_preflight_failures_hide_the_key(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    assert KEY not in str(endpoint_failures(env, monkeypatch))
