"""A real board process on loopback, and a real PostgreSQL cluster in a temporary folder, for the board tests.

``BoardProcess`` writes a board config, starts ``ispm board serve`` and waits for ``/api/v1/key``.
``postgres_cluster`` runs Debian's ``initdb`` and ``pg_ctl`` as the ``postgres`` user (they refuse root) on a
free loopback port with a socket in the cluster folder, and stops the cluster afterwards.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from lanes import needs
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

    def __init__(
        self, folder: Path, settings: dict[str, Any], env: dict[str, str] | None = None, *, workers: int = 1
    ) -> None:
        self.folder = folder
        self.workers = workers
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
                [ISPM, "board", "serve", str(self.config), "--port", str(self.port), "--workers", str(self.workers)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env,
            )  # fmt: skip
        deadline = time.monotonic() + 180  # a loaded 2-core machine starts a board in seconds to a minute
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            try:
                if httpx.get(self.url + "/api/v1/key", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("the board did not start: " + self.log.read_text(errors="replace"))

    def __enter__(self) -> BoardProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def peak_rss(self) -> int:
        """The board process's peak resident memory so far, in bytes (``VmHWM``)."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        (line,) = [row for row in status.splitlines() if row.startswith("VmHWM:")]
        return int(line.split()[1]) * 1024

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
    needs("PostgreSQL", "postgres")
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


def board_in_process(data_dir: Path, **settings: Any) -> Any:
    """A board's context (database migrated, signing key made) for driving its worker in this process."""
    from runner.board.config import BoardConfig
    from runner.board.serve import open_board

    config = BoardConfig.model_validate(
        {"board_id": "test-board", "data_dir": data_dir, "judges": ["ref#1", "ref#2"], **settings}
    )
    return open_board(config)


def add_submission(ctx: Any, image_tag: str, *, state: str = "received", name: str = "in process") -> int:
    """A submission of ``image_tag`` (already loaded in the engine) by a new token, written straight to the board's
    database in ``state``, held by no one: the next claim takes it."""
    import docker

    from runner.board.db import Submission, Token, utcnow

    client = docker.from_env()
    try:
        image_id = str(client.images.get(image_tag).id)
    finally:
        client.close()
    now = utcnow()
    with ctx.sessions() as session, session.begin():
        token = Token(submitter=name, token_sha256=os.urandom(32).hex(), created_at=now, expires_at=None, open_limit=9)
        session.add(token)
        session.flush()
        sub = Submission(
            token_id=token.id, display_name=name, candidate=ctx.config.candidates[0], links=[], state=state,
            upload_sha256="0" * 64, upload_bytes=0, image_id=image_id, image_tag=image_tag, worker=None,
            samples_done=0, samples_planned=0, created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(sub)
        session.flush()
        return int(sub.id)


def board_tag(source: str, name: str) -> str:
    """Tag ``source`` as a board would tag a submission's image (a worker may remove that tag; ``source`` stays)."""
    import docker

    tag = f"ispm-board/{name}:{os.urandom(4).hex()}"
    client = docker.from_env()
    try:
        repository, _, version = tag.partition(":")
        client.images.get(source).tag(repository, version)
    finally:
        client.close()
    return tag


def contract_image(base_tag: str, context: Path, tag: str, program: str) -> str:
    """Build ``tag``: the base image with the agent contract label, running the Python ``program``; its tag."""
    import docker

    entrypoint = json.dumps(["/usr/bin/python3", "-c", program])
    (context / "Dockerfile").write_text(
        f'FROM {base_tag}\nLABEL ispm.agent.contract="ispm.agent/v1"\nENTRYPOINT {entrypoint}\n', encoding="utf-8"
    )
    client = docker.from_env()
    try:
        client.images.build(path=str(context), tag=tag, rm=True)
    finally:
        client.close()
    return tag


def tiny_contract_image(client: Any, folder: Path, tag: str, content: str) -> str:
    """Build ``tag``: a few bytes from scratch with the agent contract label (nothing can run it); its image id."""
    folder.mkdir(parents=True)
    (folder / "hello").write_text(content, encoding="utf-8")
    (folder / "Dockerfile").write_text(
        'FROM scratch\nCOPY hello /hello\nLABEL ispm.agent.contract="ispm.agent/v1"\n', encoding="utf-8"
    )
    image, _ = client.images.build(path=str(folder), tag=tag, rm=True)
    return str(image.id)


CONTRACT_LABELS = {"ispm.agent.contract": "ispm.agent/v1"}


def tar_bytes(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    """An uncompressed tar of ``members`` (name: bytes), after symlinks ``links`` (name: target)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, target in (links or {}).items():
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def synthetic_image(labels: dict[str, str] | None, content: bytes = b"hi") -> tuple[dict[str, bytes], dict[str, Any]]:
    """A one-layer image as ``docker save`` writes it, every digest true: its members and its manifest entry."""
    layer = tar_bytes({"hello": content})
    config = json.dumps(
        {"architecture": "amd64", "os": "linux", "config": {"Labels": labels},
         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_hex(layer)}"]}}
    ).encode()  # fmt: skip
    config_name, layer_name = f"{_hex(config)}.json", f"{_hex(layer)[:16]}/layer.tar"
    entry = {"Config": config_name, "RepoTags": None, "Layers": [layer_name]}
    return {config_name: config, layer_name: layer}, entry


def synthetic_save(*images: tuple[dict[str, bytes], dict[str, Any]]) -> dict[str, bytes]:
    """The members of a ``docker save`` of ``images`` (from :func:`synthetic_image`), ``manifest.json`` last."""
    members: dict[str, bytes] = {}
    for image_members, _ in images:
        members.update(image_members)
    members["manifest.json"] = json.dumps([entry for _, entry in images]).encode()
    return members


def oci_save(members: dict[str, bytes], entry: dict[str, Any], *, gzip_layers: bool = False) -> dict[str, bytes]:
    """The image of :func:`synthetic_image` in the OCI layout (``blobs/sha256``, ``index.json``), as newer engines
    and OCI tools write it; its layers gzip-compressed when ``gzip_layers``."""
    config = members[entry["Config"]]
    layers = [members[name] for name in entry["Layers"]]
    if gzip_layers:
        layers = [gzip.compress(layer, mtime=0) for layer in layers]
    media = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if gzip_layers else "")
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": f"sha256:{_hex(config)}",
                    "size": len(config)},
         "layers": [{"mediaType": media, "digest": f"sha256:{_hex(layer)}", "size": len(layer)} for layer in layers]}
    ).encode()  # fmt: skip
    index = json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": f"sha256:{_hex(manifest)}", "size": len(manifest)}]}
    ).encode()  # fmt: skip
    blobs = {f"blobs/sha256/{_hex(blob)}": blob for blob in (config, manifest, *layers)}
    return {"oci-layout": b'{"imageLayoutVersion": "1.0.0"}', **blobs, "index.json": index}


@contextmanager
def engine_client(*prefixes: str) -> Iterator[Any]:
    """A client of the real Docker engine; on leaving, every tag starting with one of ``prefixes`` (this module's
    own, never another's) is removed."""
    import docker

    engine = docker.from_env()
    try:
        yield engine
    finally:
        for image in engine.images.list():
            for tag in image.tags:
                if tag.startswith(prefixes):
                    with contextlib.suppress(docker.errors.DockerException):
                        engine.images.remove(tag, force=True)
        engine.close()
