"""How much latency the gateway adds per request, against calling the fake provider directly.

    .venv/bin/python bench/gateway.py [--requests 500] [--rounds 8] [--delay 0.05]

Three processes, as in a real run: the fake provider, the gateway (with its structlog setup), and the callers
(threads, one keep-alive httpx client each, as an agent holds one). The direct baseline and the gateway paths
(loopback TCP and the Unix socket the sandbox mounts) run in many short alternating rounds, so drift (other
work on the host) hits them alike; every path sends the same body from the same callers to the same fake
provider process. Loopback only, bounded loops. It prints figures; it asserts nothing.

Target: p50 overhead under 2 ms, at 2 and at 16 callers, with the instant provider. There, 16 callers keep
every core busy, so the overhead is about (callers / cores) × the gateway's CPU per request (printed): it
measures that CPU more than any wait. The second scenario, a provider answering after ``--delay``, is
context: the latency an agent sees added when the model takes time, as a real one does.

Agents' requests are parsed by ``httptools`` (llhttp) and the provider hop is the standard library's
``http.client``: well-kept parsers on both hops, no protocol code of our own. Moving the agent side off
``http.server`` (whose header parsing goes through the ``email`` package) cut the gateway's CPU per request from
about 0.36 to 0.31 ms and the 16-caller overhead by about 1 ms. A hand-written parser and client were faster
still; they were dropped, as a liability where the gateway faces hostile agents and carries provider keys.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = (2, 16)
# A mid-investigation agent request: system prompt, a few tool rounds, tool definitions (about 4 KB).
BODY = {
    "model": "bench",
    "messages": [
        {"role": "system", "content": "You investigate an ISPM SQLite world. " * 20},
        *[
            m
            for i in range(4)
            for m in (
                {"role": "user", "content": f"Step {i}: which Okta users lack MFA? " * 5},
                {"role": "assistant", "content": "SELECT u.login FROM okta_users u WHERE u.mfa = 0; " * 4},
            )
        ],
    ],
    "tools": [
        {"type": "function", "function": {"name": f"tool_{i}", "parameters": {"type": "object"}}} for i in range(4)
    ],
}


def _run_fake(conn: Connection, delay: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_provider import FakeProvider

    with FakeProvider(delay) as fake:
        conn.send(fake.openai_base)
        conn.recv()


def _run_gateway(conn: Connection, base_url: str, sock: str, samples: int) -> None:
    os.environ["OPENAI_API_KEY"] = "sk-bench-not-a-real-key"
    os.environ["OPENAI_BASE_URL"] = base_url
    import runner.log
    from runner.gateway.server import Gateway

    runner.log.configure()  # the gateway's real logging setup, so its cost is in the figures
    logging.getLogger().handlers[0].setLevel(logging.WARNING)  # but keep the bench's terminal readable
    with Gateway("openai/bench-model") as gw:
        _, port = gw.listen_tcp()
        gw.listen_unix(sock)
        conn.send((port, [gw.issue_token(f"bench-{i}") for i in range(samples)]))
        cpu = time.process_time()
        conn.recv()
        cpu = time.process_time() - cpu
        conn.send((sum(gw.usage(f"bench-{i}").requests for i in range(samples)), cpu))


def _measure(make_client: Callable[[int], httpx.Client], callers: int, per_caller: int) -> list[float]:
    """Latencies (seconds) of ``callers`` threads each sending ``per_caller`` requests, after a warm-up."""
    latencies: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(callers, timeout=60)
    failures: list[BaseException] = []

    def caller(i: int) -> None:
        try:
            run(i)
        except BaseException as exc:
            failures.append(exc)
            start.abort()  # release the others rather than leave them waiting

    def run(i: int) -> None:
        with make_client(i) as client:
            for _ in range(5):  # warm the connection and both servers' code paths
                client.post("/v1/chat/completions", json=BODY).raise_for_status()
            start.wait()
            mine = []
            for _ in range(per_caller):
                t0 = time.perf_counter()
                client.post("/v1/chat/completions", json=BODY).raise_for_status()
                mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return latencies


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _scenario(delay: float, per_caller: dict[int, int], rounds: int) -> tuple[dict[tuple[str, int], list[float]], str]:
    """Latencies per (path, callers) against a fake answering after ``delay`` s, and a gateway CPU note."""
    ctx = mp.get_context("spawn")
    fake_end, fake_child = ctx.Pipe()
    gw_end, gw_child = ctx.Pipe()
    with tempfile.TemporaryDirectory() as tmp:
        sock = str(Path(tmp) / "gateway.sock")
        fake = ctx.Process(target=_run_fake, args=(fake_child, delay), daemon=True)
        fake.start()
        base_url = fake_end.recv()
        gateway = ctx.Process(target=_run_gateway, args=(gw_child, base_url, sock, max(CONCURRENCY)), daemon=True)
        gateway.start()
        port, tokens = gw_end.recv()
        auth = [{"authorization": f"Bearer {t}"} for t in tokens]
        paths: dict[str, Callable[[int], httpx.Client]] = {
            "direct": lambda i: httpx.Client(base_url=base_url.removesuffix("/v1"), timeout=10),
            "gateway tcp": lambda i: httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth[i], timeout=10),
            "gateway uds": lambda i: httpx.Client(
                transport=httpx.HTTPTransport(uds=sock), base_url="http://gw", headers=auth[i], timeout=10
            ),
        }
        results: dict[tuple[str, int], list[float]] = {}
        for callers in CONCURRENCY:
            for _ in range(rounds):
                for name, make in paths.items():
                    results.setdefault((name, callers), []).extend(_measure(make, callers, per_caller[callers]))
        gw_end.send("stop")
        forwarded, cpu = gw_end.recv()
        fake_end.send("stop")
        gateway.join(10)
        fake.join(10)
    return results, f"{forwarded} requests forwarded, gateway CPU {cpu / forwarded * 1000:.3f} ms per request"


def _report(title: str, results: dict[tuple[str, int], list[float]], note: str) -> float:
    print(f"\n{title}\n  {note}; ms; +: path minus direct; ×: path over direct")
    cols = ("p50", "p99", "+p50", "+p99", "p50 ×", "p99 ×")
    print(f"{'callers':>9}  {'path':<12}" + "".join(f"{c:>8}" for c in cols))
    worst = 0.0
    for callers in CONCURRENCY:
        d50, d99 = (_pct(results[("direct", callers)], p) * 1000 for p in (50, 99))
        for name in ("direct", "gateway tcp", "gateway uds"):
            p50, p99 = (_pct(results[(name, callers)], p) * 1000 for p in (50, 99))
            worst = max(worst, p50 - d50)
            figures = (p50, p99, p50 - d50, p99 - d99, p50 / d50, p99 / d99)
            print(f"{callers:>9}  {name:<12}" + "".join(f"{f:8.3f}" for f in figures))
    print(f"  worst p50 overhead: {worst:.3f} ms (target < 2 ms: {'met' if worst < 2 else 'NOT met'})")
    return worst


def main() -> None:
    """Run both scenarios and print p50/p99 per path and concurrency, with overheads and ratios."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500, help="requests per path and round, instant provider")
    parser.add_argument("--delay", type=float, default=0.05, help="provider latency of the second scenario (s)")
    parser.add_argument("--rounds", type=int, default=8, help="alternating rounds of each path")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; fake provider, gateway and callers in three processes on loopback")

    instant = {c: max(1, args.requests // c) for c in CONCURRENCY}
    results, note = _scenario(0.0, instant, args.rounds)
    _report("instant provider: the gateway's full cost, CPU-saturated at 16 callers", results, note)

    per_round = max(5, round(4.0 / max(args.delay, 0.001) / args.rounds))  # about 4 s per path in all
    paced = dict.fromkeys(CONCURRENCY, per_round)
    results, note = _scenario(args.delay, paced, args.rounds)
    _report(f"provider answering in {args.delay * 1000:.0f} ms: the latency an agent sees added", results, note)


if __name__ == "__main__":
    main()
