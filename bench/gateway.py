"""How much latency the gateway adds, streamed and not, against calling the fake provider directly.

    .venv/bin/python bench/gateway.py [--rounds 4] [--scale 1] [--events 60] [--gap 0.01] [--delay 0.05] [--only N]
    .venv/bin/python bench/gateway.py --profile /tmp/gateway.prof   # cProfile of the gateway, 16 streams

About 300 s on a 2-core host; ``--rounds`` and ``--scale`` shorten or lengthen it.

Three kinds of process, as in a real run: the fake provider, the gateway (one process per candidate, with its
structlog setup: ``openai/...`` and ``anthropic/...``), and the callers (threads, one keep-alive httpx client
each, as an agent holds one). Every caller reads a stream the same way, whatever the path: ``client.stream``,
iterating lines; time to first byte is the first ``data:`` line, latency the whole reply. The paths:

- ``direct chat``, ``direct messages``: the fake provider itself, the baselines;
- ``chat→openai``: chat completions passed through to an ``openai/...`` candidate (against ``direct chat``);
- ``messages→anthropic``: Messages passed through to an ``anthropic/...`` candidate (against ``direct messages``);
- ``messages→openai``: a Messages agent translated to an ``openai/...`` candidate's chat completions and back
  (against ``direct chat``, the request the gateway makes);

each three ways: ``tcp``, the gateway's loopback TCP listener (tests only); ``uds``, its Unix socket; and ``fwd``,
the sandbox's own forwarder script (``runner/sandbox/forwarder.py``, one per caller as there is one per sandbox)
from a loopback port to that socket: the whole path an agent's request takes. Those gateways capture every call's
transcript, as a run's do. Each gateway also holds a second set of samples whose transcripts it does not keep, and
serves them over ``uds`` too (``... uds nocap``): capture off, in the same process, so capture's cost shows side by
side in one run without two processes' own differences (a few percent either way between two identical gateways).
The report gives time to first byte on versus off, and the gateway's CPU per event on each ``uds`` path against its
``nocap`` twin (docs/gateway.md, Capture). Each path's CPU is read from its gateway's process before and after each
of its rounds, once the capture's queue is drained, so a path is charged its own work only. All paths run in short
alternating rounds, each in its own shuffled order (seeded), so drift (other work on the host) and whatever a path
leaves behind for the next hit them alike: rotated, each path always followed the same one, which showed as a
two-percent difference between a path and its own twin. Loopback only, bounded
loops. It prints figures; it asserts nothing but that every reply arrived whole.

Scenarios: streams of ``--events`` text deltas ``--gap`` seconds apart (a stream of a realistic length); the
same streams from an instant provider (the gateway's raw CPU per event; with 16 streams every core is busy, so
it measures CPU more than any wait); and, briefly, non-streamed replies from an instant provider and from one
answering after ``--delay``. Target: p50 added ≤ 5 ms and p99 added ≤ 20 ms at 16 streams.

Each stream costs the fake about 1 ms to render before its first byte, on every path alike. At the defaults,
16 streams of 60 events 10 ms apart, some 1,600 events a second cross the gateway, on the 2 cores that the
callers and the fake share with it: the gateway's CPU per event (printed) weighs on the 16-stream figures. The
figures are noisy on a shared host; compare paths within one run, and ``--only 0 --rounds 8`` measures the
first scenario longer.

The fake provider runs with its request log off, and the fake and the callers have their start-up objects
frozen out of garbage collection: otherwise one full collection of the fake's heap (~130 ms) stalls all
streams of whichever path is being measured. Each scenario prints the gateways' longest collection (the
gateway freezes its process's start-up objects itself).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import importlib
import io
import json
import logging
import multiprocessing as mp
import os
import pstats
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

import httpx

from runner.sandbox.local import start_forwarder

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = (1, 16)
SLOTS = max(CONCURRENCY)
TARGET_P50_MS, TARGET_P99_MS = 5.0, 20.0
ANTHROPIC_VERSION = "2023-06-01"
Api = Literal["chat", "messages"]

# A mid-investigation agent request: system prompt, a few tool rounds, tool definitions (about 4 KB).
SYSTEM = "You investigate an ISPM SQLite world. " * 20
TURNS = [
    m
    for i in range(4)
    for m in (
        {"role": "user", "content": f"Step {i}: which Okta users lack MFA? " * 5},
        {"role": "assistant", "content": "SELECT u.login FROM okta_users u WHERE u.mfa = 0; " * 4},
    )
] + [{"role": "user", "content": "And which of them are admins?"}]


def request_body(api: Api, stream: bool) -> bytes:
    """The agent's request in ``api``, encoded once: every path sends the same bytes for the same API."""
    body: dict[str, Any]
    if api == "chat":
        body = {
            "model": "bench",
            "messages": [{"role": "system", "content": SYSTEM}, *TURNS],
            "tools": [
                {"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object"}}}
                for i in range(4)
            ],
        }
        if stream:  # as the gateway asks of a chat provider, so the direct baseline costs the fake the same
            body["stream_options"] = {"include_usage": True}
    else:
        body = {
            "model": "bench",
            "max_tokens": 1024,
            "system": SYSTEM,
            "messages": TURNS,
            "tools": [{"name": f"tool_{i}", "input_schema": {"type": "object"}} for i in range(4)],
        }
    body["stream"] = stream
    return json.dumps(body).encode()


@dataclass(frozen=True)
class Route:
    """One way a caller reaches a model: where it connects, which API it speaks, and its baseline."""

    name: str
    """How the report names it."""
    api: Api
    """The API the caller speaks."""
    baseline: str
    """The direct path it is compared with: the one making the request the provider sees."""
    client: Callable[[int], httpx.Client]
    """A fresh keep-alive client for caller slot ``i`` (its own token on a gateway)."""
    gateway: str | None = None
    """The gateway process it goes through; ``None`` for a direct path."""


@dataclass(frozen=True)
class Scenario:
    """What the fake answers and how many requests each caller sends per round."""

    title: str
    """How the report names it."""
    stream: bool
    """Whether the callers ask for streamed replies."""
    events: int
    """Text deltas per reply (words of the reply's text)."""
    gap: float
    """Seconds between events of a stream."""
    delay: float
    """Seconds before the reply starts."""
    per_caller: dict[int, int]
    """Requests per caller per round, by concurrency."""


@dataclass
class Sample:
    """One request's timings, seconds."""

    total: float
    """Until the reply's last byte."""
    first: float
    """Until the first ``data:`` line (streams), or ``total``."""


# -- the fake provider's process -------------------------------------------------------------------------


def _run_fake(conn: Connection) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    fp = importlib.import_module("fake_provider")  # a test package, outside mypy's path
    Turn, Usage = fp.Turn, fp.Usage
    shape = {"turn": Turn()}

    def answer(seen: object) -> object:  # every request, streamed or not, gets the scenario's turn
        return shape["turn"]

    with fp.FakeProvider(responder=answer, remember=False) as fake:
        # A full collection of the fake's heap (the SDK types it renders from) paused every stream it served for
        # ~130 ms, on whichever path was being measured. Frozen, its start-up objects are never walked again.
        gc.collect()
        gc.freeze()
        conn.send(fake.url)
        while (command := conn.recv()) != "stop":
            events, gap, delay = command
            text = " ".join(f"tok{i % 10}" for i in range(events))
            shape["turn"] = Turn(text=text, usage=Usage(900, events), delay=delay, delay_between=gap)
            conn.send("ok")


# -- the gateway's process -------------------------------------------------------------------------------


def _run_gateway(conn: Connection, candidate: str, fake_url: str, sock: str) -> None:
    os.environ["OPENAI_API_KEY"] = os.environ["ANTHROPIC_API_KEY"] = "sk-bench-not-a-real-key"
    os.environ["OPENAI_BASE_URL"] = fake_url + "/v1"
    os.environ["ANTHROPIC_BASE_URL"] = fake_url
    import runner.log
    from runner.gateway.server import Gateway

    runner.log.configure()  # the gateway's real logging setup, so its cost is in the figures
    logging.getLogger().handlers[0].setLevel(logging.WARNING)  # but keep the bench's terminal readable
    profiler = cProfile.Profile(
        time.thread_time
    )  # the loop thread's CPU: waits and preemption on a busy host are not costs

    async def switch(on: bool) -> None:  # cProfile watches only the thread enabling it: the gateway's loop
        if on:
            profiler.enable()
        else:
            profiler.disable()

    pauses: list[float] = []  # each garbage collection's length: a full one stalls every stream at once
    started = [0.0]

    def timed(phase: str, _: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append(time.perf_counter() - started[0])

    gc.callbacks.append(timed)

    async def loop_cpu() -> float:  # the agents' path alone: the loop thread's CPU, without the capture's writer
        return time.thread_time()

    def spent() -> tuple[float, float, float]:  # the process's, its loop thread's and its capture writer's CPU
        if gw.capture is not None and not gw.capture.flush(timeout=60):
            raise RuntimeError("the capture's writer did not drain in 60 s")
        writer = gw.capture.writer_cpu_s() if gw.capture is not None else 0.0
        return time.process_time(), gw._loop.run(loop_cpu()), writer

    with Gateway(candidate) as gw:
        _, port = gw.listen_tcp()
        gw.listen_unix(sock)
        captured = [gw.issue_token(f"bench-{i}") for i in range(SLOTS)]
        uncaptured = [gw.issue_token(f"bench-nocap-{i}") for i in range(SLOTS)]
        for i in range(SLOTS):  # taken once and never opened again: the gateway keeps nothing of these samples
            gw.transcript(f"bench-nocap-{i}")
        conn.send((port, captured, uncaptured))
        while (command := conn.recv()) != "stop":
            if command == "cpu":
                conn.send(spent())
            elif command == "gc":  # the longest collection since the last ask
                conn.send(max(pauses, default=0.0))
                pauses.clear()
            elif command == "drop":  # a run hands each sample's transcript over at its end; the bench's never end
                if gw.capture is not None:
                    for i in range(SLOTS):
                        gw.capture.take(f"bench-{i}")
                        gw.capture.open(f"bench-{i}")
                conn.send("ok")
            else:  # ("profile", None) starts; ("profile", file) stops and writes the stats there
                _, target = command
                gw._loop.run(switch(target is None))  # the loop thread has no public handle; a bench may reach in
                if target is not None:
                    profiler.dump_stats(target)
                conn.send("ok")


# -- the callers -----------------------------------------------------------------------------------------


def _one(client: httpx.Client, api: Api, content: bytes, stream: bool) -> Sample:
    """Send one request and read the whole reply; raise unless it arrived whole."""
    route = "/v1/chat/completions" if api == "chat" else "/v1/messages"
    t0 = time.perf_counter()
    if not stream:
        client.post(route, content=content).raise_for_status()
        total = time.perf_counter() - t0
        return Sample(total, total)
    first = 0.0
    last = ""
    ended = False
    with client.stream("POST", route, content=content) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not first and line.startswith("data:"):
                first = time.perf_counter() - t0
            if line:
                last = line
                ended = ended or line in ("data: [DONE]", "event: message_stop")
    total = time.perf_counter() - t0
    if not ended:
        raise RuntimeError(f"a {api} stream ended without its final event; last line: {last[:300]!r}")
    return Sample(total, first)


def _measure(
    clients: list[httpx.Client], api: Api, content: bytes, stream: bool, callers: int, per_caller: int
) -> list[Sample]:
    """Samples of ``callers`` threads (the first ``callers`` clients) each sending ``per_caller`` requests."""
    samples: list[Sample] = []
    lock = threading.Lock()
    start = threading.Barrier(callers, timeout=120)
    failures: list[BaseException] = []

    def caller(i: int) -> None:
        try:
            start.wait()
            mine = [_one(clients[i], api, content, stream) for _ in range(per_caller)]
            with lock:
                samples.extend(mine)
        except BaseException as exc:
            failures.append(exc)
            start.abort()  # release the others rather than leave them waiting

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise RuntimeError(f"{callers} callers: {failures[0]!r}") from failures[0]
    return samples


@dataclass
class Bench:
    """The running processes and one set of keep-alive clients per path."""

    fake: Connection
    gateways: dict[str, Connection]
    paths: list[Route]
    clients: dict[str, list[httpx.Client]]

    def shape(self, scenario: Scenario) -> None:
        """Make the fake answer as ``scenario`` says."""
        self.fake.send((scenario.events, scenario.gap, scenario.delay))
        self.fake.recv()

    def ask(self, gateway: str, command: object) -> Any:
        """Send a command to a gateway process and return its answer."""
        self.gateways[gateway].send(command)
        return self.gateways[gateway].recv()


@contextlib.contextmanager
def _running() -> Iterator[Bench]:
    """The fake, a gateway per candidate, and the paths over them; all stopped on exit."""
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        fake_end, fake_child = ctx.Pipe()
        fake = ctx.Process(target=_run_fake, args=(fake_child,), daemon=True)
        fake.start()
        fake_url = fake_end.recv()
        processes = [fake]
        forwarder_processes: list[subprocess.Popen[bytes]] = []
        gateways: dict[str, Connection] = {}
        listening: dict[str, tuple[int, dict[bool, list[str]], str]] = {}
        for name in ("openai", "anthropic"):
            end, child = ctx.Pipe()
            sock = str(Path(tmp) / f"{name}.sock")
            process = ctx.Process(target=_run_gateway, args=(child, f"{name}/bench-model", fake_url, sock), daemon=True)
            process.start()
            processes.append(process)
            gateways[name] = end
            port, captured, uncaptured = end.recv()
            listening[name] = (port, {True: captured, False: uncaptured}, sock)

        def direct(i: int) -> httpx.Client:
            headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
            return httpx.Client(base_url=fake_url, headers=headers, timeout=60)

        forwarder_ports: dict[str, list[int]] = {}  # per gateway, one forwarder per caller slot, as one per sandbox
        for name, (_, _, sock) in listening.items():
            forwarder_ports[name] = []
            for _ in range(SLOTS):
                process_, port_ = start_forwarder(Path(sock))  # the local backend's own start-up of it
                forwarder_processes.append(process_)
                if port_ is None:
                    raise RuntimeError("a forwarder did not start")
                forwarder_ports[name].append(port_)

        def via(gateway: str, transport: str, capture: bool = True) -> Callable[[int], httpx.Client]:
            port, tokens, sock = listening[gateway]

            def make(i: int) -> httpx.Client:
                headers = {
                    "content-type": "application/json",
                    "authorization": f"Bearer {tokens[capture][i]}",
                    "anthropic-version": ANTHROPIC_VERSION,
                }
                if transport == "uds":
                    return httpx.Client(
                        transport=httpx.HTTPTransport(uds=sock), base_url="http://gw", headers=headers, timeout=60
                    )
                target = forwarder_ports[gateway][i] if transport == "fwd" else port
                return httpx.Client(base_url=f"http://127.0.0.1:{target}", headers=headers, timeout=60)

            return make

        paths = [
            Route("direct chat", "chat", "direct chat", direct),
            Route("direct messages", "messages", "direct messages", direct),
        ]
        through: list[tuple[str, Api, str, str]] = [  # label, the agent's API, the gateway, its baseline
            ("chat→openai", "chat", "openai", "direct chat"),
            ("messages→anthropic", "messages", "anthropic", "direct messages"),
            ("messages→openai", "messages", "openai", "direct chat"),
        ]
        for label, api, gateway, baseline in through:
            for transport in ("tcp", "uds", "fwd"):
                paths.append(Route(f"{label} {transport}", api, baseline, via(gateway, transport), gateway))
            paths.append(Route(f"{label} uds nocap", api, baseline, via(gateway, "uds", capture=False), gateway))
        clients = {p.name: [p.client(i) for i in range(SLOTS)] for p in paths}
        gc.collect()  # the callers' process too: a full collection there would delay the replies it reads
        gc.freeze()
        try:
            yield Bench(fake_end, gateways, paths, clients)
        finally:
            for group in clients.values():
                for client in group:
                    client.close()
            for end in gateways.values():
                end.send("stop")
            fake_end.send("stop")
            for process in processes:
                process.join(10)
            for forwarder in forwarder_processes:
                forwarder.kill()
                forwarder.wait(10)


@dataclass
class Spent:
    """CPU seconds a path's gateway process spent on the path's measured rounds."""

    process: float = 0.0
    """The whole process."""
    loop: float = 0.0
    """Its event loop's thread: the agents' path."""
    writer: float = 0.0
    """The capture's writer thread."""
    requests: int = 0
    """Requests answered in those rounds."""


def _run_scenario(
    bench: Bench, scenario: Scenario, rounds: int, paths: list[Route], concurrency: tuple[int, ...] = CONCURRENCY
) -> tuple[dict[tuple[str, int], list[Sample]], dict[str, Spent]]:
    """Samples per (path, callers), in alternating rounds each shuffled (seeded), after a warm-up round; and per
    path, what its gateway spent on it (read before and after each round, the capture drained)."""
    bench.shape(scenario)
    bodies = {api: request_body(api, scenario.stream) for api in ("chat", "messages")}
    results: dict[tuple[str, int], list[Sample]] = {}
    spent: dict[str, Spent] = {}
    for path in paths:  # warm every connection and both servers' code paths for this shape
        _measure(bench.clients[path.name], path.api, bodies[path.api], scenario.stream, SLOTS, 1)
    for callers in concurrency:
        for r in range(rounds):
            order = list(paths)
            random.Random(f"{callers}/{r}").shuffle(order)
            for path in order:
                per = scenario.per_caller[callers]
                before = bench.ask(path.gateway, "cpu") if path.gateway else None
                samples = _measure(bench.clients[path.name], path.api, bodies[path.api], scenario.stream, callers, per)
                results.setdefault((path.name, callers), []).extend(samples)
                if path.gateway and before is not None:
                    after = bench.ask(path.gateway, "cpu")
                    total = spent.setdefault(path.name, Spent())
                    total.process += after[0] - before[0]
                    total.loop += after[1] - before[1]
                    total.writer += after[2] - before[2]
                    total.requests += len(samples)
    return results, spent


# -- the report ------------------------------------------------------------------------------------------


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _report(bench: Bench, scenario: Scenario, results: dict[tuple[str, int], list[Sample]], note: str) -> None:
    print(f"\n{scenario.title}\n  {note}")
    print("  ms; +: path minus its direct baseline; ×: path over baseline; ttfb: to the first data: line")
    cols = ["n", "p50", "p99", "+p50", "+p99", "p50×", "p99×"]
    if scenario.stream:
        cols += ["ttfb50", "+ttfb50", "+ttfb99"]
    print(f"{'callers':>7}  {'path':<22}" + "".join(f"{c:>8}" for c in cols))
    added: dict[str, tuple[float, float]] = {}
    for callers in CONCURRENCY:
        for path in bench.paths:
            key = (path.name, callers)
            if key not in results:
                continue
            totals = [s.total * 1000 for s in results[key]]
            base = [s.total * 1000 for s in results[(path.baseline, callers)]]
            p50, p99, b50, b99 = _pct(totals, 50), _pct(totals, 99), _pct(base, 50), _pct(base, 99)
            figures = [p50, p99, p50 - b50, p99 - b99, p50 / b50, p99 / b99]
            if scenario.stream:
                firsts = [s.first * 1000 for s in results[key]]
                base_firsts = [s.first * 1000 for s in results[(path.baseline, callers)]]
                f50 = _pct(firsts, 50)
                figures += [f50, f50 - _pct(base_firsts, 50), _pct(firsts, 99) - _pct(base_firsts, 99)]
            print(f"{callers:>7}  {path.name:<22}{len(totals):>8}" + "".join(f"{f:8.2f}" for f in figures))
            if callers == max(CONCURRENCY) and not path.name.startswith("direct"):
                added[path.name] = (p50 - b50, p99 - b99)
    for path in bench.paths:
        off = (f"{path.name.removesuffix(' uds')} uds nocap", max(CONCURRENCY))
        on = (path.name, max(CONCURRENCY))
        if not path.name.endswith(" uds") or off not in results or on not in results:
            continue
        deltas = [
            _pct([s.first * 1000 for s in results[on]], p) - _pct([s.first * 1000 for s in results[off]], p)
            for p in (50, 99)
        ] + [
            _pct([s.total * 1000 for s in results[on]], p) - _pct([s.total * 1000 for s in results[off]], p)
            for p in (50, 99)
        ]
        print(
            f"  capture on − off, {path.name} at {max(CONCURRENCY)}: ttfb p50 {deltas[0]:+.2f} / p99 {deltas[1]:+.2f};"
            f" whole reply p50 {deltas[2]:+.2f} / p99 {deltas[3]:+.2f}"
        )
    for name, (a50, a99) in added.items():
        met = a50 <= TARGET_P50_MS and a99 <= TARGET_P99_MS
        print(
            f"  {name:<22} target: p50 added ≤ {TARGET_P50_MS:g} ms and p99 added ≤ {TARGET_P99_MS:g} ms "
            f"at {max(CONCURRENCY)} {'streams' if scenario.stream else 'callers'}: {'met' if met else 'NOT met'}"
            f" ({a50:+.2f} / {a99:+.2f})"
        )


def _measured(bench: Bench, scenario: Scenario, rounds: int) -> tuple[dict[tuple[str, int], list[Sample]], str]:
    """The scenario's samples, and what capture cost: CPU per event on each ``uds`` path against its ``nocap`` twin."""
    for g in bench.gateways:
        bench.ask(g, "drop")  # the transcripts of earlier scenarios
    for g in bench.gateways:
        bench.ask(g, "gc")  # forget the collections of earlier scenarios
    results, spent = _run_scenario(bench, scenario, rounds, bench.paths)
    longest_gc = max(bench.ask(g, "gc") for g in bench.gateways) * 1000
    events = max(scenario.events, 1) if scenario.stream else 1
    unit = "event" if scenario.stream else "request"
    lines = []
    pooled = {True: Spent(), False: Spent()}
    for path in bench.paths:
        twin = f"{path.name} nocap"
        if not path.name.endswith(" uds") or path.name not in spent or twin not in spent:
            continue
        on, off = spent[path.name], spent[twin]
        for capture, figures in ((True, on), (False, off)):
            pool = pooled[capture]
            pool.process, pool.loop, pool.writer = (
                pool.process + figures.process,
                pool.loop + figures.loop,
                pool.writer + figures.writer,
            )
            pool.requests += figures.requests
        lines.append(_cpu_line(path.name.removesuffix(" uds"), on, off, events, unit))
    lines.append(_cpu_line("all three", pooled[True], pooled[False], events, unit))
    return results, "\n  ".join(lines) + f"\n  longest garbage collection {longest_gc:.1f} ms"


def _cpu_line(label: str, on: Spent, off: Spent, events: int, unit: str) -> str:
    """One path's CPU per event (or request), capture on over off: the whole process, the loop, the writer."""

    def per(seconds: float, spent: Spent) -> float:
        return seconds / max(spent.requests * events, 1) * 1e6

    ratio = per(on.process, on) / max(per(off.process, off), 1e-9)
    loop_ratio = per(on.loop, on) / max(per(off.loop, off), 1e-9)
    return (
        f"CPU per {unit}, {label} uds, capture on / off: {per(on.process, on):.1f} / {per(off.process, off):.1f} µs"
        f" (×{ratio:.3f}); the loop thread's ×{loop_ratio:.3f}; the writer's {per(on.writer, on):.1f} µs"
        f" ({on.requests} / {off.requests} requests)"
    )


def _profile(bench: Bench, scenario: Scenario, target: str, rounds: int) -> None:
    """cProfile the ``openai/...`` gateway's loop under 16 streams: passed through and translated, TCP and UDS."""
    only = [p for p in bench.paths if p.name.startswith(("direct chat", "chat→openai", "messages→openai"))]
    bench.ask("openai", ("profile", None))
    started = time.perf_counter()
    cpu = bench.ask("openai", "cpu")[0]
    _run_scenario(bench, scenario, rounds, only, (SLOTS,))
    cpu = bench.ask("openai", "cpu")[0] - cpu
    bench.ask("openai", ("profile", target))
    print(
        f"\nprofile of the openai/... gateway, {scenario.title}: {time.perf_counter() - started:.1f} s wall, "
        f"{cpu:.1f} s gateway CPU (under cProfile, which times the loop thread's CPU); stats in {target}"
    )
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(target, stream=out).sort_stats(order).print_stats(30)
        print(out.getvalue())


def main() -> None:
    """Run every scenario (or the profile) and print p50/p99 per path and concurrency, with overheads."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds of each path per concurrency")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the requests per round")
    parser.add_argument("--events", type=int, default=60, help="text deltas per reply")
    # 10 ms between deltas is a model streaming 100 tokens/s; 16 such streams are 1,600 events/s in all.
    parser.add_argument("--gap", type=float, default=0.010, help="seconds between a stream's events")
    parser.add_argument("--delay", type=float, default=0.05, help="provider latency of the non-streamed scenario (s)")
    parser.add_argument("--only", type=int, action="append", metavar="N", help="run only scenario N (0-3); repeatable")
    parser.add_argument("--profile", metavar="FILE", help="only profile the gateway under 16 streams; stats to FILE")
    args = parser.parse_args()

    def per(one: int, many: int) -> dict[int, int]:
        return {1: max(1, round(one * args.scale)), SLOTS: max(1, round(many * args.scale))}

    stream_ms = args.events * args.gap * 1000
    scenarios = [
        Scenario(
            f"streamed: {args.events} events {args.gap * 1000:g} ms apart (~{stream_ms:.0f} ms a stream)",
            True,
            args.events,
            args.gap,
            0.0,
            per(6, 2),
        ),
        Scenario(
            f"streamed, instant provider: {args.events} events at once (the gateway's CPU per event)",
            True,
            args.events,
            0.0,
            0.0,
            per(10, 2),
        ),
        Scenario("non-streamed, instant provider", False, args.events, 0.0, 0.0, per(10, 2)),
        Scenario(
            f"non-streamed, provider answering in {args.delay * 1000:g} ms",
            False,
            args.events,
            0.0,
            args.delay,
            per(4, 2),
        ),
    ]
    print(f"{os.cpu_count()} CPUs; fake provider, two gateways (openai/..., anthropic/...) and callers on loopback")
    began = time.perf_counter()
    with _running() as bench:
        if args.profile:
            _profile(bench, scenarios[0], args.profile, args.rounds)
            return
        for scenario in [s for n, s in enumerate(scenarios) if args.only is None or n in args.only]:
            results, note = _measured(bench, scenario, args.rounds)
            _report(bench, scenario, results, note)
    print(f"\n{time.perf_counter() - began:.0f} s in all")


if __name__ == "__main__":
    main()
