"""Pytest glue: the ``fake_provider`` fixture, client environment, and a stand-in for ``time.sleep``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import FakeProvider


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A running :class:`FakeProvider`, closed after the test."""
    with FakeProvider() as fake:
        yield fake


def point_clients_at(
    monkeypatch: pytest.MonkeyPatch, fake: FakeProvider, openai_key: str, anthropic_key: str
) -> FakeProvider:
    """Set the providers' usual variables so that both clients reach ``fake`` with these keys; returns ``fake``."""
    monkeypatch.setenv("OPENAI_API_KEY", openai_key)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base)
    monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base)
    return fake


class Sleeps(list[float]):
    """Stands in for time.sleep between provider retries: records the waits and returns at once."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
