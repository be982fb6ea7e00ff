"""The names every translation module shares: which API a body speaks, and the translation error."""

from __future__ import annotations

from typing import Literal

from runner.errors import GatewayError

Api = Literal["chat", "messages", "responses"]
"""An HTTP API for LLM calls: OpenAI Chat Completions, Anthropic Messages, or OpenAI Responses."""

#: Longest error text kept from an in-stream error event.
ERROR_TEXT_LIMIT = 500


class TranslationError(GatewayError):
    """A request uses something the target API cannot express (the agent's fault: HTTP 400).

    The message names the construct, e.g. ``tools[0]: web_search tools are not supported``.
    """


def bounded(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
