"""The stream assembler's bound: text, arguments and reasoning are kept up to ``max_chars`` in all, the rest counted.

Each case is a stream in one API, the bound, and what is kept: the blocks' text and the characters dropped.
"""

from __future__ import annotations

from typing import Any

import pytest

from runner.trace.assemble import StreamAssembler
from runner.trace.model import CallApi, TextBlock, ToolCallBlock


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


# (what the case is, the API, its events, max_chars, the text kept, characters dropped)
BOUNDS: tuple[tuple[str, CallApi, list[tuple[str, dict[str, Any]]], int, str, int], ...] = (
    ("chat under the bound", "chat", _chat("abc", "def"), 100, "abcdef", 0),
    ("chat at the bound", "chat", _chat("abc", "de"), 5, "abcde", 0),
    ("chat past the bound mid-piece", "chat", _chat("abc", "def", "gh"), 5, "abcde", 3),
    ("messages past the bound", "messages", _messages("abc", "def"), 4, "abcd", 2),
    ("messages with nothing left", "messages", _messages("abc", "def"), 0, "", 6),
    ("tool arguments past the bound", "messages", _messages('{"sql": ', '"SELECT 1"}', tool=True), 8, '{"sql": ', 11),
)


@pytest.mark.parametrize(
    ("api", "events", "max_chars", "kept", "dropped"), [c[1:] for c in BOUNDS], ids=[c[0] for c in BOUNDS]
)
def test_a_stream_keeps_up_to_its_bound_and_counts_the_rest(
    api: CallApi, events: list[tuple[str, dict[str, Any]]], max_chars: int, kept: str, dropped: int
) -> None:
    assembler = StreamAssembler(api, max_chars=max_chars)
    for name, data in events:
        assembler.feed(name, data)
    reply = assembler.result(complete=True)
    texts = [
        b.text if isinstance(b, TextBlock) else b.arguments
        for b in reply.blocks
        if isinstance(b, TextBlock | ToolCallBlock)
    ]
    assert ("".join(texts), reply.dropped_chars, reply.stream_events) == (kept, dropped, len(events))
