"""Benchmark: the publisher's site, as a board serves it and as ``ispm site build`` writes it.

1. **Render**: each page rendered in-process with no page cache (templates compiled and Markdown converted once, as
   in a running board), p50 over repeats; target < 50 ms each. Baseline alongside: the run leaderboard the board
   rendered on every request before the site (``runner.record.leaderboard``) over the same runs.
2. **Serve**: each page over HTTP from a real ``ispm board serve`` (SQLite) with five published runs, p50;
   target < 50 ms each. Baseline alongside: ``/api/v1/key`` (a constant string) on the same server.
3. **50 concurrent clients**: 50 async clients each fetching every page in turn, 4 rounds; every response must be
   a 200. Latency p50/p95 against the same load on ``/api/v1/key``.
4. **Static build**: ``build_site`` of all 201 pages, median of 3; target < 10 s. Baseline alongside: copying the
   built folder (the same bytes, no rendering).

The published runs are copies of one real record (from ``runs/`` if one has a score, else a one-epoch replay
calibration over six tasks, in Docker) with shuffled grades and fresh run ids.

Run: .venv/bin/python bench/site.py
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml
from records import seed_record, synthetic_runs  # bench/ is the script's folder: sys.path[0]
from sqlalchemy import create_engine, text
from timing import median_seconds

from runner.record.leaderboard import board_rows, render_leaderboard
from runner.site import render
from runner.site.build import build_site, published_from_folders
from runner.site.links import Links
from runner.site.results import task_results
from runner.site.sources import load_sources

ISPM = str(Path(sys.executable).with_name("ispm"))
RUNS = 5
CLIENTS = 50
ROUNDS = 4
PAGES = ["/", "/tasks", "/tasks?vendor=okta&kind=verdict", "/tasks?q=lumen+okta", "/tasks/ispm-001", "/dataset",
         "/dataset/okta_users", "/leaderboard", "/scoring", "/submit"]  # fmt: skip
BASELINE = "/api/v1/key"


def _runs(tmp: Path) -> list[Path]:
    seed = seed_record(tmp, ["ispm-001", "ispm-019", "ispm-037", "ispm-073", "ispm-082", "ispm-100"])
    return synthetic_runs(seed, RUNS, tmp, "bench-site", random.Random(11))


def _p50_ms(action: Callable[[], object], repeats: int) -> float:
    return median_seconds(action, repeats) * 1000


def _verdict(ms: float, target: float) -> str:
    return "ok" if ms < target else "MISSED"


def render_bench(folders: list[Path]) -> None:
    sources = load_sources()
    runs, _ = published_from_folders(folders)
    results = task_results(runs)
    links = Links("server")
    pages: dict[str, Callable[[], str]] = {
        "/": lambda: render.contract_page(sources, links),
        "/tasks": lambda: render.tasks_page(sources, links, results, {}, runs=len(runs)),
        "/tasks?vendor=okta&kind=verdict": lambda: render.tasks_page(
            sources, links, results, {"vendor": "okta", "kind": "verdict"}, runs=len(runs)
        ),
        "/tasks/ispm-001": lambda: render.task_page(sources, links, results, "ispm-001"),
        "/dataset": lambda: render.dataset_page(sources, links),
        "/dataset/okta_users": lambda: render.table_page(sources, links, "okta_users"),
        "/leaderboard": lambda: render.leaderboard_page(sources, links, runs),
        "/scoring": lambda: render.scoring_page(sources, links),
        "/submit": lambda: render.submit_page(sources, links, None),
    }
    for build in pages.values():
        build()  # templates compiled once, as a long-running board has them
    scoring = sources.scoring_markdown
    entries = [(run.record, None) for run in runs]
    base = _p50_ms(lambda: render_leaderboard(board_rows(entries), scoring), repeats=20)
    print(f"render, in-process, no page cache (p50 of 20; baseline: the record's leaderboard page {base:.2f} ms)")
    for path, build in pages.items():
        ms = _p50_ms(build, repeats=20)
        print(f"  {path:34s} {ms:7.2f} ms   ratio {ms / base:6.1f}x   target < 50 ms: {_verdict(ms, 50)}")


class Board:
    """``ispm board serve`` in a temporary folder, with ``folders`` published."""

    def __init__(self, tmp: Path, folders: list[Path]) -> None:
        self.folder = tmp / "board"
        self.folder.mkdir()
        self.config = self.folder / "board.yaml"
        settings = {"board_id": "bench-site", "data_dir": str(self.folder / "data"), "judges": ["ref#1", "ref#2"],
                    "candidates": ["openai/bench"]}  # fmt: skip
        self.config.write_text(yaml.safe_dump(settings))
        self.port = 18000 + os.getpid() % 20000
        self.url = f"http://127.0.0.1:{self.port}"
        self.folders = folders
        self.log = (self.folder / "board.log").open("wb")
        self.process = subprocess.Popen(
            [ISPM, "board", "serve", str(self.config), "--port", str(self.port)], stdout=self.log, stderr=self.log
        )

    def wait(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + BASELINE, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise SystemExit("the board did not start: " + (self.folder / "board.log").read_text())
        subprocess.run([ISPM, "board", "token", "create", str(self.config), "bench"], check=True, capture_output=True)
        engine = create_engine(f"sqlite:///{self.folder / 'data' / 'board.sqlite'}")
        with engine.begin() as db:
            (token_id,) = db.execute(text("SELECT id FROM tokens WHERE submitter = 'bench'")).one()
            for folder in self.folders:
                db.execute(
                    text(
                        "INSERT INTO submissions (token_id, display_name, candidate, links, state, upload_sha256,"
                        " upload_bytes, image_id, image_tag, samples_done, samples_planned, created_at, updated_at,"
                        " run_id, run_dir, published_at) VALUES (:t, :n, 'openai/bench', '[]', 'published', '', 0,"
                        " '', '', 1, 1, '2026-12-01', '2026-12-01', :r, :d, '2026-12-01')"
                    ),
                    {"t": token_id, "n": folder.name, "r": folder.name, "d": str(folder)},
                )
        engine.dispose()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def serve_bench(board: Board) -> None:
    with httpx.Client(base_url=board.url, timeout=30) as client:
        for path in [*PAGES, BASELINE]:
            assert client.get(path).status_code == 200, path  # warm: templates compiled, cacheable pages cached
        base = _p50_ms(lambda: client.get(BASELINE), repeats=30)
        print(f"served over HTTP by ispm board serve (p50 of 30; baseline: {BASELINE} {base:.2f} ms)")
        for path in PAGES:
            ms = _p50_ms(lambda p=path: client.get(p), repeats=30)  # type: ignore[misc]
            print(f"  {path:34s} {ms:7.2f} ms   ratio {ms / base:6.1f}x   target < 50 ms: {_verdict(ms, 50)}")


async def _clients(url: str, paths: list[str]) -> tuple[list[float], int, float]:
    latencies: list[float] = []
    failures = 0
    # Idle connections are dropped before the server's keep-alive (5 s) ends, so no request races its close.
    limits = httpx.Limits(max_connections=CLIENTS, keepalive_expiry=2.0)

    async def one(client: httpx.AsyncClient, offset: int) -> None:
        nonlocal failures
        for i in range(ROUNDS * len(paths)):
            path = paths[(offset + i) % len(paths)]
            start = time.perf_counter()
            try:
                response = await client.get(path)
                failures += response.status_code != 200
            except httpx.TransportError:
                failures += 1
            latencies.append(time.perf_counter() - start)

    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        await asyncio.gather(*(one(client, n) for n in range(CLIENTS)))
    return latencies, failures, time.perf_counter() - started


def concurrency_bench(board: Board) -> None:
    site, site_failures, site_s = asyncio.run(_clients(board.url, PAGES))
    key, key_failures, key_s = asyncio.run(_clients(board.url, [BASELINE]))

    def q(values: list[float], p: float) -> float:
        return statistics.quantiles(values, n=100)[int(p) - 1] * 1000

    print(f"{CLIENTS} concurrent clients x {ROUNDS} rounds of every page ({len(site)} requests in {site_s:.1f} s, "
          f"{len(site) / site_s:.0f}/s; failures {site_failures}): p50 {q(site, 50):.0f} ms, p95 {q(site, 95):.0f} ms, "
          f"max {max(site) * 1000:.0f} ms")  # fmt: skip
    print(f"  baseline {BASELINE} under the same load ({len(key)} requests, {len(key) / key_s:.0f}/s; failures "
          f"{key_failures}): p50 {q(key, 50):.0f} ms, p95 {q(key, 95):.0f} ms   ratio p50 "
          f"{q(site, 50) / q(key, 50):.1f}x   held: {'ok' if site_failures == 0 else 'MISSED'}")  # fmt: skip


def build_bench(tmp: Path, folders: list[Path]) -> None:
    sources = load_sources()
    runs, reports = published_from_folders(folders)
    out = tmp / "public"
    built = build_site(sources, out, runs, reports)
    took = median_seconds(lambda: build_site(sources, out, runs, reports))
    copy = median_seconds(lambda: shutil.copytree(out, tmp / f"copy-{time.perf_counter_ns()}"))
    print(
        f"static build ({built.pages} pages, {built.bytes / 1e6:.1f} MB)  {took:6.3f} s   baseline (copying the built "
        f"folder) {copy:6.3f} s   ratio {took / copy:5.1f}x   target < 10 s: {'ok' if took < 10 else 'MISSED'}"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folders = _runs(tmp)
        render_bench(folders)
        board = Board(tmp, folders)
        try:
            board.wait()
            serve_bench(board)
            concurrency_bench(board)
        finally:
            board.stop()
        build_bench(tmp, folders)


if __name__ == "__main__":
    main()
