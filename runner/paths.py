"""Where the bundled data lives.

In a source checkout (or an editable install) ``world/``, ``tasks/`` and ``docs/`` sit next to ``runner/``.
An installed wheel carries them as ``runner/_bundle/{world,tasks,docs}``. Both layouts resolve here,
and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _bundled(name: str) -> Path:
    inside = _PACKAGE / "_bundle" / name
    if inside.is_dir():
        return inside
    return _PACKAGE.parent / name


def world_dir() -> Path:
    """The folder holding the snapshot, its manifest and the agent-visible docs."""
    return _bundled("world")


def tasks_dir() -> Path:
    """The folder holding the task definitions and the public ground truth."""
    return _bundled("tasks")


def scoring_doc() -> Path:
    """``docs/scoring.md``, "How a run becomes a score": every report embeds it, so it must ship in the wheel."""
    return _bundled("docs") / "scoring.md"
