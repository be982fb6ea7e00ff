"""The Docker backends the sandbox test modules share, and what a run left on the engine. Import the fixtures you
need into your module, as with ``report_runs``.

The importing module defines ``RUN``: the ``ispm.run`` label its samples carry, swept when the module is done, so
a failing test leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runner.sandbox.docker import DockerBackend


@pytest.fixture(scope="module")
def docker_backend(request: pytest.FixtureRequest) -> Iterator[DockerBackend]:
    """One backend for the whole module (it sweeps dead runners' leftovers when it starts)."""
    backend = DockerBackend()
    yield backend
    backend.sweep(request.module.RUN)
    backend.close()


@pytest.fixture(scope="module")
def archive_backend() -> Iterator[DockerBackend]:
    """Collects through ``get_archive`` even where the volume's mount point is readable."""
    backend = DockerBackend(sweep_on_start=False, direct_read=False)
    yield backend
    backend.close()


def containers_of(run_id: str) -> list[str]:
    """Every container (running or not) labelled with ``run_id``."""
    import docker

    client = docker.from_env()
    try:
        return [c["Id"] for c in client.api.containers(all=True, filters={"label": f"ispm.run={run_id}"})]
    finally:
        client.close()


def run_locked_down(tag: str, entrypoint: str, args: list[str]) -> str:
    """What ``entrypoint args`` prints in a container of ``tag`` locked down as a sample's is: no network, a read-only
    root, a small ``/tmp``, no capabilities, no new privileges, an unprivileged user."""
    import docker

    engine = docker.from_env()
    try:
        out = engine.containers.run(
            tag,
            args,
            entrypoint=[entrypoint],
            environment={"HOME": "/tmp"},
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": "rw,noexec,nosuid,size=64m"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            user="10001:10001",
            remove=True,
        )
    finally:
        engine.close()
    return str(out.decode()).strip()
