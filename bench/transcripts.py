"""Bytes a transcript takes on disk, as a conversation grows, against storing every request whole.

    .venv/bin/python bench/transcripts.py [--turns 50 100 200] [--sample-turns 40] [--samples 635]

An agent resends its whole history every turn, so n turns send O(n²) bytes. The store (runner/transcript/storage.py)
keeps each message once and each history as a prefix of the previous call's, so it should grow linearly. The bench
builds a synthetic Claude Code-shaped conversation (an ~18 KB system prompt, ~50 KB of tool definitions, each turn
40 to 120 words of text and a tool call, then a tool result of 5 to 60 SQL rows), puts every turn's request and streamed
reply through the real capture path (the Messages reader on the relay, then ``runner.transcript.capture.keep``:
redaction and the builder), and prints:

- bytes stored at each ``--turns``, against the baseline run alongside: every request and reply kept whole in one
  gzip stream (what a log of the wire would hold), with the ratio and the growth from one size to the next;
- the estimate for a run of ``--samples`` samples (635: 127 tasks × 5 epochs) of ``--sample-turns`` turns each,
  the candidate's part and the two judges' calls per sample;
- the capture's CPU per call and per stream event on this host (for docs/gateway.md's budget).

Deterministic (seeded); no network, no Docker.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import time
from typing import Any

from runner.call import Body, ModelCall
from runner.gateway.protocols import Reader, reader_for
from runner.gateway.providers import host_secrets
from runner.transcript.capture import keep
from runner.transcript.model import SampleKey
from runner.transcript.storage import DEFAULT_LIMIT_BYTES, TranscriptBuilder

KEY = SampleKey(task_id="ispm-001", epoch=1)
SYLLABLES = ("ka", "to", "ri", "mfa", "ad", "min", "ok", "ta", "ro", "le", "pol", "icy", "us", "er", "gro", "up")


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    """Pseudo-words, so that the text compresses about as English does (gzip ~3×), not as a 30-word list would."""
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randrange(1, 5))) for _ in range(size)]


_RNG = random.Random(3)
WORDS = _vocabulary(_RNG)
_WEIGHTS = [1 / (rank + 1) for rank in range(len(WORDS))]  # Zipf: a few words often, most rarely


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, _WEIGHTS, k=words))


def _rows(rng: random.Random, n: int) -> str:
    return "\n".join(
        f"00u{rng.randrange(10**9):09d}|{rng.choice(WORDS)}.{rng.choice(WORDS)}@example.com|{rng.choice(WORDS)}"
        for _ in range(n)
    )


def conversation(turns: int, seed: int = 7) -> list[tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]]:
    """``turns`` requests of a Claude Code-shaped session (Messages, streamed) with each reply's stream events."""
    rng = random.Random(seed)
    system = [{"type": "text", "text": _text(rng, 3000)}]  # ~18 KB
    tools = [
        {"name": f"Tool{i}", "description": _text(rng, 450), "input_schema": {"type": "object", "properties": {}}}
        for i in range(18)
    ]  # ~50 KB
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": _text(rng, 150)}]}]
    out = []
    for turn in range(turns):
        body = {
            "model": "claude-opus-5-5",
            "max_tokens": 32000,
            "stream": True,
            "system": system,
            "tools": tools,
            "messages": list(messages),
        }
        thought = _text(rng, rng.randrange(40, 120))
        sql = f"SELECT * FROM okta_users WHERE status = '{rng.choice(WORDS)}' LIMIT {rng.randrange(5, 40)}"
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {"id": f"msg_{turn}", "model": "claude-x", "usage": {"input_tokens": 9000 + 300 * turn}},
                },
            ),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
        ]
        events += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word + " "}},
            )
            for word in thought.split()
        ]
        events += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash", "input": {}},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps({"command": f'ispm-sql "{sql}"'})},
                },
            ),
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 80}},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        out.append((body, events))
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": thought},
                    {"type": "tool_use", "id": f"toolu_{turn}", "name": "Bash", "input": {"command": sql}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": _rows(rng, rng.randrange(5, 60))}
                ],
            }
        )
    return out


def assembled(events: list[tuple[str, dict[str, Any]]]) -> Reader:
    """A stream's events read as the gateway's relay reads them, one parsed event at a time."""
    reader = reader_for("messages")
    for name, data in events:
        reader.feed(name, data)
    return reader


def _call(seq: int, body: dict[str, Any], reader: Reader) -> ModelCall:
    """One of the session's calls as the gateway hands it on: the request as sent, the reply its reader read."""
    return ModelCall(
        seq=seq,
        api="messages",
        provider_api="messages",
        requested_model=body["model"],
        stream=True,
        latency_s=2.5,
        status=200,
        outcome="ok",
        usage=reader.usage,
        returned_model=reader.returned_model,
        request_headers={"x-api-key": "token-of-the-sample", "user-agent": "claude-cli/2.1.332"},
        request=Body(encoding="json", content=body, size=len(json.dumps(body))),
        response=reader.reply(complete=reader.finished),
    )


def stored_bytes(turns: int) -> tuple[int, int, float, int]:
    """(bytes stored, bytes of the baseline, capture CPU seconds, stream events) for one conversation."""
    builder = TranscriptBuilder("candidate", limit_bytes=1 << 40)
    secrets = host_secrets(["sk-bench-not-a-real-key-0000"])
    baseline = gzip.GzipFile(fileobj=(sink := _Counter()), mode="wb", mtime=0)
    cpu = 0.0
    events = 0
    for seq, (body, stream) in enumerate(conversation(turns)):
        started = time.process_time()
        reader = assembled(stream)  # on the relay, as each event passes
        cpu += time.process_time() - started
        call = _call(seq, body, reader)  # not timed: its request size is the bench's json.dumps
        started = time.process_time()
        keep(builder, call, secrets)
        cpu += time.process_time() - started
        events += len(stream)
        baseline.write(json.dumps(body).encode() + b"\n")
        baseline.write(json.dumps(stream).encode() + b"\n")
    baseline.close()
    return len(builder.encode("run", KEY)), sink.size, cpu, events


class _Counter:
    """A write-only file that counts bytes."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        pass


def judges_bytes() -> int:
    """Bytes of one sample's judges' part: two non-streamed grading calls of ~15 KB each."""
    rng = random.Random(11)
    builder = TranscriptBuilder("judges", limit_bytes=DEFAULT_LIMIT_BYTES)
    secrets = host_secrets()
    for seq, slot in enumerate(("judge_a", "judge_b")):
        request = {
            "model": "judge",
            "messages": [
                {"role": "system", "content": _text(rng, 1500)},
                {"role": "user", "content": _text(rng, 1000)},
            ],
            "temperature": 0,
        }
        reply = {
            "id": "c",
            "model": "judge",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": _text(rng, 300)}}
            ],
            "usage": {"prompt_tokens": 6000, "completion_tokens": 400},
        }
        reader = reader_for("chat")
        reader.read_body(reply)
        call = _call(seq, request, reader).model_copy(
            update={"caller": slot, "api": "chat", "provider_api": "chat", "stream": False, "request_headers": {}}
        )
        keep(builder, call, secrets)
    return len(builder.encode("run", KEY))


def main() -> None:
    """Print bytes stored per conversation length, the growth, and the estimate for a run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 100, 200], help="conversation lengths")
    parser.add_argument("--sample-turns", type=int, default=40, help="turns of one sample, for the run estimate")
    parser.add_argument("--samples", type=int, default=635, help="samples of the run estimated (127 tasks × 5)")
    args = parser.parse_args()

    print("turns   stored (KB)   baseline (KB)   stored/baseline   stored growth   baseline growth   capture CPU")
    previous: tuple[int, int, int] | None = None
    for turns in args.turns:
        stored, baseline, cpu, events = stored_bytes(turns)
        growth = base_growth = ""
        if previous is not None:
            growth = f"×{stored / previous[1]:.2f} for ×{turns / previous[0]:.2f} turns"
            base_growth = f"×{baseline / previous[2]:.2f}"
        print(
            f"{turns:>5}   {stored / 1024:>11.1f}   {baseline / 1024:>13.1f}   {stored / baseline:>15.3f}"
            f"   {growth:>13}   {base_growth:>15}   {cpu / turns * 1e3:.2f} ms/call, {cpu / events * 1e6:.1f} µs/event"
        )
        previous = (turns, stored, baseline)

    per_sample, _, _, _ = stored_bytes(args.sample_turns)
    judged = judges_bytes()
    total = args.samples * (per_sample + judged)
    print(
        f"\nestimate: {args.samples} samples of {args.sample_turns} Claude Code-sized turns: "
        f"{per_sample / 1024:.0f} KB candidate + {judged / 1024:.0f} KB judges per sample, "
        f"{total / 1024**2:.0f} MB for the run (cap: {DEFAULT_LIMIT_BYTES // 1024**2} MiB of distinct content per part)"
    )


if __name__ == "__main__":
    main()
