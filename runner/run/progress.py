"""Progress of a run on stderr: a live rich display on a terminal, one plain line per sample otherwise."""

from __future__ import annotations

import threading
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.progress import Progress as RichProgress


class Progress:
    """Counts done, running and failed samples; subclasses show them. This base shows nothing."""

    def __init__(self) -> None:
        """Start with nothing counted."""
        self.total = 0
        self.done = 0
        self.failed = 0
        self.running = 0
        self._lock = threading.Lock()

    def begin(self, total: int, done: int) -> None:
        """The run plans ``total`` samples, of which ``done`` were graded by earlier attempts."""
        self.total, self.done = total, done

    def started(self, pair: tuple[str, int]) -> None:
        """A sample's container is starting."""
        with self._lock:
            self.running += 1
        self.show()

    def finished(self, pair: tuple[str, int], status: str) -> None:
        """A sample was graded; ``status`` is its collection status."""
        with self._lock:
            self.running = max(0, self.running - 1)
            self.done += 1
            self.failed += status != "ok"
        self.show(pair, status)

    def show(self, pair: tuple[str, int] | None = None, status: str | None = None) -> None:
        """Redraw (subclasses)."""

    def end(self) -> None:
        """The run stopped."""


class PlainProgress(Progress):
    """One line per graded sample, for logs and pipes."""

    def __init__(self, stream: TextIO) -> None:
        """Write to ``stream``."""
        super().__init__()
        self.stream = stream

    def show(self, pair: tuple[str, int] | None = None, status: str | None = None) -> None:
        """Print the sample that just finished with the counts."""
        if pair is None:
            return
        self.stream.write(
            f"[{self.done}/{self.total}] {pair[0]} epoch {pair[1]}: {status}"
            f" (running {self.running}, failed {self.failed})\n"
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
            console=Console(file=stream),
            transient=False,
        )
        self._task: TaskID | None = None

    def begin(self, total: int, done: int) -> None:
        """Start the live display."""
        super().begin(total, done)
        self._bar.start()
        self._task = self._bar.add_task("run", total=total, completed=done, running=0, failed=0)

    def show(self, pair: tuple[str, int] | None = None, status: str | None = None) -> None:
        """Update the bar."""
        if self._task is not None:
            self._bar.update(self._task, completed=self.done, running=self.running, failed=self.failed)

    def end(self) -> None:
        """Stop the live display, leaving its last state on screen."""
        self._bar.stop()


def make_progress(stream: TextIO) -> Progress:
    """The rich display when ``stream`` is a terminal, plain lines otherwise."""
    return LiveProgress(stream) if stream.isatty() else PlainProgress(stream)
