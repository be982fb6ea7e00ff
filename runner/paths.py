"""Where the bundled data lives, and where caches go.

In a source checkout (or an editable install) ``world/``, ``tasks/``, ``docs/`` and ``images/`` sit next to
``runner/``. An installed wheel carries the first three as ``runner/_bundle/{world,tasks,docs}``; the single-file
binary (``make binary``, :mod:`runner.binary`) unpacks all four the same way, as ``runner/_bundle/...`` beside the
frozen package. Every layout resolves here, and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs

_PACKAGE = Path(__file__).resolve().parent
BUNDLE = _PACKAGE / "_bundle"


def _bundled(name: str) -> Path:
    inside = BUNDLE / name
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


def images_dir() -> Path:
    """The sandbox images' build inputs, one sub-folder per image (``ispm images`` builds from them)."""
    return _bundled("images")


def cache_dir() -> Path:
    """Build outputs and caches: the image record, vendored wheels, the binary.

    A checkout keeps them in its own ``.cache/`` (gitignored). A bundled install keeps them in the user's cache
    folder: a wheel's package folder may be read-only, and the binary's is unpacked afresh for each run.
    """
    if BUNDLE.is_dir():
        return Path(platformdirs.user_cache_dir("ispm"))
    return _PACKAGE.parent / ".cache"
