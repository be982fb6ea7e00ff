"""What every build of ours shares (the sandbox images, vendored wheels, the runner image, the single binary): its
error, a subprocess logged to a file, the host's pip, and the digest of a build's inputs that names what it made.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from runner.errors import IspmError
from runner.world.digest import file_sha256

BUILD_LOG_TAIL = 40
"""How many lines of a failed build's log its error ends with."""


class ImageError(IspmError):
    """An image could not be built, imported or inspected."""


def run_logged(command: list[str], log_file: Path, *, what: str) -> None:
    """Run ``command`` with its output appended to ``log_file``.

    Raises:
        ImageError: it failed; the message names ``what``, the exit code and the log, and ends with the log's tail.
    """
    with log_file.open("ab") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log_file.read_text(errors="replace").splitlines()[-BUILD_LOG_TAIL:]
        raise ImageError(f"{what} failed (exit {done.returncode}), log {log_file}:\n" + "\n".join(tail))


def run_pip(args: list[str], log_file: Path, *, what: str) -> None:
    """Run this interpreter's pip with ``args``, its output appended to ``log_file`` (see :func:`run_logged`).

    Raises:
        ImageError: pip failed.
    """
    run_logged([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], log_file, what=what)


def file_entries(files: Iterable[Path], root: Path) -> list[list[object]]:
    """``[path under root, executable bit, sha256 hex]`` of each file: the exec bit counts, since scripts run."""
    return [[p.relative_to(root).as_posix(), bool(p.stat().st_mode & 0o111), file_sha256(p)] for p in files]


def canonical_digest(doc: object) -> str:
    """``sha256:<hex>`` of ``doc`` as canonical JSON (sorted keys, no spaces): the same inputs, the same digest."""
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
