"""``make binary``: one single-file ``ispm`` executable that holds the world, the tasks and the grader.

PyInstaller (pinned by the ``binary`` extra) freezes the interpreter, the ``runner`` package and its pinned
dependencies into ``dist/ispm``, with the data a run needs laid out as an installed wheel's
(``runner/_bundle/{world,tasks,docs}``) plus the images' build contexts (``runner/_bundle/images``), so
:mod:`runner.paths` finds them unchanged. The entry point is :mod:`runner.frozen`. From an empty folder, on a
host with Docker and no Python environment, the executable runs ``ispm tasks verify``, ``ispm audit``,
``ispm verify`` and ``ispm demo``; its ``ispm images`` computes the same input digests as a checkout, so it
reuses the images a checkout built.

Not inside: Ray (``ispm run --backend ray`` needs the ``cluster`` extra on a Python install) and the test-only
SDKs.

A build is cached, like the sandbox images, by a digest of its inputs: every file it is built from, the
interpreter and the installed packages (PyInstaller among them). The executable is kept in the user's cache folder,
``~/.cache/ispm/binary/<digest12>/ispm`` (shared by every checkout, as the engine shares the images), and copied to
``dist/ispm``; unchanged inputs are never rebuilt, whichever checkout asks.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import platformdirs
from filelock import FileLock
from pydantic import BaseModel, ConfigDict

from runner import log
from runner.errors import IspmError
from runner.sandbox.build import canonical_digest, file_entries, run_logged
from runner.world.digest import file_sha256

_log = log.get(__name__)

DIGEST_SCHEME = "ispm-binary/1"
NAME = "ispm"
ROOT = Path(__file__).resolve().parent.parent
"""The source checkout the executable is built from."""
SOURCES: tuple[str, ...] = ("pyproject.toml", "runner", "world", "tasks", "docs/scoring.md", "images")
"""What the executable is built from, relative to the checkout: the digest covers every file under these."""
BUNDLED: dict[str, str] = {"world": "world", "tasks": "tasks", "docs/scoring.md": "docs", "images": "images"}
"""Each bundled source and its folder under ``runner/_bundle/`` in the executable."""
COLLECTED: tuple[str, ...] = ("runner", "sqlglot", "pip")
"""Packages taken whole: the runner's lazily imported stages; sqlglot's mypyc modules, which only C code imports;
pip, which the image build runs (``ispm -m pip``) to vendor an agent's pinned wheels."""
EXCLUDED: tuple[str, ...] = (
    "ray",  # the cluster backend: the `cluster` extra, on a Python install
    "runner.inspect_eval",  # Inspect AI's entry point: the `inspect` extra, on a Python install
    "inspect_ai",
    "anthropic",  # test-only SDKs: the fake provider's types and the real clients
    "openai",
    "selenium",
    "hypothesis",
    "pytest",
    "_pytest",
    "mypy",
    "mypyc",
    "PyInstaller",
    "numpy",  # optional imports of duckdb and others, which the runner never makes
    "pandas",
    "pyarrow",
    "trio",
    "setuptools",  # pip builds nothing here: the image build takes pinned wheels only
    "pkg_resources",
    "tkinter",
)
_SKIPPED_PARTS = {"__pycache__", "_bundle"}


class BinaryError(IspmError):
    """The executable could not be built."""


class BinaryBuild(BaseModel):
    """The executable for the current sources, as built or reused."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    path: Path
    """``dist/ispm``: a copy of the cached build."""
    cached: Path
    """The build in the cache, ``~/.cache/ispm/binary/<digest12>/ispm``."""
    input_digest: str
    """``sha256:<hex>`` over the build's inputs."""
    sha256: str
    """The executable's own sha256, as the board shows it."""
    size: int
    """The executable's size in bytes."""
    built: bool
    """True if this call built it, False if the cached build was reused."""
    seconds: float
    """Wall time this call spent building it (0 when reused)."""


def source_files(root: Path = ROOT) -> list[Path]:
    """Every file of ``SOURCES`` under ``root``, sorted; bytecode caches and a wheel's ``_bundle`` left out."""
    found: list[Path] = []
    for name in SOURCES:
        path = root / name
        found += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [p for p in found if not _SKIPPED_PARTS & set(p.relative_to(root).parts) and p.suffix != ".pyc"]


def input_digest(root: Path = ROOT) -> str:
    """``sha256:<hex>`` over every source file (path, exec bit, content), the interpreter and the installed packages."""
    doc = {
        "scheme": DIGEST_SCHEME,
        "python": sys.version,
        "machine": platform.machine(),
        "pyinstaller": _pyinstaller_version(),
        # What PyInstaller freezes is what this environment holds, pinned by pyproject or not.
        "packages": sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()),
        "files": file_entries(source_files(root), root),
    }
    return canonical_digest(doc)


def _pyinstaller_version() -> str:
    try:
        return metadata.version("pyinstaller")
    except metadata.PackageNotFoundError as exc:
        raise BinaryError("PyInstaller is not installed: pip install -e '.[binary]' (make binary does)") from exc


def data_files(root: Path = ROOT) -> list[tuple[Path, str]]:
    """Each file the executable carries besides frozen modules, with its folder inside the executable.

    The bundled data goes under ``runner/_bundle/``. The ``runner`` package's own files go beside its frozen
    modules as they are in the checkout, so every ``__file__`` names a real file: the templates, the rubrics, the
    migrations Alembic loads by path, the forwarder the sandbox copies into a container.
    """
    bundle = Path("runner/_bundle")
    found: list[tuple[Path, str]] = []
    for path in source_files(root):
        relative = path.relative_to(root)
        if relative.parts[0] == "runner":
            found.append((path, relative.parent.as_posix()))
        for source, folder in BUNDLED.items():
            if relative == Path(source):
                found.append((path, (bundle / folder).as_posix()))
            elif relative.is_relative_to(source):
                found.append((path, (bundle / folder / relative.relative_to(source).parent).as_posix()))
    return found


def pyinstaller_args(work: Path, root: Path = ROOT) -> list[str]:
    """The PyInstaller command line that builds the executable into ``work/dist``."""
    args = ["--onefile", "--noconfirm", "--log-level", "WARN", "--name", NAME]
    args += ["--distpath", str(work / "dist"), "--workpath", str(work / "build"), "--specpath", str(work)]
    for module in EXCLUDED:
        args += ["--exclude-module", module]
    for package in COLLECTED:
        args += ["--collect-submodules", package]
    args += ["--collect-data", "pip"]  # pip's CA bundle and its vendored packages' data
    args += ["--copy-metadata", "genai-prices"]  # it reads its own version from its metadata when imported
    for source, target in data_files(root):
        args += ["--add-data", f"{source}{os.pathsep}{target}"]
    return [*args, str(root / "runner" / "frozen.py")]


def cache_root() -> Path:
    """Where built executables are kept, one folder per input digest: the user's cache folder, not the checkout's.

    The digest names every input, paths relative to the checkout, so a fresh clone of the same sources with the same
    packages reuses a build another checkout made (a cold build is minutes of CPU).
    """
    return Path(platformdirs.user_cache_dir("ispm")) / "binary"


def ensure_binary(root: Path = ROOT, dist: Path | None = None) -> BinaryBuild:
    """The executable for the current sources at ``dist/ispm``: the cached build, or a new one.

    Raises:
        BinaryError: PyInstaller is missing, or the build failed (the message ends with its log's tail).
    """
    digest = input_digest(root)
    cached = cache_root() / digest[7:19] / NAME
    started = time.monotonic()
    built = False
    cache_root().mkdir(parents=True, exist_ok=True)
    with FileLock(cache_root() / ".lock"):
        if not cached.is_file():
            _build(root, cached, digest)
            built = True
    seconds = round(time.monotonic() - started, 3) if built else 0.0
    target = (dist or root / "dist") / NAME
    _copy(cached, target)
    size = cached.stat().st_size
    sha = file_sha256(cached)
    _log.info("binary.ready", path=str(target), digest=digest, built=built, seconds=seconds, size=size)
    return BinaryBuild(
        path=target, cached=cached, input_digest=digest, sha256=sha, size=size, built=built, seconds=seconds
    )


def _build(root: Path, cached: Path, digest: str) -> None:
    log_file = cache_root() / f"build-{digest[7:19]}.log"
    log_file.write_bytes(b"")
    work = Path(tempfile.mkdtemp(prefix="work-", dir=cache_root()))
    _log.info("binary.build", digest=digest, log=str(log_file))
    try:
        command = [sys.executable, "-m", "PyInstaller", *pyinstaller_args(work, root)]
        try:
            run_logged(command, log_file, what="the PyInstaller build of ispm")
        except IspmError as exc:
            raise BinaryError(str(exc)) from exc
        cached.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / "dist" / NAME, cached)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # Older builds (and their logs) are for other sources: only the newest is kept (about 100 MB each).
    for other in cache_root().iterdir():
        if other.is_dir() and other != cached.parent and not other.name.startswith("work-"):
            shutil.rmtree(other, ignore_errors=True)
        elif other.name.startswith("build-") and other != log_file:
            other.unlink(missing_ok=True)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, scratch)
    scratch.chmod(0o755)
    os.replace(scratch, target)


def main() -> int:
    """``python -m runner.binary`` (``make binary``): build or reuse the executable; print its path, size and sha256."""
    log.configure()
    try:
        build = ensure_binary()
    except IspmError as exc:
        print(f"binary: error: {exc}", file=sys.stderr)
        return 1
    state = f"built in {build.seconds:.0f} s" if build.built else "reused"
    print(f"{build.path}  {build.size / 1e6:.1f} MB  sha256 {build.sha256}  {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
