"""The Docker engine: connecting, the sweep of labelled leftovers, and engine errors as ``SandboxError``."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import docker
import docker.errors
import requests.exceptions

from runner import log
from runner.errors import SandboxError
from runner.sandbox.backend import (
    LABEL_ATTEMPT,
    LABEL_BOARD,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SANDBOX,
    SweepReport,
    owner_alive,
    sweep_scratch,
)
from runner.sandbox.collect import ChunkReader, CollectLimits, OutputFile, files_from_tar

_log = log.get(__name__)

ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)
"""What the Docker SDK raises when the engine refuses or cannot be reached."""

_ARCHIVE_CHUNK = 256 * 1024


def output_archive(
    api: Any, container: str | None, output_bytes: int, limits: CollectLimits, sample_id: str
) -> dict[str, OutputFile]:
    """``/output`` of ``container``, streamed with ``get_archive`` and read under ``limits``.

    The stream is bounded by the volume's size (``output_bytes``) plus one tar header per possible inode.

    Raises:
        SandboxError: ``/output`` could not be read or its archive parsed.
    """
    limit = output_bytes + 4096 * 1024 + 1024**2
    try:
        chunks, _ = api.get_archive(container, "/output", chunk_size=_ARCHIVE_CHUNK)
        reader = io.BufferedReader(ChunkReader(chunks, limit), buffer_size=_ARCHIVE_CHUNK)
        files = files_from_tar(reader, limits)
        while reader.read(1024**2):  # drain the stream so the connection can be reused
            pass
    except (*ENGINE_ERRORS, OSError) as exc:
        raise SandboxError(f"cannot read /output: {exc}", sample_id=sample_id) from exc
    except Exception as exc:  # tarfile's errors: the engine's archive is not one we can read
        raise SandboxError(f"cannot parse the /output archive: {exc}", sample_id=sample_id) from exc
    return files


@contextmanager
def engine_errors(failed: str, sample_id: str | None = None) -> Iterator[None]:
    """Turn an engine error inside the block into ``SandboxError("<failed>: <error>")``.

    Raises:
        SandboxError: the engine failed inside the block.
    """
    try:
        yield
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"{failed}: {exc}", sample_id=sample_id) from exc


def name_part(text: str) -> str:
    """``text`` made safe and short enough for a container or volume name."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", text)[:40]


def connect() -> Any:
    """A Docker client for the engine named by the environment.

    Raises:
        SandboxError: the engine cannot be reached.
    """
    with engine_errors("cannot reach the Docker engine"):
        client = docker.from_env()
        client.ping()
    return client


ENGINE_ANSWER_S = 10.0
"""How long an engine has to answer a health check (a ping) before it counts as failed."""


def engine_fault(client: Any | None = None, timeout_s: float = ENGINE_ANSWER_S) -> str | None:
    """Why the engine is not fit to run a sample (it does not answer a ping); ``None`` when it answers. ``client``'s
    engine, else the one the environment names, through a fresh connection that waits ``timeout_s`` at most."""
    if client is not None:
        try:
            client.ping()
        except ENGINE_ERRORS as exc:
            return f"cannot reach the Docker engine: {exc}"
        return None
    try:
        fresh = docker.from_env(timeout=max(1, round(timeout_s)))
    except ENGINE_ERRORS as exc:
        return f"cannot reach the Docker engine: {exc}"
    try:
        return engine_fault(fresh)
    finally:
        fresh.close()


def engine_id(client: Any) -> str:
    """Which engine this is, as ``docker info`` says: ``<host name>:<data root> (<engine ID>)``. The ID alone does
    not tell engines apart (Docker 20.10 derives it from ``/etc/docker/key.json``, which every engine of a host
    shares); two engines of one host never share a data root.

    Raises:
        SandboxError: the engine did not answer.
    """
    with engine_errors("cannot ask the Docker engine who it is"):
        info = client.info()
    return f"{info.get('Name')}:{info.get('DockerRootDir')} ({info.get('ID')})"


def sweep(
    client: Any | None = None,
    run_id: str | None = None,
    *,
    attempt: str | None = None,
    board: str | None = None,
    orphans_only: bool = False,
) -> SweepReport:
    """Remove every container, volume and network labelled ``ispm.sandbox`` (of ``run_id`` only, if given; of
    the run attempt ``attempt`` only, by its ``ispm.attempt`` label, if given; of the board ``board`` only, by its
    ``ispm.board`` label, if given: boards sharing an engine never sweep each other's).

    An attempt's sweep spares every other attempt's resources, those of the same run included: a process that lost
    a run to another (a board worker's lease) ends its own sandboxes of it and leaves the new owner's running.

    With ``orphans_only`` it spares resources whose owner process is still running on this host: that is
    what every backend start does, so a runner killed with ``kill -9`` leaves nothing after the next start,
    while a concurrent runner's samples are left alone. Dead owners' scratch folders go too, on a sweep of every
    run of every board (a live owner's never: :func:`~runner.sandbox.backend.sweep_scratch`).

    Raises:
        SandboxError: the engine cannot be reached or listed. Failures to remove one resource are reported
            in ``failures`` instead.
    """
    engine = client if client is not None else connect()
    api = engine.api
    wanted = [f"{LABEL_SANDBOX}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
    if attempt is not None:
        wanted.append(f"{LABEL_ATTEMPT}={attempt}")
    if board is not None:
        wanted.append(f"{LABEL_BOARD}={board}")
    report = SweepReport()

    def spare(labels: dict[str, str] | None) -> bool:
        return orphans_only and owner_alive((labels or {}).get(LABEL_OWNER, ""))

    with engine_errors("cannot list sandbox resources"):
        containers = api.containers(all=True, filters={"label": wanted})
        volumes = api.volumes(filters={"label": wanted}).get("Volumes") or []
        networks = api.networks(filters={"label": wanted})
    # Containers first: a volume or network still in use cannot be removed.
    kinds: list[tuple[str, list[Any], Callable[[Any], object], Callable[[Any], str], list[str]]] = [
        ("container", containers, lambda i: api.remove_container(i["Id"], force=True), lambda i: str(i["Id"])[:12],
         report.containers),
        ("volume", volumes, lambda i: api.remove_volume(i["Name"], force=True), lambda i: str(i["Name"]),
         report.volumes),
        ("network", networks, lambda i: api.remove_network(i["Id"]), lambda i: str(i["Name"]), report.networks),
    ]  # fmt: skip
    for kind, items, remove, name, removed_names in kinds:
        for item in items:
            if spare(item.get("Labels")):
                continue
            try:
                remove(item)
                removed_names.append(name(item))
            except docker.errors.NotFound:
                pass
            except ENGINE_ERRORS as exc:
                report.failures.append(f"{kind} {name(item)}: {exc}")
    if run_id is None and attempt is None and board is None:
        removed, failures = sweep_scratch()
        report.directories += removed
        report.failures += failures
    if report.containers or report.volumes or report.networks or report.directories:
        _log.info(
            "sandbox.swept",
            run=run_id,
            attempt=attempt,
            board=board,
            containers=len(report.containers),
            volumes=len(report.volumes),
            networks=len(report.networks),
            directories=len(report.directories),
        )
    return report
