"""The entry point of the single-file ``ispm`` executable (``make binary``, :mod:`runner.binary`).

The executable unpacks itself into a private temporary folder and runs this file: the frozen ``runner`` package,
its files, and ``runner/_bundle/{world,tasks,docs,images}`` beside it, which :mod:`runner.paths` resolves as it
does an installed wheel's. Two things differ from a Python install, and both are settled here:

- ``sys.executable`` is ``ispm`` itself, yet parts of the runner start a Python child as they would an
  interpreter: the coverage worker (``-m runner.grading.bounded_coverage``), the image build's pip (``-m pip``),
  the local backend's agents and forwarder (``-I SCRIPT``). Those two forms are served here; a child of the
  executable reuses its unpacked folder, so it starts in a fraction of a second.
- The unpacked files are the owner's alone (0600, 0700). The sandbox's agent (uid 10001) reads the world and its
  docs through bind mounts, and an image built from a bundled build context keeps its files' modes: so the bundle
  gets a checkout's modes back, 0644 and 0755. Executable bits are kept, since the images' input digests count them.
"""

from __future__ import annotations

import os
import runpy
import sys

from runner import paths


def open_bundle() -> None:
    """Give the unpacked bundle a checkout's modes: folders 0755, files 0644, or 0755 where executable."""
    for top, _folders, files in os.walk(paths.BUNDLE):
        os.chmod(top, 0o755)
        for name in files:
            path = os.path.join(top, name)
            os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)


def run_as_interpreter(argv: list[str]) -> bool:
    """Run ``-m MODULE ARGS...`` or ``-I SCRIPT ARGS...`` as ``python`` would; False for anything else."""
    if len(argv) < 2 or argv[0] not in ("-m", "-I"):
        return False
    sys.argv = argv[1:]
    if argv[0] == "-m":
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(argv[1], run_name="__main__")
    return True


def main() -> None:
    """``ispm``, or the interpreter form a child of it was started with."""
    if run_as_interpreter(sys.argv[1:]):
        return
    if getattr(sys, "frozen", False):
        open_bundle()
    # Here, not at the top: a child started as an interpreter (above) must not pay for the CLI's imports.
    from runner.cli import main as ispm

    ispm(prog_name="ispm")


if __name__ == "__main__":
    main()
