"""The names every translation module shares: which API a body speaks, stream events and their translators, and
the translation error."""

from __future__ import annotations

from typing import Any, Protocol

from runner.call import Api
from runner.errors import GatewayError

__all__ = ["Api", "Body", "StreamEvent", "StreamTranslator", "TranslationError", "bounded", "listed"]

Body = dict[str, Any]
"""A JSON object: a request, a reply, or one stream event's data."""

StreamEvent = tuple[str, Body]
"""One server-sent event: its name (``""`` for chat completions, whose events have none) and its JSON data."""


class StreamTranslator(Protocol):
    """Turns one API's stream events into another's, one event at a time."""

    def feed(self, event: str, data: Body) -> list[StreamEvent]:
        """The target API's events for one source event (often none)."""
        ...

    def close(self) -> list[StreamEvent]:
        """The target API's closing events once the source stream ended (none when already closed)."""
        ...


#: Longest error text kept from an in-stream error event.
ERROR_TEXT_LIMIT = 500


class TranslationError(GatewayError):
    """A request uses something the target API cannot express (the agent's fault: HTTP 400).

    The message names the construct, e.g. ``tools[0]: web_search tools are not supported``.
    """


def listed(value: Any, field: str) -> list[Any]:
    """``value``, which the request's ``field`` holds, checked to be a list.

    Raises:
        TranslationError: it is not.
    """
    if not isinstance(value, list):
        raise TranslationError(f"{field} must be a list")
    return value


def bounded(text: str, limit: int = ERROR_TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
