"""The lockdown every sandbox container gets, in one place: a sample of ``ispm run`` and an Inspect session alike.

Why each protection is there: docs/sandbox.md, "Lockdown".
"""

from __future__ import annotations

from typing import Any

from docker.types import LogConfig, Mount

SHM_BYTES = 16 * 1024**2
"""``/dev/shm``: small, and private to the container (``ipc_mode=private``)."""


def tmpfs_options(size: int, *, executable: bool = False) -> str:
    """Mount options of a scratch tmpfs of ``size`` bytes: world-writable and sticky, ``noexec`` unless asked."""
    return f"rw,nosuid,nodev,{'exec' if executable else 'noexec'},size={size},mode=1777"


def host_config(
    api: Any,
    *,
    mounts: list[Mount],
    tmpfs: dict[str, str],
    pids: int,
    memory_bytes: int,
    cpus: float,
    engine_init: bool,
    log_driver: str,
    cgroup_parent: str | None = None,
) -> Any:
    """The engine's host config of a locked-down container: read-only root, no capabilities,
    ``no-new-privileges``, no network, a private IPC namespace, and caps on pids, memory (no swap) and CPU.

    ``tmpfs`` maps each scratch mount point to its options (:func:`tmpfs_options`); ``cgroup_parent`` puts the
    container's cgroup under one of ours (:mod:`runner.sandbox.docker.cgroup`).
    """
    return api.create_host_config(
        mounts=mounts,
        tmpfs=tmpfs,
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        init=engine_init,
        network_mode="none",
        ipc_mode="private",
        shm_size=SHM_BYTES,
        pids_limit=pids,
        mem_limit=memory_bytes,
        memswap_limit=memory_bytes,
        nano_cpus=int(cpus * 1e9),
        log_config=LogConfig(type=log_driver),
        cgroup_parent=cgroup_parent,
    )
