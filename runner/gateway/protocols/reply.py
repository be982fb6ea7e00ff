"""Reading a provider's reply, in any wire API: what every API's reader shares.

One :class:`Reader` per call reads the reply once, whether it came as one body (:meth:`Reader.read_body`) or as a
stream's events (:meth:`Reader.feed`, each event as the gateway relays it), and gives both what it cost and what it
said: the figures (:attr:`~Reader.usage`, :attr:`~Reader.returned_model`, whether the stream reached its end, an
in-stream error) and the reply put together (:meth:`Reader.reply`). Each API's module (``chat``, ``messages``,
``responses``) subclasses it; :func:`runner.gateway.protocols.readers.reader_for` picks one.

Text, tool-call arguments and reasoning are kept up to ``max_chars`` characters in all, the rest counted in
``dropped_chars``; past ``max_events`` events a stream's content is no longer read (its figures still are), so a
provider streaming without end costs bounded memory. A reader never raises on a body or event of the wrong shape: it
reads what it can.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import pydantic_core

from runner.call import CallApi, OtherBlock, ReasoningBlock, Reply, ResponseBlock, TextBlock, ToolCallBlock, Usage
from runner.gateway.protocols.api import bounded

DEFAULT_MAX_CHARS = 8 * 1024 * 1024
"""Characters of one reply's text, arguments and reasoning kept, in all."""
MAX_EVENTS = 500_000
"""Events of one stream whose content is read; later ones are counted, and the reply is marked incomplete (a stream
without end: the bound on text keeps memory in check before that, this one bounds the blocks)."""


def text_of(value: Any) -> str:
    """``value`` when it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def object_of(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def list_of(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else ``[]``."""
    return value if isinstance(value, list) else []


def count_of(value: Any) -> int:
    """``value`` when it is an integer (a token count), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def kind_of(event: str, data: dict[str, Any]) -> str:
    """A stream event's kind: its SSE name, or its ``type`` when it has none (or SSE's default, ``message``)."""
    return event if event and event != "message" else text_of(data.get("type"))


def key_of(value: Any) -> Any:
    """A block's index as a dictionary key: an integer or string as sent, anything else one shared key."""
    return value if isinstance(value, int | str) or value is None else "?"


def json_text(value: Any) -> str:
    """``value`` as JSON text; ``""`` when it cannot be written (nested deeper than the encoder goes)."""
    try:
        return json.dumps(value)
    except (ValueError, RecursionError):
        return ""


def error_text(error: Any) -> str:
    """``type: message`` (or ``code: message``) of an error object, bounded."""
    if isinstance(error, dict):
        message = str(error.get("message") or "")
        # A Responses `error` event's type is just "error"; its code says more.
        label = error.get("type") if error.get("type") not in (None, "", "error") else error.get("code")
        text = f"{label}: {message}" if label and message else message or str(label or error)
    else:
        text = str(error)
    return bounded(text)


def _parsed(arguments: str) -> Any:
    """The arguments parsed, or ``None``: not JSON, or nested deeper than the store encodes (the text stays)."""
    try:
        value = json.loads(arguments) if arguments else None
        pydantic_core.to_json(value)
    except (ValueError, RecursionError):
        return None
    return value


class Block:
    """A block being put together."""

    __slots__ = ("id", "kind", "name", "parts", "raw", "redacted", "signature")

    def __init__(self, kind: str, *, id: Any = None, name: str = "", raw: Any = None) -> None:
        self.kind, self.id, self.name, self.raw = kind, id if isinstance(id, str) else None, name, raw
        self.parts: list[str] = []
        self.signature: str | None = None
        self.redacted = False

    def done(self) -> ResponseBlock:
        """The block as the reply holds it."""
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text)
        if self.kind == "tool_call":
            return ToolCallBlock(id=self.id, name=self.name, arguments=text, input=_parsed(text))
        if self.kind == "reasoning":
            return ReasoningBlock(text=text, redacted=self.redacted, signature=self.signature)
        return OtherBlock(provider_type=self.name or "unknown", raw=self.raw)


class Reader(ABC):
    """Reads one reply of one wire API: its figures and its content. Feed a stream's events in order, or one body.

    Attributes:
        events: stream events fed so far.
        finished: the stream's terminal event was seen (each API says which); a stream cut before it leaves False.
        error: the text of an in-stream error (bounded), or None.
        returned_model: the model id the provider reported, or None.
    """

    api: ClassVar[CallApi]
    """The API this reader reads."""

    def __init__(self, *, max_chars: int = DEFAULT_MAX_CHARS, max_events: int | None = None) -> None:
        """Keep at most ``max_chars`` characters of content, and read the content of ``max_events`` events
        (:data:`MAX_EVENTS` when ``None``)."""
        self.max_chars = max_chars
        self.max_events = MAX_EVENTS if max_events is None else max_events
        self.kept = 0
        self.dropped = 0
        self.events = 0
        self.finished = False
        self.error: str | None = None
        self.returned_model: str | None = None
        self.id: str | None = None
        self.stop_reason: str | None = None
        self.blocks: dict[Any, Block] = {}  # by the provider's index, in the order they began
        self._usage: dict[str, Any] | None = None  # the API's usage object, as last stated: read once, when asked

    # -- what each API reads -------------------------------------------------------------------------------------

    @abstractmethod
    def feed(self, event: str, data: dict[str, Any]) -> bool:
        """Take one stream event: its SSE name (``""`` or ``"message"`` when none) and its JSON. True when it carried
        output (a text, tool-call or reasoning piece: what time to first token waits for)."""

    @abstractmethod
    def read_body(self, body: dict[str, Any]) -> None:
        """Take a whole non-streamed reply."""

    @abstractmethod
    def read_usage(self, usage: dict[str, Any]) -> Usage:
        """The API's usage object as a :class:`~runner.call.Usage`."""

    # -- what they share -----------------------------------------------------------------------------------------

    @property
    def usage(self) -> Usage | None:
        """The tokens the provider reported so far (for a stream, the best known: a cut stream's are what arrived
        before the cut); ``None`` when it reported none."""
        return None if self._usage is None else self.read_usage(self._usage)

    def reply(self, *, complete: bool) -> Reply:
        """What arrived, as one message; ``complete`` says whether it arrived whole (a stream read past
        ``max_events`` never did: its later content was not read)."""
        return Reply(
            id=self.id,
            blocks=[b.done() for b in self.blocks.values()],
            stop_reason=self.stop_reason,
            complete=complete and self.events <= self.max_events,
            stream_events=self.events,
            dropped_chars=self.dropped,
        )

    def _note_model(self, model: Any) -> None:
        if isinstance(model, str) and model:
            self.returned_model = model

    def _block(self, key: Any, kind: str, **fields: Any) -> Block:
        found = self.blocks.get(key)
        if found is None:
            found = self.blocks[key] = Block(kind, **fields)
        return found

    def _add(self, block: Block, text: Any) -> None:
        """Keep ``text`` in ``block`` as far as the bound allows; count the rest."""
        piece = text_of(text)
        room = self.max_chars - self.kept
        if len(piece) > room:
            self.dropped += len(piece) - max(room, 0)
            piece = piece[: max(room, 0)]
        self.kept += len(piece)
        if piece:
            block.parts.append(piece)

    def _text(self, block: Block, piece: Any) -> None:
        """:meth:`_add` for the one case of nearly every event, a text piece with room for it: one call, not three."""
        if type(piece) is str and len(piece) <= self.max_chars - self.kept:
            self.kept += len(piece)
            block.parts.append(piece)
        else:
            self._add(block, piece)
