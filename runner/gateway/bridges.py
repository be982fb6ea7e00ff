"""Which API the provider is spoken to in, and how requests, replies and streams cross between the two.

An agent speaks one of four APIs; a provider speaks chat completions or Messages, and some also Responses or
Gemini's own ``generateContent``.
When the two match, the request and its reply pass through untouched but for auth and the model name. When
they differ, a :class:`Bridge` from :data:`BRIDGES` translates, with chat completions as the pivot: Responses
and Gemini reach an Anthropic model through chat. The table is data, read top to bottom; the translations
themselves are the pure functions of :mod:`runner.gateway.protocols`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner.gateway.model import Api, ProviderSpec
from runner.gateway.protocols import chat_gemini, chat_messages, chat_responses
from runner.gateway.protocols.api import Body, StreamEvent, StreamTranslator

__all__ = ["BRIDGES", "Bridge", "StreamTranslator", "bridge_for", "native_api"]  # StreamTranslator: for the app


class _Chain:
    """Two translators in a row: the first's events feed the second."""

    def __init__(self, first: StreamTranslator, second: StreamTranslator) -> None:
        self._first, self._second = first, second

    def feed(self, event: str, data: Body) -> list[StreamEvent]:
        return [out for mid in self._first.feed(event, data) for out in self._second.feed(*mid)]

    def close(self) -> list[StreamEvent]:
        tail = [out for mid in self._first.close() for out in self._second.feed(*mid)]
        return tail + self._second.close()


def _wants_usage(request: Body) -> bool:
    options = request.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def _responses_to_messages_request(request: Body, model: str) -> Body:
    return chat_messages.chat_to_messages_request(chat_responses.responses_to_chat_request(request, model), model)


def _messages_to_responses_reply(reply: Body, request: Body) -> Body:
    return chat_responses.chat_to_responses_response(chat_messages.messages_to_chat_response(reply), request)


def _gemini_to_messages_request(request: Body, model: str) -> Body:
    return chat_messages.chat_to_messages_request(chat_gemini.gemini_to_chat_request(request, model), model)


def _messages_to_gemini_reply(reply: Body, request: Body) -> Body:
    return chat_gemini.chat_to_gemini_response(chat_messages.messages_to_chat_response(reply), request)


@dataclass(frozen=True)
class Bridge:
    """How an agent API reaches a provider API that differs from it."""

    agent: Api
    """The API the agent speaks."""
    provider: Api
    """The API the provider is spoken to in."""
    request: Callable[[Body, str], Body]
    """The agent's request body and the model name → the provider's request body."""
    reply: Callable[[Body, Body], Body]
    """The provider's reply body and the agent's request body → the agent's reply body."""
    stream: Callable[[Body, str], StreamTranslator]
    """The agent's request body and the model name → a translator for one stream."""


BRIDGES: tuple[Bridge, ...] = (
    Bridge(
        "chat",
        "messages",
        chat_messages.chat_to_messages_request,
        lambda reply, request: chat_messages.messages_to_chat_response(reply),
        lambda request, model: chat_messages.MessagesStreamToChat(_wants_usage(request)),
    ),
    Bridge(
        "messages",
        "chat",
        chat_messages.messages_to_chat_request,
        lambda reply, request: chat_messages.chat_to_messages_response(reply),
        lambda request, model: chat_messages.ChatStreamToMessages(model),
    ),
    Bridge(
        "responses",
        "chat",
        chat_responses.responses_to_chat_request,
        chat_responses.chat_to_responses_response,
        chat_responses.ChatStreamToResponses,
    ),
    Bridge(
        "responses",
        "messages",
        _responses_to_messages_request,
        _messages_to_responses_reply,
        lambda request, model: _Chain(
            chat_messages.MessagesStreamToChat(include_usage=True), chat_responses.ChatStreamToResponses(request, model)
        ),
    ),
    Bridge(
        "gemini",
        "chat",
        chat_gemini.gemini_to_chat_request,
        chat_gemini.chat_to_gemini_response,
        chat_gemini.ChatStreamToGemini,
    ),
    Bridge(
        "gemini",
        "messages",
        _gemini_to_messages_request,
        _messages_to_gemini_reply,
        lambda request, model: _Chain(
            chat_messages.MessagesStreamToChat(include_usage=True), chat_gemini.ChatStreamToGemini(request, model)
        ),
    ),
)


def native_api(agent: Api, spec: ProviderSpec) -> Api:
    """The API the provider is spoken to in for an agent speaking ``agent``."""
    if agent == spec.wire or (agent == "responses" and spec.responses) or (agent == "gemini" and spec.gemini):
        return agent
    return spec.wire


def bridge_for(agent: Api, spec: ProviderSpec) -> Bridge | None:
    """The bridge from ``agent`` to the provider, or None when the request passes through.

    Raises:
        LookupError: no bridge joins the two (the table has one for every pair of a four-API agent and a
            two-API provider; this guards a provider added with a new wire).
    """
    provider = native_api(agent, spec)
    if provider == agent:
        return None
    for bridge in BRIDGES:
        if (bridge.agent, bridge.provider) == (agent, provider):
            return bridge
    supported = ", ".join(f"{b.agent} → {b.provider}" for b in BRIDGES)
    raise LookupError(f"no translation from the {agent} API to {provider}; supported: same API, {supported}")
