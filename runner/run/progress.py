"""Progress of a run on stderr: a live rich display on a terminal, one plain line per sample otherwise.

**Time projection.** Once a sample is done in this attempt, the display projects the run's end: the time already
used (earlier attempts included) plus this attempt's pace, wall seconds per sample done, times the samples left. It
shows the projected total against the run limit, and says so loudly while a run is heading past the limit, when
stopping it still saves the candidate's tokens (past the limit a run gets no score at all).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress

from runner.sample_key import SampleKey


class Progress:
    """Counts done, running and failed samples; subclasses show them. This base shows nothing."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Start with nothing counted; ``clock`` measures this attempt's pace."""
        self.total = 0
        self.done = 0
        self.failed = 0
        self.running = 0
        self.limit_s: float | None = None
        self.used_s = 0.0
        self._done_before = 0
        self._clock = clock
        self._began = clock()
        self._lock = threading.Lock()

    def begin(self, total: int, done: int, *, limit_s: float | None = None, used_s: float = 0.0) -> None:
        """The run plans ``total`` samples, of which ``done`` were graded by earlier attempts that used ``used_s``
        of the run limit ``limit_s``."""
        self.total, self.done = total, done
        self.limit_s, self.used_s, self._done_before = limit_s, used_s, done
        self._began = self._clock()

    def projected_total_s(self) -> float | None:
        """The run's projected wall time, all attempts, at this attempt's pace; ``None`` before a sample is done."""
        done_here = self.done - self._done_before
        if done_here <= 0:
            return None
        elapsed = self._clock() - self._began
        return self.used_s + elapsed + (self.total - self.done) * elapsed / done_here

    def projection(self) -> str:
        """``projected 3h12m of the 12h limit``, a warning when heading past it, or empty before any sample."""
        total = self.projected_total_s()
        if total is None or self.limit_s is None:
            return ""
        if total > self.limit_s:
            return (
                f"HEADING PAST THE {duration(self.limit_s)} RUN LIMIT: projected {duration(total)}; "
                "past the limit the run gets no score"
            )
        return f"projected {duration(total)} of the {duration(self.limit_s)} limit"

    def started(self, key: SampleKey) -> None:
        """A sample's container is starting."""
        with self._lock:
            self.running += 1
        self.show()

    def finished(self, key: SampleKey, status: str) -> None:
        """A sample was graded; ``status`` is its collection status."""
        with self._lock:
            self.running = max(0, self.running - 1)
            self.done += 1
            self.failed += status != "ok"
        self.show(key, status)

    def show(self, key: SampleKey | None = None, status: str | None = None) -> None:
        """Redraw (subclasses)."""

    def end(self) -> None:
        """The run stopped."""


class PlainProgress(Progress):
    """One line per graded sample, for logs and pipes."""

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic) -> None:
        """Write to ``stream``; ``clock`` measures the pace for the projection."""
        super().__init__(clock)
        self.stream = stream

    def show(self, key: SampleKey | None = None, status: str | None = None) -> None:
        """Print the sample that just finished with the counts."""
        if key is None:
            return
        projection = self.projection()
        self.stream.write(
            f"[{self.done}/{self.total}] {key.task_id} epoch {key.epoch}: {status}"
            f" (running {self.running}, failed {self.failed}{'; ' + projection if projection else ''})\n"
        )
        self.stream.flush()


class LiveProgress(Progress):
    """A live bar with done/total, running, failed and the ETA."""

    def __init__(self, stream: TextIO) -> None:
        """Draw on ``stream`` (a terminal)."""
        super().__init__()
        self._bar = RichProgress(
            TextColumn("samples"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("running {task.fields[running]}  failed {task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[projection]}"),
            console=Console(file=stream),
            transient=False,
        )
        self._task: TaskID | None = None

    def begin(self, total: int, done: int, *, limit_s: float | None = None, used_s: float = 0.0) -> None:
        """Start the live display."""
        super().begin(total, done, limit_s=limit_s, used_s=used_s)
        self._bar.start()
        self._task = self._bar.add_task("run", total=total, completed=done, running=0, failed=0, projection="")

    def show(self, key: SampleKey | None = None, status: str | None = None) -> None:
        """Update the bar."""
        if self._task is not None:
            self._bar.update(
                self._task,
                completed=self.done,
                running=self.running,
                failed=self.failed,
                projection=self.projection(),
            )

    def end(self) -> None:
        """Stop the live display, leaving its last state on screen."""
        self._bar.stop()


def duration(seconds: float) -> str:
    """``3h12m``, ``12h``, ``4m`` or ``25s``."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    return f"{minutes}m" if minutes and not secs else (f"{minutes}m{secs:02d}s" if minutes else f"{secs}s")


def make_progress(stream: TextIO) -> Progress:
    """The rich display when ``stream`` is a terminal, plain lines otherwise."""
    return LiveProgress(stream) if stream.isatty() else PlainProgress(stream)
