"""The per-sample ``/output`` volume: a size-capped tmpfs, made, recognised from the host, held and removed.

See docs/sandbox.md ("/output outlives the agent") for why it is a volume and why it is held.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import docker.errors
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_incrementing

from runner.sandbox.backend import SandboxNaming
from runner.sandbox.docker.engine import ENGINE_ERRORS, engine_errors, name_part

AGENT_UID = 10001
"""The uid the agent runs as, and the owner of its ``/output``."""


def create(api: Any, spec: SandboxNaming) -> tuple[str, Path | None]:
    """Make the sample's ``/output`` volume: its name, and its mount point on the host if the engine says.

    Raises:
        SandboxError: the engine refused.
    """
    with engine_errors("cannot create the output volume", spec.sample_id):
        volume = api.create_volume(
            name=f"ispm-out-{name_part(spec.sample_id)}-{secrets.token_hex(4)}",
            driver="local",
            driver_opts={
                "type": "tmpfs",
                "device": "tmpfs",
                # The kernel enforces the size; nr_inodes bounds a flood of empty files.
                "o": f"size={spec.output_bytes},nr_inodes=4096,uid={AGENT_UID},gid={AGENT_UID},mode=0755,"
                "nosuid,nodev,noexec",
            },
            labels=spec.labels(),
        )
    mount_point = volume.get("Mountpoint")
    return str(volume["Name"]), Path(str(mount_point)) if mount_point else None


def _in_use(exc: BaseException) -> bool:
    return isinstance(exc, ENGINE_ERRORS) and not isinstance(exc, docker.errors.NotFound)


def remove(api: Any, name: str) -> None:
    """Remove the volume ``name`` (gone already is fine).

    Raises:
        docker.errors.DockerException, requests.exceptions.RequestException: still refused after 5 attempts.
    """
    # A volume can stay "in use" for a moment after its container is gone.
    for attempt in Retrying(
        retry=retry_if_exception(_in_use),
        stop=stop_after_attempt(5),
        wait=wait_incrementing(start=0.05, increment=0.05),
        reraise=True,
    ):
        with attempt, contextlib.suppress(docker.errors.NotFound):
            api.remove_volume(name, force=True)


def remove_with_container(
    api: Any, container: str | None, name: str | None
) -> tuple[str | None, str | None, list[str]]:
    """Force-remove ``container`` (paused or not), then the volume ``name`` once no container holds it.

    Returns what is left of each (``None``: gone) and the problems met, for the caller to raise together with its
    own; a container already gone counts as removed.
    """
    problems: list[str] = []
    if container is not None:
        try:
            api.remove_container(container, force=True)
            container = None
        except docker.errors.NotFound:
            container = None
        except ENGINE_ERRORS as exc:
            problems.append(f"container: {exc}")
    if name is not None and container is None:
        try:
            remove(api, name)
            name = None
        except ENGINE_ERRORS as exc:
            problems.append(f"volume: {exc}")
    return container, name, problems


def _is_sample_tmpfs(info: os.stat_result, fs: os.statvfs_result, size: int) -> bool:
    # What the sample's /output volume looks like from the host: a directory owned by the agent's uid, on a
    # filesystem of exactly the size we asked for.
    return stat.S_ISDIR(info.st_mode) and info.st_uid == AGENT_UID and fs.f_blocks * fs.f_frsize == size


def readable_here(path: Path | None, size: int) -> bool:
    """Whether ``path`` is the sample's tmpfs and this process may read it.

    The engine's mount point is only ours to read if we share its host and mount namespace.
    """
    if path is None:
        return False
    try:
        info, fs = os.stat(path), os.statvfs(path)
    except OSError:
        return False
    return _is_sample_tmpfs(info, fs, size) and os.access(path, os.R_OK | os.X_OK)


def hold(path: Path, size: int) -> int | None:
    """An open descriptor of the sample's tmpfs at ``path``, or None if ``path`` is not that tmpfs.

    The descriptor keeps the tmpfs alive after the engine (lazily) unmounts it when the container stops. It
    is checked through the descriptor itself: no race between the check and what is held.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _is_sample_tmpfs(os.fstat(fd), os.fstatvfs(fd), size):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None
