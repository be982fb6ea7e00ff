"""A cgroup of ours above each sample's container, so that its pids limit being reached is known after the
container is gone.

The engine removes a container's own cgroup, and its counters, the moment the container stops: a fork bomb that
stops in time and exits 0 would leave no trace. So where the engine keeps its cgroups with its ``cgroupfs`` driver
in this host's ``/sys/fs/cgroup`` (a sibling ``docker`` folder proves it), each sample's container is made under a
parent cgroup ``/ispm-sandbox-<random>`` of ours. The parent sets no limit (the container's own stays); its
``pids.peak`` (Linux 6.11 and later) is the most processes the container ever had at once, and the limit was
reached when that equals it. (``pids.events`` would not do: on a cgroup v1 host a refused fork is counted in the
forking cgroup only, the container's own.) Elsewhere (the systemd driver, another host, an older kernel) a hit is
seen only while the container runs, as before.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner import log

_log = log.get(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "ispm-sandbox-"


@dataclass(frozen=True)
class SampleCgroup:
    """One sample's parent cgroup."""

    parent: str
    """The engine's ``CgroupParent``: ``/ispm-sandbox-<random>``."""
    pids_dir: Path
    """Its folder in the pids hierarchy, with ``pids.peak``."""
    hierarchies: tuple[Path, ...]
    """Every hierarchy's root, where the engine may have made the parent's folder too (all are removed)."""

    def pids_reached(self, limit: int) -> bool:
        """Whether the container ever held ``limit`` processes at once (False if the kernel cannot say)."""
        try:
            peak = (self.pids_dir / "pids.peak").read_text(encoding="ascii").strip()
        except OSError:
            return False
        return peak.isdigit() and int(peak) >= limit

    def remove(self) -> None:
        """Remove the parent's folders (empty once the container is gone; a failure is logged, never raised)."""
        for root in self.hierarchies:
            folder = root / self.parent.lstrip("/")
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass  # never made in this hierarchy, or already swept (an empty parent is another start's to sweep)
            except OSError as exc:
                _log.warning("sandbox.cgroup_not_removed", folder=str(folder), error=str(exc))


def pids_hierarchy(engine_info: dict[str, Any], root: Path = CGROUP_ROOT) -> tuple[Path, tuple[Path, ...]] | None:
    """The pids hierarchy and every hierarchy root, where the engine's cgroups are this host's; else None."""
    if engine_info.get("CgroupDriver") != "cgroupfs":
        return None
    roots: tuple[Path, ...]
    if str(engine_info.get("CgroupVersion")) == "2":
        controllers = root / "cgroup.controllers"
        if not controllers.is_file() or "pids" not in controllers.read_text(encoding="ascii").split():
            return None
        pids, roots = root, (root,)
    else:
        pids = root / "pids"
        roots = tuple(p for p in sorted(root.iterdir()) if p.is_dir() and not p.is_symlink()) if root.is_dir() else ()
    if not (pids / "docker").is_dir():
        return None  # not the engine's host, or not its cgroup tree
    return pids, roots


def make(found: tuple[Path, tuple[Path, ...]] | None) -> SampleCgroup | None:
    """A fresh parent cgroup that counts its processes' peak, or None where there is no hierarchy of ours."""
    if found is None:
        return None
    hierarchy, roots = found
    parent = f"/{PREFIX}{secrets.token_hex(6)}"
    folder = hierarchy / parent.lstrip("/")
    try:
        folder.mkdir()
        if not (folder / "pids.peak").is_file():
            raise OSError("this kernel has no pids.peak")
    except OSError as exc:
        _log.warning("sandbox.cgroup_not_made", folder=str(folder), error=str(exc))
        with contextlib.suppress(OSError):
            folder.rmdir()
        return None
    return SampleCgroup(parent=parent, pids_dir=folder, hierarchies=roots)


def sweep(found: tuple[Path, tuple[Path, ...]] | None) -> list[str]:
    """Remove the parent cgroups that killed runners left (a folder still in use refuses its removal and stays)."""
    removed: list[str] = []
    if found is None:
        return removed
    for root in found[1]:
        for folder in sorted(root.glob(f"{PREFIX}*")):
            with contextlib.suppress(OSError):
                folder.rmdir()
                removed.append(str(folder))
    return removed
