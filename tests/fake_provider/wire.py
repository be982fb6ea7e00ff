"""What every protocol renderer shares: the answer being rendered, the events of a stream, and how text and
arguments are cut into deltas."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .script import Turn


@dataclass(frozen=True)
class Answering:
    """The request being answered, as the renderers need it."""

    number: int
    """The request's number on this fake (1, 2, …): makes ids unique and predictable."""
    model: str
    """The model the answer names."""
    request: dict[str, Any]
    """The request's JSON body."""
    created: int
    """Unix time the answer says it was created."""


@dataclass(frozen=True)
class Event:
    """One server-sent event, as written."""

    name: str | None
    """The ``event:`` field; None for chat completions, which send ``data:`` lines only."""
    data: str
    """The ``data:`` field: compact JSON, or ``[DONE]``."""
    wire_usage: dict[str, Any] | None = None
    """The usage the wire has stated once this event is out (cumulative), if this event states any."""

    def encode(self) -> bytes:
        """The event's bytes on the wire."""
        head = f"event: {self.name}\n" if self.name is not None else ""
        return f"{head}data: {self.data}\n\n".encode()


@dataclass(frozen=True)
class Rendered:
    """A turn as one protocol puts it: either a JSON body or a stream of events."""

    model: str
    """The model the answer names."""
    body: dict[str, Any] | None = None
    """The non-streamed body."""
    wire_usage: dict[str, Any] | None = None
    """The non-streamed body's usage object."""
    events: list[Event] | None = None
    """The stream, final events included."""


def dump(model: Any) -> dict[str, Any]:
    """An SDK model as the API sends it: the fields that were set (explicit nulls included), by their wire names."""
    data: dict[str, Any] = model.to_dict(mode="json", exclude_unset=True, use_api_names=True)
    return data


def compact(value: Any) -> str:
    """JSON as the providers stream it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def text_pieces(text: str) -> list[str]:
    """Text cut as a model streams it: word by word, each word with the spaces before it."""
    return re.findall(r"\s*\S+|\s+$", text) if text else []


def argument_pieces(arguments: str, size: int = 7) -> list[str]:
    """JSON arguments cut into fragments of ``size`` characters, as they stream (never mid-token for a reader)."""
    return [arguments[i : i + size] for i in range(0, len(arguments), size)]


def arguments_json(turn: Turn) -> list[str]:
    """Each tool call's arguments as the OpenAI wires carry them (a JSON string)."""
    return [json.dumps(call.arguments) for call in turn.tool_calls]
