"""A scripted fake provider for the provider clients' test modules: the key and settings they share, the ``env``
fixture (both clients' variables pointing at the fake), and :func:`provider` for module-scoped scenes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fake_provider import FakeProvider, Scripted, openai_completion, point_clients_at

from runner.gateway.model import ClientSettings
from runner.gateway.providers import ProviderError

KEY = "sk-test-MARKER-7f3a9c1e5b"
FAST = ClientSettings(read_timeout=2.0, max_attempts=3)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    """The ``fake_provider`` fixture, with both clients' variables pointing at it."""
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY + "-anthropic")


@contextmanager
def provider(*script: Scripted) -> Iterator[FakeProvider]:
    """A fresh fake provider answering ``script``, with both clients' variables pointing at it for the block (for
    module-scoped scenes, outside any one test)."""
    with pytest.MonkeyPatch.context() as patch, FakeProvider() as fake:
        point_clients_at(patch, fake, KEY, KEY + "-anthropic")
        fake.push(*script)
        yield fake


def chat(content: str = "hi") -> dict[str, Any]:
    """A chat-completions request body asking ``content``."""
    return {"model": "ignored", "messages": [{"role": "user", "content": content}]}


def completion_body(prompt: int = 11, completion: int = 7, cached: int = 0) -> dict[str, Any]:
    """A chat completion reporting this usage."""
    return openai_completion(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


def failure(call: Callable[[], object]) -> ProviderError:
    """The :class:`ProviderError` ``call`` raises."""
    with pytest.raises(ProviderError) as info:
        call()
    return info.value
