"""A real board process on loopback, and a real PostgreSQL cluster in a temporary folder, for the board tests.

``BoardProcess`` writes a board config, starts ``ispm board serve`` and waits for ``/api/v1/key``.
``postgres_cluster`` runs Debian's ``initdb`` and ``pg_ctl`` as the ``postgres`` user (they refuse root) on a
free loopback port with a socket in the cluster folder, and stops the cluster afterwards.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from test_report_browser import browser

__all__ = ["browser"]  # the report tests' headless chromium fixture, shared

ISPM = str(Path(sys.executable).with_name("ispm"))

PG_BIN = Path("/usr/lib/postgresql")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class BoardProcess:
    """``ispm board serve`` on a free loopback port, with a config written from ``settings``."""

    def __init__(self, folder: Path, settings: dict[str, Any], env: dict[str, str] | None = None) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.config = folder / "board.yaml"
        self.config.write_text(yaml.safe_dump({"data_dir": str(folder / "data"), **settings}), encoding="utf-8")
        self.env = {**os.environ, **(env or {})}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "board.log"

    def token(self, submitter: str, *extra: str) -> str:
        done = subprocess.run(
            [ISPM, "board", "token", "create", str(self.config), submitter, *extra],
            capture_output=True, text=True, env=self.env, check=True, timeout=120,
        )  # fmt: skip
        return done.stdout.strip()

    def start(self) -> BoardProcess:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [ISPM, "board", "serve", str(self.config), "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            try:
                if httpx.get(self.url + "/api/v1/key", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("the board did not start: " + self.log.read_text(errors="replace"))

    def kill(self) -> None:
        """``kill -9``: no cleanup of any kind."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """A fresh PostgreSQL cluster in its own temporary folder; yields its SQLAlchemy URL (``postgresql+psycopg://``).

    The folder is not under pytest's ``tmp_path``, whose parents only root may enter.
    """
    versions = sorted(PG_BIN.glob("*/bin/initdb"))
    if not versions:
        raise AssertionError("Debian's postgresql is not installed: run `make postgres`")
    bindir = versions[-1].parent
    user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="ispm-pg-"))
    folder.chmod(0o755)
    data = folder / "pgdata"
    if user is not None:
        os.chown(folder, user.pw_uid, user.pw_gid)
    port = free_port()

    def as_postgres(*argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if user is not None else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    as_postgres(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "board", "--no-sync")
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "pg.log"), "-w", "start")
    try:
        yield f"postgresql+psycopg://board@127.0.0.1:{port}/postgres"
    finally:
        as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(folder, ignore_errors=True)
