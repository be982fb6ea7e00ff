"""Which reader reads a reply of each wire API: one per API, each in that API's own module."""

from __future__ import annotations

from runner.call import CallApi
from runner.gateway.protocols.chat import ChatReader
from runner.gateway.protocols.gemini import GeminiReader
from runner.gateway.protocols.messages import MessagesReader
from runner.gateway.protocols.reply import Reader
from runner.gateway.protocols.responses import ResponsesReader

READERS: dict[CallApi, type[Reader]] = {
    "chat": ChatReader,
    "messages": MessagesReader,
    "count_tokens": MessagesReader,  # the answer of Messages' token counting, which holds no reply
    "responses": ResponsesReader,
    "gemini": GeminiReader,
}
"""The reader of each API; a new API adds its reader here."""


def reader_for(api: CallApi, *, max_chars: int | None = None) -> Reader:
    """A fresh reader of one ``api`` reply (``max_chars``: the bound on its text, the default when ``None``)."""
    return READERS[api]() if max_chars is None else READERS[api](max_chars=max_chars)
