"""What a sample's page costs to build, as its conversation grows, against dumping the same transcript as JSON.

    .venv/bin/python bench/sample_pages.py [--turns 40 100 200] [--samples 635] [--repeat 3]

Every ``ispm run`` writes one page per sample (runner/trace/sample_page.py) when it writes its report. The bench
builds bench/transcripts.py's Claude Code-shaped session (an ~18 KB system prompt, ~50 KB of tools, each turn a
reply with a tool call and 5 to 60 rows of SQL output) through the real capture and store, reads it back as a reader
does, and times, best of ``--repeat``:

- the page: the timeline of the transcript (each request read as a conversation, what it added to the previous one)
  and the page rendered, SQL laid out and long content folded;
- the baseline, run alongside: ``json.dumps`` of the same resolved transcript (what ``ispm trace --json`` could do
  with no reading at all).

It prints both, their ratio, the page's size, and the estimate for a run of ``--samples`` samples of the first
``--turns`` size. Deterministic (seeded); no network, no Docker.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

from transcripts import _call, assembled, conversation

from runner.call import ModelCall
from runner.gateway.providers import host_secrets
from runner.record.report import environment
from runner.trace.sample_page import render_sample_page
from runner.trace.timeline import build_timeline
from runner.transcript.capture import keep
from runner.transcript.model import SampleKey, Transcript
from runner.transcript.storage import TranscriptBuilder, read_stored, resolve

KEY = SampleKey(task_id="ispm-001", epoch=1)


def _capture(seq: int, body: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> ModelCall:
    started = datetime.fromtimestamp(1767225600.0 + 10 * seq, UTC)
    return _call(seq, body, assembled(events)).model_copy(update={"started_at": started})


def transcript(turns: int) -> Transcript:
    """The session of ``turns`` calls, captured, stored and read back as a reader gets it."""
    builder = TranscriptBuilder("candidate", limit_bytes=1 << 40)
    secrets = host_secrets([])
    for seq, (body, stream) in enumerate(conversation(turns)):
        keep(builder, _capture(seq, body, stream), secrets)
    events = resolve(read_stored(builder.encode("run", KEY), "bench"), "bench")
    return Transcript(run_id="run", sample=KEY, events=events)


def best(repeat: int, work: Any) -> tuple[float, Any]:
    """The shortest wall time of ``repeat`` runs of ``work()``, and its last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[40, 100, 200])
    parser.add_argument("--samples", type=int, default=635)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = environment()
    print(f"{'turns':>5}  {'page (s)':>9}  {'json (s)':>9}  {'page/json':>9}  {'page KB':>8}")
    first: float | None = None
    for turns in args.turns:
        t = transcript(turns)

        def page(t: Transcript = t) -> str:
            timeline = build_timeline(
                KEY, run_id="run", candidate_model="anthropic/x", finished=None, graded=None, transcript=t
            )
            return render_sample_page(env, timeline, "a task")

        def dump(t: Transcript = t) -> str:
            return json.dumps([e.model_dump(mode="json") for e in t.events if isinstance(e, ModelCall)])

        page_s, html = best(args.repeat, page)
        json_s, _ = best(args.repeat, dump)
        first = page_s if first is None else first
        print(f"{turns:>5}  {page_s:>9.3f}  {json_s:>9.3f}  {page_s / json_s:>9.2f}  {len(html) / 1024:>8.0f}")
    assert first is not None
    print(
        f"a run of {args.samples} samples of {args.turns[0]} turns: ~{first * args.samples:.0f} s of page building "
        f"on this host ({datetime.now(UTC):%Y-%m-%d})"
    )


if __name__ == "__main__":
    main()
