"""Each wire API's reader: its bounds, and that nothing a provider sends makes it raise.

Text, arguments and reasoning are kept up to ``max_chars`` in all, the rest counted: each case is a stream in one API,
the bound, and what is kept (the blocks' text and the characters dropped). Past ``max_events`` a stream's content is
no longer read but its figures are. And any JSON at all, as a body or as a stream's events, is read without an
exception (the relay would have to cut the stream).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.call import CallApi, TextBlock, ToolCallBlock, Usage
from runner.gateway.protocols import reader_for
from runner.gateway.protocols.messages import MessagesReader
from runner.gateway.protocols.reply import Reader


def _chat(*pieces: str) -> list[tuple[str, dict[str, Any]]]:
    first = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    deltas = [
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": p}}], "usage": None} for p in pieces
    ]
    end = {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return [("", first), *[("", d) for d in deltas], ("", end)]


def _messages(*pieces: str, tool: bool = False) -> list[tuple[str, dict[str, Any]]]:
    block = {"type": "tool_use", "id": "t1", "name": "run_sql", "input": {}} if tool else {"type": "text", "text": ""}
    kind = "input_json_delta" if tool else "text_delta"
    field = "partial_json" if tool else "text"
    return [
        ("message_start", {"type": "message_start", "message": {"id": "m1", "model": "m", "usage": {}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        *[
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": kind, field: p}})
            for p in pieces
        ],
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}),
    ]


def _gemini(*pieces: str) -> list[tuple[str, dict[str, Any]]]:
    def event(parts: list[dict[str, Any]], finish: str | None = None) -> tuple[str, dict[str, Any]]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        return ("", {"candidates": [candidate | ({"finishReason": finish} if finish else {})], "modelVersion": "m"})

    return [*[event([{"text": p}]) for p in pieces], event([{"text": ""}], "STOP")]


# (what the case is, the API, its events, max_chars, the text kept, characters dropped)
BOUNDS: tuple[tuple[str, CallApi, list[tuple[str, dict[str, Any]]], int, str, int], ...] = (
    ("chat under the bound", "chat", _chat("abc", "def"), 100, "abcdef", 0),
    ("chat at the bound", "chat", _chat("abc", "de"), 5, "abcde", 0),
    ("chat past the bound mid-piece", "chat", _chat("abc", "def", "gh"), 5, "abcde", 3),
    ("messages past the bound", "messages", _messages("abc", "def"), 4, "abcd", 2),
    ("messages with nothing left", "messages", _messages("abc", "def"), 0, "", 6),
    ("tool arguments past the bound", "messages", _messages('{"sql": ', '"SELECT 1"}', tool=True), 8, '{"sql": ', 11),
    ("gemini past the bound", "gemini", _gemini("abc", "def"), 4, "abcd", 2),
)


@pytest.mark.parametrize(
    ("api", "events", "max_chars", "kept", "dropped"), [c[1:] for c in BOUNDS], ids=[c[0] for c in BOUNDS]
)
def test_a_stream_keeps_up_to_its_bound_and_counts_the_rest(
    api: CallApi, events: list[tuple[str, dict[str, Any]]], max_chars: int, kept: str, dropped: int
) -> None:
    reader = reader_for(api, max_chars=max_chars)
    for name, data in events:
        reader.feed(name, data)
    reply = reader.reply(complete=True)
    texts = [
        b.text if isinstance(b, TextBlock) else b.arguments
        for b in reply.blocks
        if isinstance(b, TextBlock | ToolCallBlock)
    ]
    assert ("".join(texts), reply.dropped_chars, reply.stream_events) == (kept, dropped, len(events))


def test_past_its_bound_on_events_a_stream_is_counted_and_its_figures_still_read() -> None:
    reader = MessagesReader(max_events=3)  # the start, the block's start and its first piece
    for name, data in _messages("abc", "def", "ghi"):
        reader.feed(name, data)
    reader.feed("message_delta", {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 7}})
    reader.feed("message_stop", {"type": "message_stop"})
    reply = reader.reply(complete=reader.finished)
    assert reader.finished and reader.usage == Usage(output_tokens=7)
    assert (reply.complete, reply.stream_events, reply.blocks, reply.stop_reason) == (
        False,
        8,
        [TextBlock(text="abc")],
        "end_turn",
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=24,
)
KEYS = (
    *("type", "index", "delta", "choices", "usage", "model", "message", "content_block", "response", "item", "error"),
    *("candidates", "usageMetadata", "promptFeedback", "modelVersion"),
)
EVENT = st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), JSON, max_size=6)
NAMES = st.sampled_from(
    [
        "",
        "message",
        "message_start",
        "content_block_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
        "error",
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.completed",
        "response.failed",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    api=st.sampled_from(["chat", "messages", "responses", "gemini", "count_tokens"]),
    events=st.lists(st.tuples(NAMES, EVENT)),
)
def test_no_stream_of_json_objects_makes_a_reader_raise(
    api: CallApi, events: list[tuple[str, dict[str, object]]]
) -> None:
    reader: Reader = reader_for(api)
    for name, data in events:
        reader.feed(name, data)
    reader.reply(complete=reader.finished)
    assert reader.events == len(events) and (reader.usage is None or reader.usage.input_tokens >= 0)


@settings(max_examples=150, deadline=None)
@given(api=st.sampled_from(["chat", "messages", "responses", "gemini", "count_tokens"]), body=EVENT)
def test_no_json_body_makes_a_reader_raise(api: CallApi, body: dict[str, object]) -> None:
    reader = reader_for(api)
    reader.read_body(body)
    assert reader.reply(complete=True).stream_events == 0
