"""A spare Docker engine on this machine, started and removed by whoever needs an empty engine beside the host's (the
cluster's tests, ``bench/ray.py``): its own socket, data root and exec root under a temp folder, on no network.

It runs in its own network namespace (``unshare --net``): a ``dockerd`` started with ``--bridge=none`` deletes the
default bridge interface it finds, and outside a namespace of its own that is the host's ``docker0``, after which
every bridge-networked container and ``docker build`` on the main engine fails. ``--config-file`` names an empty
file: the host's ``/etc/docker/daemon.json`` sets a data root of its own. A Ray worker whose ``DOCKER_HOST`` points
at :attr:`Engine.socket` is a node with a distinct engine.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker

STARTS_WITHIN_S = 60.0
"""How long the engine may take to answer its first ping (about half a second here, idle)."""
HOST_BRIDGE = Path("/sys/class/net/docker0")


class Engine:
    """A running spare engine: its folder, socket and process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the engine on this folder (again, after :meth:`stop`: its images are still there) and wait until it
        answers."""
        folder = self.folder
        command = [
            "unshare", "--net", "--",
            "dockerd",
            "--config-file", str(folder / "config.json"),
            "--data-root", str(folder / "data"),
            "--exec-root", str(folder / "exec"),
            "--pidfile", str(folder / "dockerd.pid"),
            "-H", f"unix://{folder / 'docker.sock'}",
            "--bridge=none", "--iptables=false", "--ip-masq=false",
            "--storage-driver", "fuse-overlayfs",
        ]  # fmt: skip
        with (folder / "dockerd.log").open("ab") as log:
            # unshare execs dockerd: the process is the engine itself.
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait_until_it_answers(self)

    @property
    def socket(self) -> Path:
        return self.folder / "docker.sock"

    @property
    def host(self) -> str:
        """Its ``DOCKER_HOST``."""
        return f"unix://{self.socket}"

    def client(self, timeout: int = 60) -> Any:
        """A Docker client of this engine."""
        return docker.DockerClient(base_url=self.host, timeout=timeout)

    @property
    def data_root(self) -> Path:
        return self.folder / "data"

    def stop(self) -> None:
        """SIGTERM, as an operator's ``systemctl stop docker`` would, and wait for it to go."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def spare_engine(data_root_bytes: int | None = None) -> Iterator[Engine]:
    """A fresh, empty engine for the block; stopped, its processes ended and its folder removed afterwards. The host's
    ``docker0`` is as it was (checked). ``data_root_bytes``: its data root is a tmpfs of that size, a disk that
    fills."""
    bridge_before = HOST_BRIDGE.exists()
    # Short: a Unix socket's path is limited to 108 bytes.
    folder = Path(tempfile.mkdtemp(prefix="ispm-engine-", dir="/tmp"))
    (folder / "config.json").write_text("{}\n")
    engine = Engine(folder)
    try:
        if data_root_bytes is not None:
            (folder / "data").mkdir()
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={data_root_bytes}", "tmpfs", str(folder / "data")], check=True
            )
        engine.start()
        yield engine
    finally:
        engine.stop()
        _end_what_is_left(folder)
        if HOST_BRIDGE.exists() != bridge_before:
            raise RuntimeError("the spare engine changed the host's docker0")


def _wait_until_it_answers(engine: Engine) -> None:
    deadline = time.monotonic() + STARTS_WITHIN_S
    while time.monotonic() < deadline:
        if engine.process is None or engine.process.poll() is not None:
            raise RuntimeError(f"dockerd exited: {(engine.folder / 'dockerd.log').read_text()[-2000:]}")
        if engine.socket.exists():
            client = engine.client(timeout=5)
            try:
                client.ping()
                return
            except Exception:
                pass
            finally:
                client.close()
        time.sleep(0.2)
    raise RuntimeError(f"the spare engine did not answer within {STARTS_WITHIN_S:g} s")


def _end_what_is_left(folder: Path) -> None:
    """Kill the engine's own containerd and shims (their command lines name its folder), unmount what it left mounted
    under the folder, and remove the folder."""
    mine = str(folder)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if mine.encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted((m for m in mounts if m.startswith(mine)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)
