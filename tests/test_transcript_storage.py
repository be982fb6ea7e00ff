"""The transcript store: content kept once, conversations linear, a cap that counts, and reading back checked."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.call import Body, ModelCall, Reply, TextBlock
from runner.sample_key import SampleKey
from runner.transcript.model import TRANSCRIPT_VERSION, CapReachedEvent
from runner.transcript.storage import StoredCall, StoredList, TranscriptBuilder, TranscriptError, read_stored, resolve

KEY = SampleKey(task_id="ispm-001", epoch=1)


def _turn(seq: int, history: list[dict[str, object]]) -> ModelCall:
    body = {"model": "m", "system": "you are an analyst " * 50, "messages": list(history), "stream": True}
    return ModelCall(
        seq=seq,
        caller="candidate",
        api="messages",
        provider_api="messages",
        requested_model="m",
        stream=True,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        latency_s=0.1,
        request=Body(encoding="json", content=body, size=len(json.dumps(body))),
        response=Reply(blocks=[TextBlock(text=f"reply {seq} " * 40)]),
        status=200,
        outcome="ok",
    )


def _conversation(turns: int, limit: int = 1 << 30) -> tuple[TranscriptBuilder, list[ModelCall]]:
    builder = TranscriptBuilder("candidate", limit_bytes=limit)
    history: list[dict[str, object]] = []
    events = []
    for seq in range(turns):
        history.append({"role": "user", "content": f"question {seq} " * 40})
        event = _turn(seq, history)
        builder.add(event)
        events.append(event)
        history.append({"role": "assistant", "content": f"reply {seq} " * 40})
    return builder, events


def test_a_stored_conversation_reads_back_as_every_request_and_response_in_full() -> None:
    builder, events = _conversation(12)
    stored = read_stored(builder.encode("run-1", KEY), "here")
    assert resolve(stored, "here") == events


def test_a_conversation_of_twice_the_turns_stores_about_twice_the_bytes() -> None:
    small = len(_conversation(50)[0].encode("run-1", KEY))
    large = len(_conversation(100)[0].encode("run-1", KEY))
    assert large < 2.3 * small  # quadratic growth would give ~4x


def test_past_the_cap_calls_keep_their_figures_and_the_rest_is_counted() -> None:
    builder, events = _conversation(30, limit=20_000)
    resolved = resolve(read_stored(builder.encode("run-1", KEY), "here"), "here")
    cap = resolved[-1]
    assert isinstance(cap, CapReachedEvent)
    calls = [e for e in resolved if isinstance(e, ModelCall)]
    assert len(calls) == 30
    omitted = [c for c in calls if c.content_omitted]
    assert cap.calls_omitted == len(omitted) > 0 and cap.bytes_omitted > 0
    assert all(c.request.encoding == "omitted" and c.status == 200 for c in omitted)
    assert calls[0].request == events[0].request


def test_writing_a_part_twice_replaces_it_and_journals_its_sha256(tmp_path: Path) -> None:
    builder, _ = _conversation(3)
    first = builder.write(tmp_path, "run-1", KEY)
    second = builder.write(tmp_path, "run-1", KEY)
    assert first == second
    assert sorted(p.name for p in (tmp_path / "transcripts").iterdir()) == ["ispm-001.e1.candidate.json.gz"]


def test_a_reference_to_a_missing_blob_is_named() -> None:
    builder, _ = _conversation(2)
    raw = json.loads(gzip.decompress(builder.encode("run-1", KEY)))
    raw["blobs"] = raw["blobs"][:1]
    with pytest.raises(TranscriptError, match="a reference to blob"):
        resolve(read_stored(gzip.compress(json.dumps(raw).encode()), "here"), "here")


def test_a_file_that_inflates_past_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runner.transcript.storage.MAX_FILE_BYTES", 1000)
    with pytest.raises(TranscriptError, match="inflates past the 1000-byte limit"):
        read_stored(gzip.compress(b" " * 5000), "here")


def test_a_file_of_a_newer_format_version_is_refused() -> None:
    builder, _ = _conversation(1)
    raw = json.loads(gzip.decompress(builder.encode("run-1", KEY)))
    raw["version"] = TRANSCRIPT_VERSION + 1
    with pytest.raises(TranscriptError, match=f"format version {TRANSCRIPT_VERSION + 1}, newer than this ispm reads"):
        read_stored(gzip.compress(json.dumps(raw).encode()), "here")


# (what the case is, the messages of each call in turn, how many of the last call's messages come from the one before)
HISTORIES: tuple[tuple[str, list[list[object]], int], ...] = (
    ("the whole history resent, two added", [["q1"], ["q1", "r1", "q2"]], 1),
    ("an earlier message edited", [["q1", "r1"], ["q1", "R1", "q2"]], 1),
    ("a number resent as a boolean", [[1, "q1"], [True, "q1", "q2"]], 0),
    ("a float resent as an integer", [[1.0, "q1"], [1, "q1"]], 0),
    ("the history cut short", [["q1", "r1", "q2"], ["q1", "r1"]], 2),
    ("an unrelated history", [["q1", "r1"], ["x", "y"]], 0),
    ("a message object resent", [[{"role": "user", "content": "q"}], [{"role": "user", "content": "q"}, "a"]], 1),
)


@pytest.mark.parametrize(("histories", "kept"), [case[1:] for case in HISTORIES], ids=[case[0] for case in HISTORIES])
def test_each_request_reads_back_as_sent_and_its_history_is_kept_once(histories: list[list[object]], kept: int) -> None:
    builder = TranscriptBuilder("candidate")
    events = []
    for seq, messages in enumerate(histories):
        event = _turn(seq, [])
        body = {**event.request.content, "messages": messages}
        event = event.model_copy(update={"request": Body(encoding="json", content=body, size=1)})
        builder.add(event)
        events.append(event)
    stored = read_stored(builder.encode("run-1", KEY), "here")
    resolved = resolve(stored, "here")
    assert [json.dumps(e.request.content) for e in resolved] == [json.dumps(e.request.content) for e in events]
    last = stored.events[-1]
    assert isinstance(last, StoredCall) and last.request.fields is not None
    listed = last.request.fields["messages"]
    assert isinstance(listed, StoredList) and listed.keep == kept


def test_a_field_resent_with_the_same_value_of_another_type_reads_back_as_sent() -> None:
    builder = TranscriptBuilder("candidate")
    events = []
    for seq, value in enumerate([1, 1.0, True, True, None, None, "1", 1]):
        event = _turn(seq, [])
        body = {**event.request.content, "temperature": value}
        event = event.model_copy(update={"request": Body(encoding="json", content=body, size=1)})
        builder.add(event)
        events.append(event)
    resolved = resolve(read_stored(builder.encode("run-1", KEY), "here"), "here")
    assert [json.dumps(e.request.content) for e in resolved] == [json.dumps(e.request.content) for e in events]
