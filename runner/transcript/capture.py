"""Transcript capture: every model call of a sample, kept by the host, off the caller's path.

The gateway hands each finished call to :meth:`Capture.submit`, as the one :class:`~runner.call.ModelCall` it also
books in its ledger: a queue put, nothing more on the event loop. A writer thread then does the work: redacts every
secret (:mod:`runner.transcript.redact`) and adds the call to its sample's
:class:`~runner.transcript.storage.TranscriptBuilder`, which stores each piece of content once and enforces the cap.
:meth:`Capture.take` hands a sample's builder over once its calls are in (the run writes it beside the journal).

The judges' calls go to a :class:`JudgeCapture`, built in the grading thread (no agent waits on a judge).

A failure here never fails a call or a sample: a call the writer cannot record is kept as its figures, with why.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Iterable

from runner import log
from runner.call import Body, ModelCall
from runner.sample_key import SampleKey
from runner.transcript.redact import longest_first, redact_call, redact_json
from runner.transcript.storage import DEFAULT_LIMIT_BYTES, TranscriptBuilder

_log = log.get(__name__)

# The writer shares the GIL with the agents' event loop, which waits for it up to the switch interval (5 ms) when
# the writer runs on: the writer lets go every half millisecond of work, so the loop never waits longer than that.
_yield_gil = functools.partial(time.sleep, 0)
_YIELD_AFTER_S = 0.0005
BATCH_S = 0.05
"""How long the writer lets calls gather before it works through them. One call on its own ran on cold caches and
cost about four times what it costs in a batch (docs/gateway.md, Capture); ``take`` and ``flush`` cut the wait short."""
MAX_UNTAKEN = 64
"""Transcripts a capture holds for samples not yet taken (a run has a handful running at once)."""


def keep(builder: TranscriptBuilder, call: ModelCall, secrets: tuple[str, ...]) -> None:
    """Add ``call`` to ``builder``, redacted of ``secrets``; a call that cannot be read is kept as its figures."""
    try:
        builder.add(redact_call(call, secrets), lambda value: redact_json(value, secrets))
    except Exception as exc:  # kept as its figures, never lost
        _log.exception("capture_failed", caller=call.caller, seq=call.seq)
        builder.add(unrecorded(call, exc))


def unrecorded(call: ModelCall, exc: BaseException) -> ModelCall:
    """What is kept of a call the writer failed on: its figures, and why its content is not (nothing the caller
    wrote, which could not be redacted)."""
    size = call.request.size if call.request is not None else 0
    note = f"not recorded: {type(exc).__name__}"
    return call.figures().model_copy(
        update={"requested_model": None, "error": None, "request": Body(encoding="omitted", size=size, note=note)}
    )


class _Sample:
    def __init__(self, limit_bytes: int) -> None:
        self.builder = TranscriptBuilder("candidate", limit_bytes)
        self.pending = 0
        self.taken = False
        self.lock = threading.Lock()  # the builder's: held by the writer while it adds, never by the event loop


class Capture:
    """Per-sample transcripts of the gateway's calls, built by one writer thread. Thread-safe."""

    def __init__(self, secrets: Iterable[str] = (), *, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        """Keep at most ``limit_bytes`` of distinct content per sample; redact ``secrets`` (the host's keys) and each
        call's own (its sample's token)."""
        self.secrets = longest_first(secrets)
        self.limit_bytes = limit_bytes
        self._samples: dict[str, _Sample] = {}
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)
        self._queue: queue.SimpleQueue[tuple[str, ModelCall, tuple[str, ...]] | None] = queue.SimpleQueue()
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

    def submit(self, sample_id: str, call: ModelCall, secrets: Iterable[str] = ()) -> None:
        """Queue one finished call of ``sample_id`` for the writer, with the secrets only it knows (its token): a put,
        nothing more on the caller's thread. A sample that is not open (never, or taken already) keeps nothing."""
        with self._lock:
            sample = self._samples.get(sample_id)
            if sample is None:
                return
            sample.pending += 1
        self._queue.put((sample_id, call, tuple(secrets)))

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
        """CPU seconds the writer thread has spent: what capture costs the gateway beyond its queue puts
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
            batch: list[tuple[str, ModelCall, tuple[str, ...]] | None] = [first]
            while not self._queue.empty():
                batch.append(self._queue.get())
            yielded = time.perf_counter()
            for item in batch:
                if item is None:
                    return
                if time.perf_counter() - yielded > _YIELD_AFTER_S:
                    _yield_gil()  # the agents' loop first: its next event may be waiting on the GIL
                    yielded = time.perf_counter()
                self._record(*item)

    def _record(self, sample_id: str, call: ModelCall, own: tuple[str, ...]) -> None:
        with self._lock:
            sample = self._samples.get(sample_id)
        if sample is None:
            return  # taken already (a late call past the timeout) or never opened
        try:
            with sample.lock:  # not the capture's lock: the event loop must never wait on an add
                if not sample.taken:
                    keep(sample.builder, call, longest_first((*self.secrets, *own)))
        except Exception:
            _log.exception("capture_failed", sample=sample_id, seq=call.seq)
        finally:
            with self._drained:
                sample.pending -= 1
                self._drained.notify_all()


class JudgeCapture:
    """The judges' calls of each sample, per judge slot. Thread-safe: samples are graded on several threads at once."""

    def __init__(self, secrets: Iterable[str] = (), *, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        """Keep at most ``limit_bytes`` of distinct content per sample; redact ``secrets`` (the host's keys) and each
        call's own (its judge's key)."""
        self.secrets = longest_first(secrets)
        self.limit_bytes = limit_bytes
        self._lock = threading.Lock()
        self._parts: dict[SampleKey, TranscriptBuilder] = {}

    def record(self, key: SampleKey, call: ModelCall, secrets: Iterable[str] = ()) -> None:
        """Add one judge call (its ``caller`` a judge slot) to the sample's judges' part."""
        with self._lock:
            builder = self._parts.setdefault(key, TranscriptBuilder("judges", self.limit_bytes))
            keep(builder, call, longest_first((*self.secrets, *secrets)))

    def take(self, key: SampleKey) -> TranscriptBuilder | None:
        """The sample's judges' part, removed; ``None`` when no judge call was recorded for it."""
        with self._lock:
            return self._parts.pop(key, None)
