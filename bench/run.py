"""Benchmark: a calibration run of every task at the official repetition and concurrency.

Runs 127 tasks x 5 epochs (gold replay agent, ``ref`` in both judge slots, concurrency 2) and prints the wall time,
then compares the per-sample cost inside the run with bare ``docker run --rm <base> true`` measured alongside.
Takes about 3 minutes on a 2-core machine. ``EPOCHS`` in the environment shortens it.

Run: .venv/bin/python bench/run.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from runner.pipeline import run_calibration
from runner.sandbox.images import ensure_images

BARE_SAMPLES = 20


def bare_docker_run(image: str) -> float:
    """Median seconds of ``docker run --rm IMAGE true``."""
    times = []
    for _ in range(BARE_SAMPLES):
        start = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    epochs = int(os.environ.get("EPOCHS", "5"))
    base = ensure_images()["base"].tag
    bare = bare_docker_run(base)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_calibration("replay", epochs=epochs, concurrency=2, run_dir=Path(tmp) / "run")
        wall = time.perf_counter() - start
    record = result.record
    samples = record.samples
    per_sample = statistics.median(
        s.timings.create + s.timings.start + s.timings.agent + s.timings.collect + s.timings.remove for s in samples
    )
    correctness = record.scores.dimensions["answer_correctness"].mean if record.scores else None
    print(
        f"calibration run: {len(samples)} samples ({epochs} epochs), concurrency 2, wall {wall:.1f} s "
        f"({len(samples) / wall:.2f} samples/s), answer correctness {correctness}"
    )
    print(
        f"per sample (create..remove, median) {per_sample * 1000:.0f} ms   baseline docker run --rm base true "
        f"{bare * 1000:.0f} ms   ratio {per_sample / bare:.2f}x"
    )


if __name__ == "__main__":
    main()
