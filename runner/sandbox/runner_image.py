"""The runner image, ``ispm/runner``: ``ispm`` itself in a container, so an auditor needs only Docker.

``compose.yaml`` runs it with no network, a read-only root and only the runs folder mounted::

    make runner-image
    docker-compose run --rm runner ispm audit /runs/<run-id>

It is built without a registry, like the sandbox images: on top of the base image, with a build context
prepared here. The base image has no pip and the build has no network, so the host's pip builds the ``ispm``
wheel and installs it, with its pinned dependencies, into ``site/`` in the context; the Dockerfile copies that
folder into the image's ``dist-packages``. The wheel carries the world, the task set and the scoring page.

The tag is ``ispm/runner:<digest12>`` over the Dockerfile folder, every source the wheel is built from and the
base image's digest, so an unchanged runner is never rebuilt.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker.errors

from runner import log
from runner.sandbox.build import ImageError, canonical_digest, file_entries, run_pip
from runner.sandbox.images import (
    REPOSITORY_PREFIX,
    ImageRef,
    docker_build,
    ensure_images,
    images_dir,
    repo_root,
    tag_for,
)

_log = log.get(__name__)

NAME = "runner"
# What the wheel is built from (pyproject's force-include and its readme), plus the image's own folder.
SOURCES: tuple[str, ...] = (
    "pyproject.toml",
    "README.md",
    "runner",
    "world",
    "tasks",
    "docs/scoring.md",
    "images/runner",
)
_SKIPPED_PARTS = {"__pycache__", "_bundle"}


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for name in SOURCES:
        path = root / name
        found += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [p for p in found if not _SKIPPED_PARTS & set(p.parts) and p.suffix != ".pyc"]


def input_digest(base_digest: str, root: Path | None = None) -> str:
    """``sha256:<hex>`` over the base image's digest and every source file (path, exec bit, content)."""
    top = root or repo_root()
    return canonical_digest({"name": NAME, "base": base_digest, "files": file_entries(_files(top), top)})


def _pip(*args: str, log_file: Path) -> None:
    run_pip(list(args), log_file, what=f"pip {args[0]} for the runner image")


def prepare_context(context: Path, log_file: Path) -> None:
    """Fill ``context`` with the Dockerfile folder and ``site/``: the ispm wheel and its pinned dependencies."""
    shutil.copytree(images_dir() / NAME, context, dirs_exist_ok=True)
    wheels = context / "wheel"
    # --no-build-isolation: hatchling is already in the project's environment (the `test` extra) and
    # the wheel's content does not depend on where the build backend came from.
    _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(repo_root()), log_file=log_file)
    wheel = next(wheels.glob("*.whl"))
    site = context / "site"
    _pip("install", "-q", "--no-warn-script-location", "--target", str(site), str(wheel), log_file=log_file)
    shutil.rmtree(wheels)
    # Console scripts carry the host interpreter's path; the image has its own /usr/local/bin/ispm.
    shutil.rmtree(site / "bin", ignore_errors=True)


def ensure_runner_image(client: Any | None = None) -> ImageRef:
    """Make sure ``ispm/runner`` exists for the current sources (building the base first if needed)."""
    engine = client if client is not None else docker.from_env()
    base = ensure_images(engine)["base"]
    digest = input_digest(base.input_digest)
    tag = tag_for(NAME, digest)
    started = time.monotonic()
    try:
        image = engine.images.get(tag)
        built = False
    except docker.errors.ImageNotFound:
        image = _build(engine, tag, digest, base.tag)
        built = True
    image.tag(f"{REPOSITORY_PREFIX}{NAME}", "latest")
    seconds = round(time.monotonic() - started, 3) if built else 0.0
    _log.info("image.ready", image=NAME, tag=tag, built=built, seconds=seconds)
    return ImageRef(name=NAME, tag=tag, id=str(image.id), input_digest=digest, built=built, seconds=seconds)


def _build(engine: Any, tag: str, digest: str, base_tag: str) -> Any:
    work_root = repo_root() / ".cache" / "images"
    work_root.mkdir(parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix="runner-", dir=work_root))
    log_file = work_root / f"runner-{digest[7:19]}.log"
    log_file.write_bytes(b"")
    _log.info("image.build", image=NAME, tag=tag)
    try:
        prepare_context(context, log_file)
        image = docker_build(engine, context, tag, digest, {"BASE": base_tag}, name=NAME)
    finally:
        shutil.rmtree(context, ignore_errors=True)
    return image


def main() -> int:
    """``python -m runner.sandbox.runner_image``: ensure the runner image and print its tag and id."""
    log.configure()
    try:
        ref = ensure_runner_image()
    except (ImageError, docker.errors.DockerException) as exc:
        print(f"runner image: error: {exc}", file=sys.stderr)
        return 1
    state = f"built in {ref.seconds:.1f}s" if ref.built else "reused"
    print(f"{ref.tag:<32} {ref.id[:19]}  {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
