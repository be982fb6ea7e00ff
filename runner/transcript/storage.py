"""How a transcript is stored: one gzip-compressed JSON file per sample and part, each piece of content once.

Agents resend their whole history on every turn, so a conversation of *n* turns sends O(n²) bytes. The store keeps
it linear:

- every distinct JSON value that fills a top-level field of a request (``model``, ``system``, ``tools``) and every
  element of a top-level list (each message of ``messages``, each item of ``input``) is a *blob*, kept once per file
  in ``blobs`` and referred to by its index;
- a top-level list is stored as "the first ``keep`` items of the same field of call ``base``, then ``add``", so a
  turn that appends two messages to the history costs two indexes, not the history again;
- responses and error bodies are blobs too.

A file is written whole, to a scratch name then renamed, once its sample's part is done (the candidate's when the
sample ends, the judges' when it is graded): a run killed mid-sample leaves no half file under the real name, and a
rerun of the sample replaces the file rather than adding to it.

**Cap.** Each part keeps at most ``limit_bytes`` of distinct content (its blobs as compact JSON). A call that would
pass it keeps its figures (timings, status, outcome, usage) but not its content, and one :class:`CapReachedEvent`
counts the calls and bytes left out. The sample does not fail.

Reading: :func:`read_part` reads one part through the :class:`TranscriptRef` its journal entry holds, checking its
sha256; :func:`read_stored` and :func:`resolve` parse a part's bytes and put its calls back together.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.call import Body, BodyEncoding, Caller, ModelCall, Reply
from runner.errors import IspmError
from runner.sample_key import SampleKey
from runner.transcript.model import TRANSCRIPT_VERSION, CapReachedEvent, TranscriptEvent, TranscriptRef

TRANSCRIPTS_DIR = "transcripts"
"""The folder beside the journal that holds a run's transcripts."""
DEFAULT_LIMIT_BYTES = 32 * 1024 * 1024
"""Distinct content kept per sample and part: well above a long Claude Code session (docs/trace.md)."""
MAX_FILE_BYTES = 256 * 1024 * 1024
"""A stored file larger than this, or one that inflates past it, is refused by the reader (a tampered file)."""

Part = Literal["candidate", "judges"]
"""A sample's transcript is stored in two parts: the agent's calls (when it ends) and the judges' (when graded)."""


class TranscriptError(IspmError):
    """A transcript is missing, damaged, or not what the journal says it is."""


class _Stored(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class StoredList(_Stored):
    """A top-level list field of a request: a prefix of the same field of an earlier call, then new items."""

    base: int | None = None
    """The ``seq`` of the earlier call (same caller) whose list this one starts with; ``None`` for none."""
    keep: int = 0
    """How many items of that list come first."""
    add: list[int] = Field(default_factory=list)
    """Blob indexes of the items that follow."""


class StoredBody(_Stored):
    """A :class:`~runner.call.Body` with its content moved to blobs."""

    encoding: BodyEncoding
    """As :attr:`Body.encoding`."""
    size: int
    """As :attr:`Body.size`."""
    note: str | None = None
    """As :attr:`Body.note`."""
    value: int | None = None
    """The blob of the whole content, when it is not a JSON object (text, binary, a JSON array or scalar)."""
    fields: dict[str, int | StoredList] | None = None
    """A JSON object's fields in order: a blob for a value, a :class:`StoredList` for a list."""


class StoredCall(_Stored):
    """A :class:`~runner.call.ModelCall` with its request, response and error body moved to blobs."""

    kind: Literal["model_call"] = "model_call"
    """The tag: ``model_call``."""
    meta: dict[str, Any]
    """Every other field of the call, validated by :class:`~runner.call.ModelCall` when read."""
    request: StoredBody
    """The request."""
    response: int | None = None
    """The blob of the reply (a JSON object), if any."""
    error_body: StoredBody | None = None
    """The error reply, if any."""


class EncodedPart(_Stored):
    """A part already encoded where it was captured (a cluster node's gateway), to be written beside the journal."""

    data: bytes
    """The file's bytes, as :meth:`TranscriptBuilder.encode` gives them."""
    calls: int
    """Model calls it holds."""
    capped: bool
    """Whether the capture cap was reached."""


class StoredFile(_Stored):
    """One stored part of one sample's transcript."""

    format: Literal["ispm.transcript"] = "ispm.transcript"
    """Names the file's kind."""
    version: int = TRANSCRIPT_VERSION
    """The transcript format's version."""
    run_id: str | None
    """The run."""
    sample: SampleKey
    """The sample."""
    part: Part
    """Which part."""
    blobs: list[Any] = Field(default_factory=list)
    """Every distinct piece of content, once."""
    events: list[StoredCall | CapReachedEvent] = Field(default_factory=list)
    """The events, calls in arrival order and the cap event (if any) last."""


def file_name(key: SampleKey, part: Part) -> str:
    """The file's path relative to the run folder: ``transcripts/<task>.e<epoch>.<part>.json.gz``."""
    if not key.task_id or any(c in key.task_id for c in "/\\\0") or key.task_id.startswith("."):
        raise TranscriptError(f"a task id unfit for a file name: {key.task_id!r}")
    return f"{TRANSCRIPTS_DIR}/{key.label()}.{part}.json.gz"


def _canonical(value: Any) -> bytes:
    # Compact JSON in the order sent (pydantic-core's encoder, several times json's speed): a resent message is
    # the same bytes, and that is all the hash must see.
    return pydantic_core.to_json(value)


_NO_BLOBS = b'"blobs":[]'
_Ref = int | bytes
"""A kept blob's index, or a staged blob's digest."""
Redact = Callable[[Any], Any]
"""Returns a piece of content with every secret replaced."""


def _unchanged(value: Any) -> Any:
    return value


def _as_text(body: Body, redact: Redact) -> Body:
    """A JSON body too deeply nested for the store, kept as its JSON text (or, deeper than Python's own encoder
    goes, not at all)."""
    note = "nested too deeply for the store: kept as its JSON text"
    try:
        text = redact(json.dumps(body.content))
    except (ValueError, RecursionError):
        return Body(encoding="omitted", size=body.size, note="nested too deeply to encode")
    return Body(encoding="text", content=text, size=body.size, note=note)


class TranscriptBuilder:
    """Collects one part of one sample's transcript in memory, content stored once; not thread-safe."""

    def __init__(self, part: Part, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        """An empty part of a sample's transcript, keeping at most ``limit_bytes`` of distinct content (which sample
        is said when it is written: the gateway starts one when it issues a token, before it knows the run)."""
        self.part, self.limit_bytes = part, limit_bytes
        # Each blob as its JSON bytes: untracked by the garbage collector, and a tenth of the memory of the parsed
        # value; a transcript near its cap would otherwise hold hundreds of MB of dicts for the collector to walk.
        self._blobs: list[bytes] = []
        self._index: dict[bytes, int] = {}
        self._kept = 0
        self._lists: dict[_ListKey, list[int]] = {}  # (caller, seq, field) -> that call's item blobs
        self._last_seq: dict[tuple[str, str], int] = {}  # (caller, field) -> the seq of the last call that had it
        self._last_value: dict[tuple[str, str], int] = {}  # (caller, field) -> the blob of its last non-list value
        # (caller, field) -> that field's value in the caller's last kept call, as sent: a resent history is compared
        # with it, not encoded again (one request's worth of objects, held until the next call).
        self._last_sent: dict[tuple[str, str], Any] = {}
        self._events: list[StoredCall] = []
        self._cap: CapReachedEvent | None = None

    @property
    def calls(self) -> int:
        """Calls added so far."""
        return len(self._events)

    @property
    def kept_bytes(self) -> int:
        """Bytes of distinct content kept so far."""
        return self._kept

    def add(self, event: ModelCall, redact: Redact = _unchanged) -> None:
        """Add one call; past the cap its content is counted and left out.

        ``redact`` is applied to each piece of the request's content that is not already kept (the caller redacts
        the rest of the call): a history resent whole is compared with what is kept, not encoded again.
        """
        if event.request is None:  # a call's figures only: nothing of its request to keep
            event = event.model_copy(update={"request": Body(encoding="omitted", size=0)})
        staged: dict[bytes, tuple[bytes, int]] = {}
        request_body = event.request
        assert request_body is not None  # set above
        try:
            staged_request = self._store_body(request_body, event.caller, staged, redact)
        except (ValueError, RecursionError):  # JSON nested deeper than the encoder goes (pydantic-core: 255 levels)
            staged.clear()
            request_body = _as_text(request_body, redact)
            staged_request = self._store_body(request_body, event.caller, staged, _unchanged)
        response = None
        if event.response is not None:
            response = self._blob_json(event.response.model_dump_json().encode(), staged)
        error_body = None if event.error_body is None else self._store_body(event.error_body, None, staged, _unchanged)
        new_bytes = sum(size for _, size in staged.values())
        if self._cap is not None or self._kept + new_bytes > self.limit_bytes:
            self._omit(event, new_bytes)
            return
        for digest, (raw, size) in staged.items():
            self._index[digest] = len(self._blobs)
            self._blobs.append(raw)
            self._kept += size
        request = self._resolve_staged(staged_request, event.caller)
        meta = event.model_dump(mode="json", exclude={"kind", "request", "response", "error_body"})
        self._events.append(
            StoredCall(
                meta=meta,
                request=request,
                response=None if response is None else self._index_of(response),
                error_body=None if error_body is None else self._resolve_staged(error_body, None),
            )
        )
        self._commit_lists(event.caller, event.seq, request)
        for name, stored in (request.fields or {}).items():
            if isinstance(stored, int):
                self._last_value[(event.caller, name)] = stored
        if request.fields is not None and isinstance(request_body.content, dict):
            for name, value in request_body.content.items():
                self._last_sent[(event.caller, name)] = value

    def _omit(self, event: ModelCall, new_bytes: int) -> None:
        if self._cap is None:
            self._cap = CapReachedEvent(
                caller=event.caller, limit_bytes=self.limit_bytes, calls_omitted=0, bytes_omitted=0
            )
        self._cap = self._cap.model_copy(
            update={
                "calls_omitted": self._cap.calls_omitted + 1,
                "bytes_omitted": self._cap.bytes_omitted + new_bytes,
            }
        )
        figures = None
        if event.response is not None:  # the reply without its blocks
            figures = Reply(
                id=event.response.id,
                stop_reason=event.response.stop_reason,
                complete=event.response.complete,
                stream_events=event.response.stream_events,
            )
        meta = event.model_dump(mode="json", exclude={"kind", "request", "response", "error_body"})
        meta["content_omitted"] = True
        size = event.request.size if event.request is not None else 0
        omitted = StoredBody(encoding="omitted", size=size, note="over the capture cap")
        blob = None
        if figures is not None:  # a few hundred bytes of figures: kept even past the cap
            blob = self._commit_blob(figures.model_dump(mode="json"))
        self._events.append(StoredCall(meta=meta, request=omitted, response=blob))

    # -- blobs -------------------------------------------------------------------------------------------------

    def _blob(self, value: Any, staged: dict[bytes, tuple[bytes, int]]) -> bytes:
        """The digest of ``value``, staged as a new blob unless it is already kept."""
        return self._blob_json(_canonical(value), staged)

    def _blob_json(self, raw: bytes, staged: dict[bytes, tuple[bytes, int]]) -> bytes:
        """The digest of a value encoded as compact JSON, staged as a new blob unless it is already kept."""
        digest = hashlib.sha256(raw).digest()
        if digest not in self._index and digest not in staged:
            staged[digest] = (raw, len(raw))
        return digest

    def _index_of(self, digest: bytes) -> int:
        return self._index[digest]

    def _commit_blob(self, value: Any) -> int:
        staged: dict[bytes, tuple[bytes, int]] = {}
        digest = self._blob(value, staged)
        for d, (v, _size) in staged.items():
            self._index[d] = len(self._blobs)
            self._blobs.append(v)
        return self._index[digest]

    @staticmethod
    def _same(value: Any, sent: Any) -> bool:
        """Whether ``value`` equals what the caller sent last time (so its kept blob is this one's): compared, not
        encoded (C-speed for a resent history). Of the same type too: Python's equality conflates ``1``, ``1.0`` and
        ``true``. The secrets are the same for every call of a part, so equal values redact alike.
        """
        return type(value) is type(sent) and value == sent

    def _store_body(
        self, body: Body, caller: str | None, staged: dict[bytes, tuple[bytes, int]], redact: Redact
    ) -> _StagedBody:
        if body.encoding == "omitted":
            return _StagedBody(body, None, None)
        if body.encoding != "json" or not isinstance(body.content, dict):
            return _StagedBody(body, self._blob(redact(body.content), staged), None)
        fields: dict[str, _Ref | list[_Ref]] = {}
        for name, value in body.content.items():
            if isinstance(value, list):
                base = None if caller is None else self._last_seq.get((caller, name))
                previous = [] if caller is None or base is None else self._lists[(caller, base, name)]
                sent = self._last_sent.get((caller, name)) if caller is not None else None
                if not isinstance(sent, list) or len(sent) != len(previous):
                    sent = []
                refs: list[_Ref] = []
                if _resent(value, sent):  # the whole history again, as nearly every turn sends it: one comparison
                    refs += previous
                for i in range(len(refs), len(value)):
                    item = value[i]
                    if i < len(sent) and self._same(item, sent[i]):
                        refs.append(previous[i])  # still within the history already kept
                    else:
                        refs.append(self._blob(redact(item), staged))
                fields[name] = refs
            else:
                last = None if caller is None else self._last_value.get((caller, name))
                same = (
                    caller is not None and last is not None and self._same(value, self._last_sent.get((caller, name)))
                )
                fields[name] = last if last is not None and same else self._blob(redact(value), staged)
        return _StagedBody(body, None, fields)

    def _resolve_staged(self, staged: _StagedBody, caller: str | None) -> StoredBody:
        body = staged.body
        if staged.fields is None:
            value = None if staged.value is None else self._index_of(staged.value)
            return StoredBody(encoding=body.encoding, size=body.size, note=body.note, value=value)
        fields: dict[str, int | StoredList] = {}
        for name, ref in staged.fields.items():
            if isinstance(ref, list):
                index = self._index
                items = [d if isinstance(d, int) else index[d] for d in ref]
                fields[name] = StoredList(add=items) if caller is None else self._as_list(caller, name, items)
            else:
                fields[name] = ref if isinstance(ref, int) else self._index[ref]
        return StoredBody(encoding=body.encoding, size=body.size, note=body.note, fields=fields)

    def _as_list(self, caller: str, name: str, items: list[int]) -> StoredList:
        base = self._last_seq.get((caller, name))
        if base is None:
            return StoredList(add=items)
        previous = self._lists[(caller, base, name)]
        keep = len(previous) if items[: len(previous)] == previous else 0
        if not keep:
            for mine, theirs in zip(items, previous, strict=False):
                if mine != theirs:
                    break
                keep += 1
        if keep == 0:
            return StoredList(add=items)
        return StoredList(base=base, keep=keep, add=items[keep:])

    def _commit_lists(self, caller: str, seq: int, request: StoredBody) -> None:
        for name, stored in (request.fields or {}).items():
            if isinstance(stored, StoredList):
                self._lists[(caller, seq, name)] = _expand(self._lists, caller, name, stored)
                self._last_seq[(caller, name)] = seq

    # -- output ------------------------------------------------------------------------------------------------

    def _ordered(self) -> list[StoredCall | CapReachedEvent]:
        ordered = sorted(self._events, key=lambda e: (caller_order(e.meta["caller"]), int(e.meta["seq"])))
        return [*ordered, *([self._cap] if self._cap is not None else [])]

    def stored(self, run_id: str | None, key: SampleKey) -> StoredFile:
        """The part as it will be written, for sample ``key`` of run ``run_id``."""
        blobs = [pydantic_core.from_json(raw) for raw in self._blobs]
        return StoredFile(run_id=run_id, sample=key, part=self.part, blobs=blobs, events=self._ordered())

    def encode(self, run_id: str | None, key: SampleKey) -> bytes:
        """The file's bytes: the part as compact JSON, gzip-compressed with a fixed header (same input, same bytes).

        The blobs go in as the JSON bytes kept, spliced into the rest, not parsed and encoded again.
        """
        rest = StoredFile(run_id=run_id, sample=key, part=self.part, blobs=[], events=self._ordered())
        head = rest.model_dump_json().encode()
        at = head.index(_NO_BLOBS)  # the first: run_id, sample and part come before it and cannot hold these bytes
        raw = b"".join((head[:at], b'"blobs":[', b",".join(self._blobs), b"]", head[at + len(_NO_BLOBS) :]))
        return gzip.compress(raw, compresslevel=6, mtime=0)

    def encoded(self, run_id: str | None, key: SampleKey) -> EncodedPart:
        """The part of sample ``key`` encoded, with its counts, to write here or to ship from a cluster node.

        Raises:
            TranscriptError: it cannot be encoded.
        """
        try:
            data = self.encode(run_id, key)
        except (ValueError, RecursionError) as exc:  # nothing kept should fail to encode; if it does, say so
            raise TranscriptError(f"cannot encode the transcript of {key.label()}: {exc}") from exc
        return EncodedPart(data=data, calls=len(self._events), capped=self._cap is not None)

    def write(self, run_dir: Path, run_id: str | None, key: SampleKey) -> TranscriptRef:
        """Write the part of sample ``key`` under ``run_dir`` (scratch file, fsync, rename); return what to journal.

        Raises:
            TranscriptError: it cannot be encoded or written.
        """
        return write_part(run_dir, key, self.part, self.encoded(run_id, key))


def write_part(run_dir: Path, key: SampleKey, part: Part, encoded: EncodedPart) -> TranscriptRef:
    """Write an encoded part of sample ``key`` under ``run_dir`` (scratch file, fsync, rename); what to journal.

    Raises:
        TranscriptError: the file cannot be written.
    """
    name = file_name(key, part)
    target = run_dir / name
    scratch = target.with_name(target.name + ".tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with scratch.open("wb") as f:
            f.write(encoded.data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(scratch, target)
    except OSError as exc:
        raise TranscriptError(f"cannot write the transcript {target}: {exc}") from exc
    return TranscriptRef(
        path=name,
        sha256=hashlib.sha256(encoded.data).hexdigest(),
        bytes=len(encoded.data),
        calls=encoded.calls,
        capped=encoded.capped,
    )


def _resent(value: list[Any], sent: list[Any]) -> bool:
    """Whether ``value`` starts with every item of ``sent``, each equal and of the same type (``1``, ``1.0`` and
    ``true`` are equal in Python, and are not the same JSON)."""
    n = len(sent)
    return 0 < n <= len(value) and value[:n] == sent and list(map(type, value[:n])) == list(map(type, sent))


class _StagedBody:
    """A body whose blobs are staged (by digest), not yet kept."""

    def __init__(self, body: Body, value: bytes | None, fields: dict[str, _Ref | list[_Ref]] | None) -> None:
        self.body, self.value, self.fields = body, value, fields


_ListKey = tuple[str, int, str]


def _expand(lists: dict[_ListKey, list[int]], caller: str, name: str, stored: StoredList) -> list[int]:
    head = [] if stored.base is None else lists[(caller, stored.base, name)][: stored.keep]
    return head + stored.add


# -- reading ---------------------------------------------------------------------------------------------------


def read_stored(data: bytes, where: str) -> StoredFile:
    """Parse a stored part's bytes.

    Raises:
        TranscriptError: not gzip, inflating past :data:`MAX_FILE_BYTES`, not JSON, not a transcript, or a format
            version newer than :data:`~runner.transcript.model.TRANSCRIPT_VERSION`.
    """
    if len(data) > MAX_FILE_BYTES:
        raise TranscriptError(f"{where}: {len(data)} bytes, over the {MAX_FILE_BYTES}-byte limit")
    try:
        decompressor = gzip.GzipFile(fileobj=io.BytesIO(data))
        raw = decompressor.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise TranscriptError(f"{where}: not a gzip file: {exc}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise TranscriptError(f"{where}: inflates past the {MAX_FILE_BYTES}-byte limit")
    try:
        stored = StoredFile.model_validate_json(raw)
    except ValidationError as exc:
        raise TranscriptError(f"{where}: not a transcript: {exc.errors()[0]['msg']}") from exc
    if stored.version > TRANSCRIPT_VERSION:  # its fields may mean what this reader does not know
        raise TranscriptError(f"{where}: format version {stored.version}, newer than this ispm reads")
    return stored


def resolve(stored: StoredFile, where: str) -> list[TranscriptEvent]:
    """The part's events with every reference replaced by its content.

    Raises:
        TranscriptError: a reference points nowhere.
    """
    lists: dict[_ListKey, list[int]] = {}
    events: list[TranscriptEvent] = []
    blobs = stored.blobs

    def blob(index: int) -> Any:
        if not 0 <= index < len(blobs):
            raise TranscriptError(f"{where}: a reference to blob {index} of {len(blobs)}")
        return blobs[index]

    def body(sb: StoredBody, caller: str, seq: int | None) -> Body:
        if sb.fields is None:
            whole = None if sb.value is None else blob(sb.value)
            return Body(encoding=sb.encoding, content=whole, size=sb.size, note=sb.note)
        content: dict[str, Any] = {}
        for name, ref in sb.fields.items():
            if isinstance(ref, StoredList):
                if ref.base is not None and (caller, ref.base, name) not in lists:
                    raise TranscriptError(f"{where}: call {seq} extends the {name!r} of call {ref.base}, not stored")
                items = _expand(lists, caller, name, ref)
                if seq is not None:
                    lists[(caller, seq, name)] = items
                content[name] = [blob(i) for i in items]
            else:
                content[name] = blob(ref)
        return Body(encoding=sb.encoding, content=content, size=sb.size, note=sb.note)

    try:
        for e in stored.events:
            if isinstance(e, CapReachedEvent):
                events.append(e)
                continue
            seq = int(e.meta.get("seq", -1))
            caller = str(e.meta.get("caller"))
            fields: dict[str, Any] = dict(e.meta)
            fields["request"] = body(e.request, caller, seq)
            fields["response"] = None if e.response is None else blob(e.response)
            fields["error_body"] = None if e.error_body is None else body(e.error_body, caller, None)
            events.append(ModelCall.model_validate(fields))
    except ValidationError as exc:
        raise TranscriptError(f"{where}: a damaged call: {exc.errors()[0]['msg']}") from exc
    return events


def read_part(run_dir: Path, ref: TranscriptRef, sample: SampleKey) -> list[TranscriptEvent]:
    """One part's events, after checking its bytes against ``ref`` (what the journal names).

    Raises:
        TranscriptError: the file is missing, is not the bytes the journal names, or is damaged.
    """
    where = f"sample {sample.label()}: {ref.path}"
    path = run_dir / ref.path
    if not path.resolve().is_relative_to(run_dir.resolve()):  # a tampered journal must not read outside the run
        raise TranscriptError(f"{where}: the path leaves the run folder")
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise TranscriptError(f"{where}: over the {MAX_FILE_BYTES}-byte limit")
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(f"{where}: cannot read: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != ref.sha256:
        raise TranscriptError(f"{where}: changed: its sha256 {digest[:16]}… is not the journaled {ref.sha256[:16]}…")
    stored = read_stored(data, where)
    if stored.sample != sample:
        raise TranscriptError(f"{where}: holds sample {stored.sample.label()}")
    return resolve(stored, where)


def caller_order(caller: Caller | str) -> int:
    """Sort key of callers in a transcript: the candidate, then judge A, then judge B (anything else last)."""
    order = ("candidate", "judge_a", "judge_b")
    return order.index(caller) if caller in order else len(order)
