"""Transcript capture: every model call of a sample, kept by the host, off the agent's path.

On the event loop the gateway only takes references: the request body it already parsed, the provider's reply
body, the headers as they came, and the timings. A stream's events go to a
:class:`~runner.trace.assemble.StreamAssembler` as the relay parsed them, after each is sent on (a few dictionary
lookups: parsing them again later cost the process more). At the call's end it hands them to
:meth:`Capture.submit`, a queue put. A writer thread then does the work: redacts every secret, puts the reply
together (:mod:`runner.trace.assemble`), and adds the call to its sample's
:class:`~runner.trace.storage.TranscriptBuilder`, which stores each piece of content once and enforces the cap.
:meth:`Capture.take` hands a sample's builder over once its calls are in (the run writes it beside the journal).

A failure here never fails a call or a sample: a call the writer cannot record becomes an event that says so.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic_core

from runner import log
from runner.gateway.protocols.tokens import TokenUsage
from runner.gateway.providers import PROVIDERS
from runner.trace.assemble import StreamAssembler, assemble_body
from runner.trace.model import (
    REDACTED,
    AssembledResponse,
    Body,
    CallApi,
    Caller,
    CallOutcome,
    ModelCallEvent,
    ResponseUsage,
    StreamCut,
)
from runner.trace.storage import DEFAULT_LIMIT_BYTES, TranscriptBuilder, encode_binary

_log = log.get(__name__)

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"})
"""Headers whose whole value is a credential: stored as ``[REDACTED]`` whatever they hold."""
_MIN_SECRET = 8  # a shorter "key" would redact ordinary words
# The writer shares the GIL with the agents' event loop, which waits for it up to the switch interval (5 ms) when
# the writer runs on: the writer lets go every half millisecond of work, so the loop never waits longer than that.
_yield_gil = functools.partial(time.sleep, 0)
_YIELD_AFTER_S = 0.0005
BATCH_S = 0.05
"""How long the writer lets calls gather before it works through them. One call on its own ran on cold caches and
cost about four times what it costs in a batch (docs/gateway.md, Capture); ``take`` and ``flush`` cut the wait short."""
MAX_UNTAKEN = 64
"""Transcripts a capture holds for samples not yet taken (a run has a handful running at once)."""


def host_secrets(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """Every provider key in the host environment, and ``extra``: what no transcript may hold."""
    found = {os.environ.get(spec.key_env, "") for spec in PROVIDERS.values() if spec.key_env}
    found |= set(extra)
    return tuple(sorted((s for s in found if len(s) >= _MIN_SECRET), key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_json(value: Any, secrets: tuple[str, ...]) -> Any:
    """``value`` (parsed JSON) with every secret replaced in every string, keys included.

    Through the JSON text, not a walk: a secret the sender escaped (``\\u0073k-...``) is plain once parsed, and
    the encoder writes it plain again (UTF-8, no escapes but quotes and control characters), so the replacement
    finds it; nesting costs no recursion here. The text is pydantic-core's encoder's, several times json's speed.
    """
    raw = pydantic_core.to_json(value)
    if not any(secret.encode() in raw for secret in secrets):
        return value
    text = redact_text(raw.decode(), secrets)
    return pydantic_core.from_json(text)


def redact_headers(headers: Iterable[tuple[bytes, bytes]], secrets: tuple[str, ...]) -> dict[str, str]:
    """Headers as one dict, names lower-cased, credentials and secrets redacted (repeated names joined by ``, ``)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1").lower()
        value = REDACTED if name in SECRET_HEADERS else redact_text(raw_value.decode("latin-1"), secrets)
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def body_of(parsed: Any, raw: bytes | None, size: int, secrets: tuple[str, ...], note: str | None = None) -> Body:
    """A body as kept: parsed JSON when there is some, else the text, else the bytes; ``omitted`` when neither."""
    if parsed is not None:
        return Body(encoding="json", content=redact_json(parsed, secrets), size=size, note=note)
    if raw is None:
        return Body(encoding="omitted", size=size, note=note)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Body(encoding="binary", content=encode_binary(raw), size=size, note=note or "not UTF-8")
    try:
        return Body(encoding="json", content=redact_json(json.loads(text), secrets), size=size, note=note)
    except (ValueError, RecursionError):
        return Body(encoding="text", content=redact_text(text, secrets), size=size, note=note or "not JSON")


@dataclass(slots=True)
class CallCapture:
    """One call as the event loop saw it: references only, nothing parsed, copied or redacted yet."""

    sample_id: str
    seq: int
    caller: Caller
    api: CallApi
    provider_api: CallApi | None
    requested_model: str | None
    stream: bool
    started_wall: float
    latency_s: float
    status: int
    outcome: CallOutcome
    headers: list[tuple[bytes, bytes]]
    token: str | None
    request: Any = None
    request_raw: bytes | None = None
    request_size: int = 0
    request_note: str | None = None
    reply_body: dict[str, Any] | None = None
    assembler: StreamAssembler | None = None
    """A stream's events, fed to it as they passed; ``None`` for a call that was not streamed."""
    assembly_error: str | None = None
    """Why the stream could not be assembled (the relay went on without it)."""
    events_uncaptured: int = 0
    error: str | None = None
    error_body: bytes | None = None
    cut_by: Literal["provider", "caller"] | None = None
    ttft_s: float | None = None
    usage: TokenUsage | None = None
    returned_model: str | None = None
    judge: str | None = None
    extra_secrets: tuple[str, ...] = field(default_factory=tuple)


class CaptureError(Exception):
    """A call's content could not be captured; its figures are kept and the reason logged."""


def call_secrets(call: CallCapture, secrets: tuple[str, ...]) -> tuple[str, ...]:
    """``secrets`` and the call's own (its token, its judge's key), longest first."""
    return tuple(sorted({*secrets, *call.extra_secrets, *((call.token,) if call.token else ())}, key=len))[::-1]


def to_event(call: CallCapture, secrets: tuple[str, ...]) -> ModelCallEvent:
    """The event of ``call``, the reply assembled and everything redacted but a JSON object request's content, which
    the builder redacts piece by piece as it keeps it (``redact_json`` with :func:`call_secrets`)."""
    secrets = call_secrets(call, secrets)
    response: AssembledResponse | None = None
    provider_api = call.provider_api or call.api
    if call.assembly_error is not None:
        raise CaptureError(call.assembly_error)
    if call.assembler is not None:
        response = call.assembler.result(complete=call.cut_by is None and call.outcome == "ok")
        if call.events_uncaptured:
            response = response.model_copy(
                update={"stream_events": response.stream_events + call.events_uncaptured, "complete": False}
            )
    elif call.reply_body is not None:
        response = assemble_body(provider_api, call.reply_body)
    if response is not None:
        text = response.model_dump_json()
        if any(secret in text for secret in secrets):  # in what the model wrote (rare): rebuilt from the redacted text
            response = AssembledResponse.model_validate_json(redact_text(text, secrets))
        if call.usage is not None and response.usage is None and call.usage != TokenUsage():
            response = response.model_copy(update={"usage": ResponseUsage(**call.usage.model_dump())})
        if response.model is None and call.returned_model:
            response = response.model_copy(update={"model": call.returned_model})
    cut = None
    if call.cut_by is not None:
        cut = StreamCut(
            by=call.cut_by,
            reason=redact_text(call.error or "", secrets),
            events_received=call.assembler.events + call.events_uncaptured if call.assembler else 0,
        )
    error_body = None
    if call.error_body is not None:
        error_body = body_of(None, call.error_body, len(call.error_body), secrets)
    return ModelCallEvent(
        seq=call.seq,
        caller=call.caller,
        judge=call.judge,
        api=call.api,
        provider_api=call.provider_api,
        requested_model=call.requested_model,
        stream=call.stream,
        started_at=datetime.fromtimestamp(call.started_wall, UTC),
        latency_s=round(call.latency_s, 6),
        ttft_s=call.ttft_s,
        request_headers=redact_headers(call.headers, secrets),
        request=(
            Body(encoding="json", content=call.request, size=call.request_size, note=call.request_note)
            if isinstance(call.request, dict)
            else body_of(call.request, call.request_raw, call.request_size, secrets, call.request_note)
        ),
        response=response,
        status=call.status,
        outcome=call.outcome,
        error=None if call.error is None else redact_text(call.error, secrets),
        error_body=error_body,
        cut=cut,
    )


def redactor(call: CallCapture, secrets: tuple[str, ...]) -> Callable[[Any], Any]:
    """What the builder redacts a request's pieces with: ``redact_json`` over :func:`call_secrets`."""
    mine = call_secrets(call, secrets)
    return lambda value: redact_json(value, mine)


def _why(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, CaptureError) else type(exc).__name__


def _unrecorded(call: CallCapture, exc: BaseException) -> ModelCallEvent:
    """What is kept of a call the writer failed on: its figures, and why its content is not."""
    return ModelCallEvent(
        seq=call.seq,
        caller=call.caller,
        judge=call.judge,
        api=call.api,
        provider_api=call.provider_api,
        requested_model=None,
        stream=call.stream,
        started_at=datetime.fromtimestamp(call.started_wall, UTC),
        latency_s=round(call.latency_s, 6),
        request=Body(encoding="omitted", size=call.request_size, note=f"not recorded: {_why(exc)}"),
        status=call.status,
        outcome=call.outcome,
    )


class _Sample:
    def __init__(self, limit_bytes: int) -> None:
        self.builder = TranscriptBuilder("candidate", limit_bytes)
        self.pending = 0
        self.next_seq = 0
        self.taken = False
        self.lock = threading.Lock()  # the builder's: held by the writer while it adds, never by the event loop


class Capture:
    """Per-sample transcripts, built by one writer thread. Thread-safe."""

    def __init__(self, secrets: Iterable[str] = (), *, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        """Keep at most ``limit_bytes`` of distinct content per sample; redact ``secrets`` and the host's keys."""
        self.secrets = host_secrets(secrets)
        self.limit_bytes = limit_bytes
        self._samples: dict[str, _Sample] = {}
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._queue: queue.SimpleQueue[CallCapture | None] = queue.SimpleQueue()
        self._hurry = threading.Event()  # set by whoever waits on the writer: work through the queue now
        self._thread = threading.Thread(target=self._write, name="ispm-capture", daemon=True)
        self._thread.start()

    def open(self, sample_id: str) -> None:
        """Start a fresh transcript for ``sample_id`` (a sample run again starts over).

        At most :data:`MAX_UNTAKEN` transcripts wait to be taken; past that the oldest is dropped, so a gateway whose
        owner never takes them stays bounded.
        """
        with self._lock:
            self._samples.pop(sample_id, None)
            self._samples[sample_id] = _Sample(self.limit_bytes)
            while len(self._samples) > MAX_UNTAKEN:
                dropped = next(iter(self._samples))
                self._samples.pop(dropped).taken = True
                _log.warning("capture_dropped", sample=dropped, reason="never taken")

    def next_seq(self, sample_id: str) -> int | None:
        """The next call number of ``sample_id`` (arrival order), or ``None`` when it is not captured."""
        with self._lock:
            sample = self._samples.get(sample_id)
            if sample is None:
                return None
            sample.next_seq += 1
            return sample.next_seq - 1

    def submit(self, call: CallCapture) -> None:
        """Queue one finished call for the writer: a put, nothing more on the caller's thread."""
        with self._lock:
            sample = self._samples.get(call.sample_id)
            if sample is None:
                return
            sample.pending += 1
        self._queue.put(call)

    def take(self, sample_id: str, *, timeout: float = 30.0) -> TranscriptBuilder | None:
        """The sample's transcript once every submitted call is in it, removed from the capture; ``None`` when the
        sample was never opened. After ``timeout`` seconds the calls still queued are left out."""
        deadline = time.monotonic() + timeout
        self._hurry.set()
        with self._drained:
            sample = self._samples.get(sample_id)
            if sample is None:
                return None
            self._drained.wait_for(lambda: sample.pending == 0, timeout=max(deadline - time.monotonic(), 0))
            if sample.pending:
                _log.warning("capture_late", sample=sample_id, pending=sample.pending)
            del self._samples[sample_id]
        with sample.lock:  # a call the writer is adding right now goes in whole, or (late) not at all
            sample.taken = True
            return sample.builder

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every call submitted so far is in its transcript; ``False`` if some are still queued after
        ``timeout`` seconds."""
        self._hurry.set()
        with self._drained:
            return self._drained.wait_for(
                lambda: not any(s.pending for s in self._samples.values()), timeout=max(timeout, 0)
            )

    def writer_cpu_s(self) -> float:
        """CPU seconds the writer thread has spent: what capture costs the gateway beyond its references
        (``bench/gateway.py`` reports it per event)."""
        ident = self._thread.ident
        if ident is None or not self._thread.is_alive():
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(ident))

    def close(self) -> None:
        """Stop the writer once the calls queued are in."""
        self._queue.put(None)
        self._hurry.set()
        self._thread.join(timeout=30)

    def _write(self) -> None:
        while (first := self._queue.get()) is not None:
            self._hurry.wait(BATCH_S)  # let the calls ending about now join this one
            self._hurry.clear()  # before the queue is read: a hurry from now on is for the next batch
            batch: list[CallCapture | None] = [first]
            while not self._queue.empty():
                batch.append(self._queue.get())
            yielded = time.perf_counter()
            for call in batch:
                if call is None:
                    return
                if time.perf_counter() - yielded > _YIELD_AFTER_S:
                    _yield_gil()  # the agents' loop first: its next event may be waiting on the GIL
                    yielded = time.perf_counter()
                self._record(call)

    def _record(self, call: CallCapture) -> None:
        try:
            event = to_event(call, self.secrets)
        except Exception as exc:  # a call the writer cannot read must not cost the others
            _log.exception("capture_failed", sample=call.sample_id, seq=call.seq)
            event = _unrecorded(call, exc)
        with self._lock:
            sample = self._samples.get(call.sample_id)
        if sample is None:
            return  # taken already (a late call past the timeout) or never opened
        try:
            with sample.lock:  # not the capture's lock: the event loop must never wait on an add
                if not sample.taken:
                    try:
                        sample.builder.add(event, redactor(call, self.secrets))
                    except Exception as exc:  # kept as its figures, never lost
                        _log.exception("capture_failed", sample=call.sample_id, seq=call.seq)
                        sample.builder.add(_unrecorded(call, exc))
        except Exception:
            _log.exception("capture_failed", sample=call.sample_id, seq=call.seq)
        finally:
            with self._drained:
                sample.pending -= 1
                self._drained.notify_all()


class JudgeCapture:
    """The judges' calls of each sample, per judge slot: built in the grading thread (no agent waits on a judge).

    Thread-safe: samples are graded on several threads at once.
    """

    def __init__(self, secrets: Iterable[str] = (), *, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        """Keep at most ``limit_bytes`` of distinct content per sample; redact ``secrets`` and the host's keys."""
        self.secrets = host_secrets(secrets)
        self.limit_bytes = limit_bytes
        self._lock = threading.Lock()
        self._parts: dict[tuple[str, int], TranscriptBuilder] = {}
        self._seqs: dict[tuple[str, int, str], int] = {}

    def next_seq(self, task_id: str, epoch: int, slot: Caller) -> int:
        """The next call number of ``slot`` for the sample."""
        with self._lock:
            seq = self._seqs.get((task_id, epoch, slot), 0)
            self._seqs[(task_id, epoch, slot)] = seq + 1
            return seq

    def record(self, task_id: str, epoch: int, call: CallCapture) -> None:
        """Add one judge call to the sample's judges' part; a call that cannot be read is kept as its figures."""
        try:
            event = to_event(call, self.secrets)
        except Exception as exc:  # grading goes on whatever the capture makes of a reply
            _log.exception("capture_failed", sample=f"{task_id}.e{epoch}", judge=call.judge)
            event = _unrecorded(call, exc)
        with self._lock:
            builder = self._parts.setdefault((task_id, epoch), TranscriptBuilder("judges", self.limit_bytes))
            try:
                builder.add(event, redactor(call, self.secrets))
            except Exception as exc:  # kept as its figures, never lost
                _log.exception("capture_failed", sample=f"{task_id}.e{epoch}", judge=call.judge)
                builder.add(_unrecorded(call, exc))

    def take(self, task_id: str, epoch: int) -> TranscriptBuilder | None:
        """The sample's judges' part, removed; ``None`` when no judge call was recorded for it."""
        with self._lock:
            for slot in ("judge_a", "judge_b"):
                self._seqs.pop((task_id, epoch, slot), None)
            return self._parts.pop((task_id, epoch), None)
