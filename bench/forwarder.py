"""Benchmark: what the sandbox's forwarder costs per stream event, against the same events without it.

A stand-in gateway (a Unix socket served by this process) sends one SSE-sized event at a time and waits until the
reader has it, as a streamed reply's deltas arrive one by one. The reader takes them either straight from the socket
(the baseline) or from the real ``runner/sandbox/forwarder.py``, run as the sandbox runs it (``python3 -I``), in
front of that socket. Rounds alternate between the two, so other load on the host weighs on both alike. It prints
the round trip per event on each path, their ratio, and the forwarder's own CPU per event (from ``/proc``).

The ``fwd`` paths of ``bench/gateway.py`` measure the forwarder inside the whole path an agent's request takes.

Run: .venv/bin/python bench/forwarder.py [--events 5000] [--rounds 4]   (about 10 s)
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.sandbox.local import start_forwarder  # noqa: E402  # the bench runs from a checkout, not an install

Pair = tuple[socket.socket, socket.socket]  # (the gateway's side, the reader)
EVENT = b"data: " + b'{"type":"content_block_delta","delta":{"type":"text_delta","text":"tok"}}' + b"\n\n"


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _relay(inside: socket.socket, reader: socket.socket, events: int) -> float:
    """Send ``events`` events one at a time, each once the last was read; seconds per event."""
    started = time.perf_counter()
    for _ in range(events):
        inside.sendall(EVENT)
        got = 0
        while got < len(EVENT):
            got += len(reader.recv(65536))
    return (time.perf_counter() - started) / events


@contextmanager
def _paths(folder: Path) -> Iterator[tuple[Pair, Pair, int]]:
    """(gateway side, reader) straight over the socket; the same through the forwarder; the forwarder's pid."""
    path = str(folder / "gateway.sock")
    gateway = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    gateway.bind(path)
    gateway.listen(4)
    child, port = start_forwarder(Path(path))  # as the local backend starts it
    try:
        if port is None:
            raise RuntimeError("the forwarder did not start")
        direct = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        direct.connect(path)
        direct_inside, _ = gateway.accept()
        forwarded = socket.create_connection(("127.0.0.1", port))
        forwarded_inside, _ = gateway.accept()
        yield (direct_inside, direct), (forwarded_inside, forwarded), child.pid
        for sock in (direct, direct_inside, forwarded, forwarded_inside, gateway):
            sock.close()
    finally:
        child.kill()
        child.wait(10)


def main() -> None:
    """Alternate rounds of both paths and print the round trips, their ratio and the forwarder's CPU."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5000, help="events per round and path")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, _paths(Path(tmp)) as (direct, forwarded, pid):
        _relay(*direct, 200)  # warm both
        _relay(*forwarded, 200)
        straight: list[float] = []
        through: list[float] = []
        cpu = 0.0
        for _ in range(args.rounds):
            straight.append(_relay(*direct, args.events))
            before = _cpu_s(pid)
            through.append(_relay(*forwarded, args.events))
            cpu += _cpu_s(pid) - before
    base, fwd = statistics.median(straight) * 1e6, statistics.median(through) * 1e6
    print(f"{os.cpu_count()} CPUs; {args.rounds} rounds of {args.events} events of {len(EVENT)} bytes, one at a time")
    print(f"  straight from the gateway's socket: {base:7.1f} µs per event (baseline)")
    print(f"  through the forwarder:              {fwd:7.1f} µs per event ({fwd / base:.2f}x, +{fwd - base:.1f} µs)")
    print(f"  the forwarder's CPU:                {cpu / (args.rounds * args.events) * 1e6:7.1f} µs per event")


if __name__ == "__main__":
    main()
