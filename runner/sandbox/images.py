"""Build every sandbox image without a container registry, tagged by a digest of its inputs.

The base image is a Debian ``minbase`` rootfs made by ``images/base/build.sh`` (mmdebstrap fed the
machine's own apt sources), imported with ``docker import``. The agent images are ``docker build``
on top of it with ``pull=False``. Nothing is ever pulled.

Each image is tagged ``ispm/<name>:<digest12>`` where the digest covers everything that decides its
content: the files of its folder under ``images/`` (so the build script, ``SOURCE_DATE_EPOCH`` and the
SQL tool for the base), the ``docker import`` changes, the host's apt sources for the base, and the
parent's digest for the derived images. If the tag exists, the image is reused: a warm
``ensure_images()`` is a few Docker API calls. The resolved references are written to
``.cache/images.json``.

What the digest does not cover: the mirror's content (a Debian point release behind the same apt
sources keeps the tag) and the mmdebstrap version. Pin the sources to a snapshot URI to pin the
former; two builds from the same mirror state are byte-identical (see ``build_rootfs``).

**Third-party agents** get their code into the build context through the host's pip, pinned by version and sha256
(``runner.sandbox.vendoring``); the digest covers the pinned requirements and the step, never the downloaded bytes.

**An upstream base, as an option.** A machine that does reach a registry may set
``ISPM_UPSTREAM_BASE`` to an upstream Debian image pinned by digest (``debian@sha256:<hex>``, or a
local image id ``sha256:<hex>``). The base is then ``docker build`` of ``images/base/Dockerfile.upstream``
on it, with the same customize hook; the pinned reference replaces the apt sources in the digest. An
unpinned reference (a bare tag) is refused: a tag can move, and the benchmark's images must not.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from filelock import FileLock
from pydantic import BaseModel, ConfigDict

from runner import log, paths
from runner.sandbox.build import BUILD_LOG_TAIL, ImageError, canonical_digest, file_entries, run_logged
from runner.sandbox.vendoring import WHEEL_TARGET, Vendoring, vendor_into, wheel_cache
from runner.world.digest import file_sha256

_log = log.get(__name__)

DIGEST_SCHEME = "ispm-images/1"
# Images built at once within a generation: two cores here, and each build waits on pip and the engine's disk.
BUILD_WORKERS = 3
REPOSITORY_PREFIX = "ispm/"
# Labels on every image we make, so a sweep can find them and an audit can check the digest.
LABEL_DIGEST = "ispm.input-digest"
LABEL_NAME = "ispm.image"
# Applied at `docker import`: a bare rootfs tarball carries no image configuration at all.
IMPORT_CHANGES: tuple[str, ...] = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    # The root filesystem is read-only in the sandbox; do not even try to write bytecode.
    "ENV PYTHONDONTWRITEBYTECODE=1",
    "WORKDIR /",
    'CMD ["/bin/bash"]',
)
UPSTREAM_ENV = "ISPM_UPSTREAM_BASE"
# A reference pinned to content: `name@sha256:<64 hex>` (a registry manifest digest) or `sha256:<64 hex>` (an image
# id on this engine). Anything else, `debian:bookworm` above all, names something that can change under us.
_PINNED = re.compile(r"^(?:[a-z0-9][a-z0-9._/:-]*@)?sha256:[0-9a-f]{64}$")


class ImageRef(BaseModel):
    """One image as resolved on this Docker engine."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str
    """Short name: ``base``, ``agent-null``, ``agent-replay``, ``agent-reference``, ``agent-claude-code``, ..."""
    tag: str
    """``ispm/<name>:<first 12 hex of input_digest>``."""
    id: str
    """The engine's image ID, ``sha256:…``."""
    input_digest: str
    """``sha256:<hex>`` over the image's inputs."""
    built: bool
    """True if this call built the image, False if an existing one was reused."""
    seconds: float
    """Wall time this call spent building it (0 when reused)."""
    rootfs_sha256: str | None = None
    """Base only: sha256 of the rootfs tarball, which is also the image's single layer diff ID."""
    upstream: str | None = None
    """Base only: the pinned upstream image it was built on, when not built from Debian packages."""


class ImageRecord(BaseModel):
    """The content of ``.cache/images.json``."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    scheme: str = DIGEST_SCHEME
    images: dict[str, ImageRef]


@dataclass(frozen=True)
class ImageSpec:
    """How one image is made: from a rootfs (the base) or a Dockerfile on top of ``parent``."""

    name: str
    folder: str
    parent: str | None = None
    vendor: Vendoring | None = None
    """Third-party code for the build context, pinned by the folder's ``requirements.txt`` (see the module docs)."""


SPECS: tuple[ImageSpec, ...] = (
    ImageSpec("base", "base"),
    ImageSpec("agent-null", "agents/null", parent="base"),
    ImageSpec("agent-replay", "agents/replay", parent="base"),
    ImageSpec("agent-reference", "agents/reference", parent="base"),
    ImageSpec("agent-claude-code", "agents/claude-code", parent="base", vendor="claude-code"),
    ImageSpec("agent-openai-agents", "agents/openai-agents", parent="base", vendor="site-packages"),
    ImageSpec("agent-codex", "agents/codex", parent="base", vendor="codex"),
    ImageSpec("agent-gemini", "agents/gemini", parent="base", vendor="site-packages"),
    ImageSpec("agent-mini-swe-agent", "agents/mini-swe-agent", parent="base", vendor="site-packages"),
)


def repo_root() -> Path:
    """The source checkout that holds ``images/`` and ``.cache/``."""
    return Path(__file__).resolve().parents[2]


def images_dir() -> Path:
    """The folder with one sub-folder of build inputs per image (in a checkout or bundled: :mod:`runner.paths`)."""
    return paths.images_dir()


def record_path() -> Path:
    """Where the resolved image references are written (a build output, gitignored)."""
    return paths.cache_dir() / "images.json"


def apt_source_files(etc_apt: Path = Path("/etc/apt")) -> list[Path]:
    """The host's non-empty apt source files, in the order ``build.sh`` discovers them itself."""
    found = [etc_apt / "sources.list"]
    found += sorted((etc_apt / "sources.list.d").glob("*.sources"))
    found += sorted((etc_apt / "sources.list.d").glob("*.list"))
    return [p for p in found if p.is_file() and p.stat().st_size > 0]


def _tree(folder: Path) -> list[list[object]]:
    # Every file but bytecode caches; the exec bit counts because build.sh, the hook and the SQL tool run as programs.
    files = (
        p for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    return file_entries(files, folder)


def upstream_base() -> str | None:
    """The pinned upstream base from ``$ISPM_UPSTREAM_BASE``, or None for the registry-free build.

    Raises:
        ImageError: the variable is set to a reference that is not pinned by digest.
    """
    ref = os.environ.get(UPSTREAM_ENV, "").strip()
    return check_pinned(ref) if ref else None


def check_pinned(ref: str) -> str:
    """``ref`` if it names an image by content digest; otherwise an ``ImageError`` that says how to pin it."""
    if not _PINNED.fullmatch(ref):
        raise ImageError(
            f"{UPSTREAM_ENV}={ref!r} is not pinned: give name@sha256:<64 hex> (see `docker images --digests`) "
            "or a local image id sha256:<64 hex>, never a tag, which can move"
        )
    return ref


def input_digest(spec: ImageSpec, parent_digest: str | None, sources: list[Path], upstream: str | None = None) -> str:
    """``sha256:<hex>`` over everything that decides the content of the image ``spec``."""
    doc: dict[str, object] = {
        "scheme": DIGEST_SCHEME,
        "name": spec.name,
        "files": _tree(images_dir() / spec.folder),
        "parent": parent_digest,
    }
    if spec.vendor is not None:
        # The pinned requirements (with their hashes) are among the files; the downloads are not hashed.
        doc["vendor"] = {"step": spec.vendor, "wheel_target": list(WHEEL_TARGET)}
    if spec.parent is None and upstream is not None:
        doc["upstream"] = upstream
    elif spec.parent is None:
        doc["import_changes"] = list(IMPORT_CHANGES)
        doc["apt_sources"] = [[str(p), file_sha256(p)] for p in sources]
    return canonical_digest(doc)


def tag_for(name: str, digest: str) -> str:
    """The image tag for ``name`` at ``digest``: ``ispm/<name>:<12 hex>``."""
    return f"{REPOSITORY_PREFIX}{name}:{digest.removeprefix('sha256:')[:12]}"


def expected_tags(sources: list[Path] | None = None, upstream: str | None = None) -> dict[str, str]:
    """The tag every image would have now, computed from the inputs alone (no Docker needed).

    ``upstream`` defaults to :func:`upstream_base` (the environment).
    """
    base = upstream if upstream is not None else upstream_base()
    digests = _digests(apt_source_files() if sources is None else sources, base)
    return {name: tag_for(name, d) for name, d in digests.items()}


def _digests(sources: list[Path], upstream: str | None) -> dict[str, str]:
    digests: dict[str, str] = {}
    for spec in SPECS:  # parents come before children in SPECS
        parent = digests[spec.parent] if spec.parent else None
        digests[spec.name] = input_digest(spec, parent, sources, upstream)
    return digests


def build_rootfs(out: Path, sources: list[Path] | None = None, log_file: Path | None = None) -> str:
    """Build the base rootfs tarball at ``out`` with ``images/base/build.sh``; returns its sha256 hex.

    Needs root (mmdebstrap's root mode; the script installs mmdebstrap with apt-get if missing).
    """
    files = apt_source_files() if sources is None else sources
    if not files:
        raise ImageError("no apt sources found on this machine (/etc/apt/sources.list{,.d/})")
    script = images_dir() / "base" / "build.sh"
    out.parent.mkdir(parents=True, exist_ok=True)
    log_target = log_file or out.with_suffix(".log")
    log_target.write_bytes(b"")
    run_logged(["bash", str(script), str(out), *map(str, files)], log_target, what="base rootfs build")
    return file_sha256(out)


def _docker() -> Any:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise ImageError(f"cannot reach the Docker engine: {exc}") from exc
    return client


def _existing(client: Any, tag: str) -> Any | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def _import_base(client: Any, tarball: Path, tag: str, digest: str) -> Any:
    repository, _, version = tag.partition(":")
    labels = [f"LABEL {LABEL_NAME}=base {LABEL_DIGEST}={digest}"]
    try:
        client.api.import_image_from_file(
            str(tarball), repository=repository, tag=version, changes=[*IMPORT_CHANGES, *labels]
        )
    except docker.errors.APIError as exc:
        raise ImageError(f"docker import of {tarball} as {tag} failed: {exc}") from exc
    return client.images.get(tag)


def _build_base(client: Any, tag: str, digest: str, sources: list[Path]) -> tuple[Any, str]:
    work_root = paths.cache_dir() / "images"
    work_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="base-", dir=work_root))
    try:
        tarball = work / "rootfs.tar"
        sha = build_rootfs(tarball, sources, log_file=work_root / f"base-{digest[7:19]}.log")
        image = _import_base(client, tarball, tag, digest)
    finally:
        # The tarball is as big as the image; its sha256 survives as the image's layer diff ID.
        shutil.rmtree(work, ignore_errors=True)
    return image, sha


def build_upstream_base(client: Any, upstream: str, tag: str, digest: str) -> Any:
    """``docker build`` of ``images/base/Dockerfile.upstream`` on the pinned ``upstream``, tagged ``tag``.

    The one step that may reach a registry: the engine fetches ``upstream`` only if it does not have it.
    """
    epoch = (images_dir() / "base" / "SOURCE_DATE_EPOCH").read_text(encoding="utf-8").strip()
    args = {"UPSTREAM": check_pinned(upstream), "SOURCE_DATE_EPOCH": epoch}
    return docker_build(client, images_dir() / "base", tag, digest, args, dockerfile="Dockerfile.upstream")


def _build_derived(client: Any, spec: ImageSpec, tag: str, digest: str, parent_tag: str) -> Any:
    if spec.vendor is None:
        return docker_build(client, images_dir() / spec.folder, tag, digest, {"BASE": parent_tag}, name=spec.name)
    work_root = paths.cache_dir() / "images"
    work_root.mkdir(parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=work_root))
    log_file = work_root / f"{spec.name}-{digest[7:19]}.log"
    log_file.write_bytes(b"")
    try:
        shutil.copytree(images_dir() / spec.folder, context, dirs_exist_ok=True)
        vendor_into(context, spec.vendor, wheel_cache(spec.name), log_file)
        return docker_build(client, context, tag, digest, {"BASE": parent_tag}, name=spec.name)
    finally:
        shutil.rmtree(context, ignore_errors=True)


def docker_build(
    client: Any,
    context: Path,
    tag: str,
    digest: str,
    args: dict[str, str],
    *,
    name: str = "base",
    dockerfile: str = "Dockerfile",
) -> Any:
    """``docker build`` of ``context`` as ``tag``, labelled with our name and input digest; never pulls a parent.

    Raises:
        ImageError: the build failed; the message ends with the tail of the build log.
    """
    try:
        image, _ = client.images.build(
            path=str(context),
            dockerfile=dockerfile,
            tag=tag,
            buildargs=args,
            labels={LABEL_NAME: name, LABEL_DIGEST: digest},
            pull=False,  # never ask a registry for a newer parent; a missing one is fetched only if pinned upstream
            rm=True,
            forcerm=True,
        )
    except docker.errors.BuildError as exc:
        lines = [str(chunk.get("stream") or chunk.get("error") or "").rstrip() for chunk in exc.build_log]
        raise ImageError(f"docker build of {tag} failed: {exc}\n" + "\n".join(lines[-BUILD_LOG_TAIL:])) from exc
    except docker.errors.APIError as exc:
        raise ImageError(f"docker build of {tag} failed: {exc}") from exc
    return image


def _rootfs_sha(image: Any) -> str | None:
    # An imported uncompressed tarball becomes exactly one layer whose diff ID is the tarball's sha256.
    layers = image.attrs.get("RootFS", {}).get("Layers") or []
    return str(layers[0]).removeprefix("sha256:") if len(layers) == 1 else None


def _ensure_one(
    client: Any,
    spec: ImageSpec,
    digest: str,
    sources: list[Path],
    refs: dict[str, ImageRef],
    upstream: str | None,
) -> ImageRef:
    tag = tag_for(spec.name, digest)
    image = _existing(client, tag)
    started = time.monotonic()
    built = image is None
    if image is None:
        _log.info("image.build", image=spec.name, tag=tag)
        if spec.parent is None and upstream is not None:
            image = build_upstream_base(client, upstream, tag, digest)
        elif spec.parent is None:
            image, tarball_sha = _build_base(client, tag, digest, sources)
            if _rootfs_sha(image) != tarball_sha:
                raise ImageError(f"{tag}: imported layer is not the rootfs tarball {tarball_sha}")
        else:
            image = _build_derived(client, spec, tag, digest, refs[spec.parent].tag)
    seconds = round(time.monotonic() - started, 3) if built else 0.0
    # A moving :latest tag for people typing `docker run`; the runner itself uses the digest tag.
    image.tag(f"{REPOSITORY_PREFIX}{spec.name}", "latest")
    ref = ImageRef(
        name=spec.name,
        tag=tag,
        id=str(image.id),
        input_digest=digest,
        built=built,
        seconds=seconds,
        rootfs_sha256=_rootfs_sha(image) if spec.parent is None and upstream is None else None,
        upstream=upstream if spec.parent is None else None,
    )
    _log.info("image.ready", image=spec.name, tag=tag, built=built, seconds=seconds)
    return ref


@contextmanager
def build_lock() -> Iterator[None]:
    """Held while images are built (two ``make images``, or a test run and a user, must not build the same tag at
    once) and while a board loads an upload, so that a load's effects on the engine are told from a build's."""
    path = record_path().with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path):
        yield


def _write_record(refs: dict[str, ImageRef]) -> None:
    target = record_path()
    scratch = target.with_suffix(".json.tmp")
    scratch.write_text(ImageRecord(images=refs).model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(scratch, target)


def generations(specs: Iterable[ImageSpec]) -> list[list[ImageSpec]]:
    """``specs`` (parents first) in generations: the images without a parent among them, then their children, and
    so on; an image's parent is always in an earlier generation."""
    depth: dict[str, int] = {}
    out: list[list[ImageSpec]] = []
    for spec in specs:
        level = depth[spec.parent] + 1 if spec.parent in depth else 0
        depth[spec.name] = level
        out += [[] for _ in range(level + 1 - len(out))]
        out[level].append(spec)
    return out


def needed_specs(names: Iterable[str] | None = None) -> list[ImageSpec]:
    """The specs of the images ``names`` and of their parents, parents first; every spec when ``names`` is None.

    Raises:
        ImageError: a name that is not one of our images.
    """
    if names is None:
        return list(SPECS)
    names = list(names)  # read twice below
    by_name = {spec.name: spec for spec in SPECS}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise ImageError(f"no such image: {', '.join(unknown)}; ours are {', '.join(by_name)}")
    wanted: set[str] = set()
    for name in names:
        step: str | None = name
        while step is not None:
            wanted.add(step)
            step = by_name[step].parent
    return [spec for spec in SPECS if spec.name in wanted]


def ensure_images(
    client: Any | None = None, sources: list[Path] | None = None, names: Iterable[str] | None = None
) -> dict[str, ImageRef]:
    """Make sure the sandbox images ``names`` (with their parents; every image when None) exist for the current
    inputs; build only what is missing.

    ``make images`` ensures every image; ``ispm demo`` only the calibration agent it runs, and ``ispm run`` only its
    agent: an agent image is built the first time something names it. The base comes from Debian packages, or from
    ``$ISPM_UPSTREAM_BASE`` when that is set (see the module docs). Returns the references by short name and records
    them in ``.cache/images.json`` (beside those recorded before that are still current).

    Raises:
        ImageError: a name that is not one of our images, or a build that failed.
    """
    specs = needed_specs(names)
    files = apt_source_files() if sources is None else sources
    upstream = upstream_base()
    engine = client if client is not None else _docker()
    refs: dict[str, ImageRef] = {}
    with build_lock():
        digests = _digests(files, upstream)
        for generation in generations(specs):
            # Images of one generation share no inputs: the third-party agents' builds (pip, the engine's layer
            # writes) overlap instead of queueing, which is most of a cold `make images`. Those are the long ones,
            # so they start first.
            first = sorted(generation, key=lambda spec: spec.vendor is None)
            with ThreadPoolExecutor(max_workers=BUILD_WORKERS, thread_name_prefix="ispm-image") as pool:
                made = pool.map(lambda s: _ensure_one(engine, s, digests[s.name], files, refs, upstream), first)
                refs.update({ref.name: ref for ref in made})
        refs = {spec.name: refs[spec.name] for spec in specs}  # in SPECS order, whatever order they were made in
        kept = {n: r for n, r in _recorded().items() if n in digests and r.input_digest == digests[n]}
        _write_record({n: (refs.get(n) or kept[n]) for n in digests if n in refs or n in kept})
    return refs


def engine_image_id(tag: str) -> str | None:
    """The engine's id of the image ``tag``, or None when the engine is unreachable or lacks it."""
    try:
        client = docker.from_env()
        try:
            return str(client.images.get(tag).id)
        finally:
            client.close()
    except docker.errors.DockerException:
        return None


def load_record() -> dict[str, ImageRef]:
    """The references last written by ``ensure_images`` (empty if it never ran here)."""
    path = record_path()
    if not path.is_file():
        return {}
    return ImageRecord.model_validate_json(path.read_text(encoding="utf-8")).images


def _recorded() -> dict[str, ImageRef]:
    # What an earlier call recorded; a damaged record is rewritten from what this call ensures.
    try:
        return load_record()
    except ValueError:
        return {}


def prune_stale(
    client: Any | None = None, keep: dict[str, ImageRef] | None = None, *, dry_run: bool = False
) -> list[str]:
    """Remove ``ispm/<name>:<digest>`` tags of our images that are not current; returns those tags.

    Never called implicitly: another checkout on the same engine may still want its own tags.
    With ``dry_run`` nothing is removed.
    """
    engine = client if client is not None else _docker()
    current = {ref.tag for ref in (keep if keep is not None else ensure_images(engine)).values()}
    removed: list[str] = []
    for image in engine.images.list(filters={"label": LABEL_DIGEST}):
        for tag in image.tags:
            stale = tag.startswith(REPOSITORY_PREFIX) and not tag.endswith(":latest") and tag not in current
            if stale:
                if not dry_run:
                    engine.images.remove(tag, noprune=False)
                removed.append(str(tag))
    return sorted(removed)
