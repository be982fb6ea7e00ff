"""Shared timing helper for the bench scripts: medians, never single samples."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(action: Callable[[], object], repeats: int = 3) -> float:
    """Median wall time of ``repeats`` runs of ``action``, in seconds."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
