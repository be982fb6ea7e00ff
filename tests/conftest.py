"""Shared fixtures: the bundled world, opened read-only, and throwaway copies to tamper with."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import loopback_cluster  # noqa: F401  # before anything imports Ray: it sets what keeps test clusters on loopback
import pytest
from lanes import heaviest_files_first

from runner.paths import tasks_dir, world_dir
from runner.sandbox.images import ImageRef, ensure_images
from runner.world.digest import open_readonly

DOCKER_FIXTURES = frozenset({"refs", "gold_run"})
"""Fixtures that build images or run samples on the engine: a test that uses one needs Docker, marked or not."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before `-m` deselects: a test is in the Docker lane by what it uses, not only by what it says.
    for item in items:
        if DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.docker)
    heaviest_files_first(items)


@pytest.fixture(scope="session")
def world_path() -> Path:
    return world_dir()


@pytest.fixture(scope="session")
def tasks_path() -> Path:
    return tasks_dir()


@pytest.fixture(scope="session")
def world_db(world_path: Path) -> Iterator[sqlite3.Connection]:
    conn = open_readonly(world_path / "ispm-crossvendor-v1.sqlite")
    yield conn
    conn.close()


@pytest.fixture()
def world_copy(tmp_path: Path, world_path: Path) -> Path:
    """A private copy of the bundled world folder, safe to damage."""
    target = tmp_path / "world"
    shutil.copytree(world_path, target)
    return target


@pytest.fixture(autouse=True, scope="session")
def _logs_to_a_temp_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """CLI tests must not append to the user's real log file."""
    import os

    previous = os.environ.get("ISPM_LOG_FILE")
    os.environ["ISPM_LOG_FILE"] = str(tmp_path_factory.mktemp("logs") / "ispm.jsonl")
    yield
    if previous is None:
        os.environ.pop("ISPM_LOG_FILE", None)
    else:
        os.environ["ISPM_LOG_FILE"] = previous


@pytest.fixture(scope="session")
def refs() -> dict[str, ImageRef]:
    """The sandbox images, built once per test session (reused when their input digest is unchanged)."""
    return ensure_images()


GOLD_RUN_TASKS = ("ispm-001", "ispm-010")
GOLD_RUN_EPOCHS = 2


@pytest.fixture(scope="session")
def gold_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real calibration run (Docker, gold replay, ``GOLD_RUN_TASKS`` x ``GOLD_RUN_EPOCHS``), made once.

    It lives at ``<tmp>/runs/gold``. Tests read it, or copy it before tampering: never change it in place.
    """
    from runner.pipeline import run_calibration

    run_dir = tmp_path_factory.mktemp("shared") / "runs" / "gold"
    run_calibration("replay", tasks=list(GOLD_RUN_TASKS), epochs=GOLD_RUN_EPOCHS, run_dir=run_dir)
    return run_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    """Name any thread a test left running, with its stack, then leave without waiting for it.

    Python's exit joins every non-daemon thread: one stuck thread (a run that never ended, a pool worker waiting on a
    dead node) would hold CI until its time limit and hide which test leaked it. The leak is reported here instead.
    """
    import os
    import sys
    import threading
    import traceback

    leaked = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not leaked:
        return
    frames = sys._current_frames()
    sys.stderr.write(f"\n{len(leaked)} thread(s) still running after the session:\n")
    for thread in leaked:
        frame = frames.get(thread.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "  (no frame)\n"
        sys.stderr.write(f"--- {thread.name}\n{stack}")
    sys.stderr.flush()
    sys.stdout.flush()
    status = getattr(config, "_ispm_exitstatus", 1)
    os._exit(int(status))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config._ispm_exitstatus = exitstatus  # type: ignore[attr-defined]
