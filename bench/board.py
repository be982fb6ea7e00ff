"""Benchmark: the board's leaderboard with 1,000 published runs, under 200 concurrent clients.

    .venv/bin/python bench/board.py [--runs 1000] [--clients 200] [--seconds 5]

The runs are copies of one real calibration record (``runs/*/record.json`` if there is one, else a two-task
replay run made here) with fresh run ids and shuffled scores, written to a fresh board's SQLite as published
submissions. A real ``ispm board serve`` on loopback answers; the clients are plain asyncio connections (keep-alive,
one request at a time each) so that the client costs little of the machine's two cores.

For ``GET /`` and ``GET /leaderboard`` it prints p50 and p99 latency and requests per second, against the
baseline run alongside: ``GET /api/v1/key`` (a constant few hundred bytes: the server's own floor) under the same
load. Targets (issue 21): p99 under 250 ms and at least 300 requests/s. It also prints the first render after the
board starts (every record read once), which the cache then spares every later request.

It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvloop
import yaml
from records import seed_record  # bench/ is the script's folder: sys.path[0]

from runner.board.config import BoardConfig
from runner.board.db import Submission, Token, utcnow
from runner.board.serve import open_board

ISPM = str(Path(sys.executable).with_name("ispm"))
P99_TARGET_S = 0.250
RATE_TARGET = 300.0


def _publish(data_dir: Path, runs: int, seed: dict[str, Any]) -> None:
    """``runs`` synthetic published submissions in a fresh board's database, each with its run folder."""
    rng = random.Random(21)
    config = BoardConfig.model_validate(
        {"board_id": "bench", "data_dir": data_dir, "judges": ["ref#1", "ref#2"], "candidates": ["openai/bench"]}
    )
    ctx = open_board(config)
    now = utcnow()
    seed_text = json.dumps(seed)
    with ctx.sessions() as session, session.begin():
        token = Token(submitter="bench", token_sha256=os.urandom(32).hex(), created_at=now, open_limit=1)
        session.add(token)
        session.flush()
        for n in range(runs):
            record = json.loads(seed_text)
            record["run_id"] = f"20261201T000000Z-{n:06x}"
            record["calibration"] = None
            correctness = record["scores"]["dimensions"]["answer_correctness"]
            correctness["mean"] = round(rng.random(), 4)
            folder = data_dir / "runs" / f"submission-{n + 1}"
            folder.mkdir(parents=True)
            (folder / "record.json").write_text(json.dumps(record))
            (folder / "report.html").write_text("<!doctype html><title>report</title>")
            sub = Submission(
                token_id=token.id, display_name=f"agent {n}", candidate="openai/bench", links=[],
                state="published", upload_sha256="0" * 64, upload_bytes=0, image_id="sha256:" + "0" * 64,
                image_tag="", worker=None, run_id=record["run_id"], run_dir=str(folder), samples_done=1,
                samples_planned=1, bundle_sha256="0" * 64, created_at=now, updated_at=now, published_at=now,
            )  # fmt: skip
            session.add(sub)
    ctx.engine.dispose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _client(port: int, path: str, until: float, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    # As a browser asks: it accepts gzip.
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip, deflate\r\n\r\n".encode()
    try:
        while time.monotonic() < until:
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.decode(errors="replace"))
            latencies.append(time.perf_counter() - started)
    finally:
        writer.close()


def _load(port: int, path: str, clients: int, seconds: float) -> tuple[float, float, float]:
    """p50 and p99 latency (s) and requests/s of ``clients`` keep-alive clients on ``path`` for ``seconds``."""
    latencies: list[float] = []

    async def run() -> float:
        until = time.monotonic() + seconds
        started = time.perf_counter()
        await asyncio.gather(*(_client(port, path, until, latencies) for _ in range(clients)))
        return time.perf_counter() - started

    took = uvloop.run(run())  # the client's own loop costs less of the two cores
    ordered = sorted(latencies)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.99) - 1], len(ordered) / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        seed = seed_record(tmp, ["ispm-001", "ispm-010"])
        data_dir = tmp / "board"
        _publish(data_dir, args.runs, seed)
        config = tmp / "board.yaml"
        config.write_text(
            yaml.safe_dump(
                {"board_id": "bench", "data_dir": str(data_dir), "judges": ["ref#1", "ref#2"],
                 "candidates": ["openai/bench"]}
            )
        )  # fmt: skip
        port = _free_port()
        env = {**os.environ, "ISPM_LOG_FILE": str(tmp / "ispm.jsonl")}
        server = subprocess.Popen(
            [ISPM, "board", "serve", str(config), "--port", str(port), "--workers", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )  # fmt: skip
        try:
            _wait(port)
            started = time.perf_counter()
            size = _size(port, "/leaderboard")  # the first render: every record read once
            cold = time.perf_counter() - started
            print(f"board bench: {args.runs} published runs, {args.clients} clients, {args.seconds:g} s per route")
            print(
                f"first GET /leaderboard after start (renders, reads every record)  {cold:6.2f} s   "
                f"page {size / 1e6:.2f} MB"
            )
            base = _load(port, "/api/v1/key", args.clients, args.seconds)
            for path in ("/leaderboard", "/"):  # "/" is the site's contract page (runner/site)
                p50, p99, rate = _load(port, path, args.clients, args.seconds)
                ok = "ok" if p99 < P99_TARGET_S and rate >= RATE_TARGET else "MISSED"
                print(
                    f"GET {path:<13} p50 {p50 * 1e3:6.1f} ms  p99 {p99 * 1e3:6.1f} ms  {rate:6.0f} req/s   "
                    f"vs baseline p99 {p99 / base[1]:4.1f}x  rate {rate / base[2]:4.2f}x   "
                    f"target p99 < 250 ms, >= 300 req/s: {ok}"
                )
            print(
                f"baseline GET /api/v1/key  p50 {base[0] * 1e3:6.1f} ms  p99 {base[1] * 1e3:6.1f} ms  "
                f"{base[2]:6.0f} req/s"
            )
        finally:
            server.terminate()
            server.wait(timeout=30)


def _wait(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the board did not start")


def _size(port: int, path: str) -> int:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while chunk := sock.recv(1 << 20):
            received += chunk
    return len(received.partition(b"\r\n\r\n")[2])


if __name__ == "__main__":
    main()
