"""Shared fixtures: the bundled world, opened read-only, and throwaway copies to tamper with."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import loopback_cluster  # noqa: F401  # before anything imports Ray: it sets what keeps test clusters on loopback
import pytest

from runner.paths import tasks_dir, world_dir
from runner.sandbox.images import ImageRef, ensure_images
from runner.world.digest import open_readonly


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
