"""``compose.yaml``: an auditor runs ``ispm`` itself as a container, with no network, on a real run folder.

The run audited is the session's shared gold calibration run (``gold_run`` in conftest); the runner image is
built (or reused by digest) once. Every call goes through the real Compose tool and the real engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from runner.run.journal import JOURNAL_NAME
from runner.sandbox.images import ImageRef
from runner.sandbox.runner_image import ensure_runner_image

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.docker


def _compose_command() -> list[str]:
    """``docker compose`` where the plugin exists, else the standalone ``docker-compose``."""
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if plugin.returncode == 0:
        return ["docker", "compose"]
    found = shutil.which("docker-compose")
    if found is None:
        pytest.fail("neither `docker compose` nor `docker-compose` is installed; the machine promises Compose")
    return [found]


@pytest.fixture(scope="module")
def runner_image() -> ImageRef:
    return ensure_runner_image()


@pytest.fixture(scope="module")
def runs(gold_run: Path) -> Path:
    """The folder holding the shared gold calibration run, as ``gold``."""
    return gold_run.parent


def _compose(runs: Path, image: ImageRef, *command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ISPM_RUNS": str(runs), "ISPM_RUNNER_IMAGE": image.tag}
    project = f"ispm-test-{uuid.uuid4().hex[:8]}"
    return subprocess.run(
        [*_compose_command(), "-f", str(ROOT / "compose.yaml"), "-p", project, "run", "--rm", "runner", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_the_runner_image_is_tagged_by_its_inputs_and_reused(runner_image: ImageRef) -> None:
    assert runner_image.tag.startswith("ispm/runner:")
    again = ensure_runner_image()
    assert again.tag == runner_image.tag and again.id == runner_image.id and not again.built


def test_an_auditor_audits_a_clean_run_in_the_container(runs: Path, runner_image: ImageRef) -> None:
    done = _compose(runs, runner_image, "ispm", "audit", "/runs/gold")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "recomputes exactly" in done.stdout


def test_the_container_catches_a_tampered_vote(runs: Path, runner_image: ImageRef, tmp_path: Path) -> None:
    tampered = tmp_path / "runs"
    shutil.copytree(runs / "gold", tampered / "gold")
    journal = tampered / "gold" / JOURNAL_NAME
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "sample_graded")
    entry = json.loads(lines[number])
    entry["votes"][0]["grade"] = "partial"
    lines[number] = json.dumps(entry) + "\n"
    journal.write_text("".join(lines), encoding="utf-8")

    done = _compose(tampered, runner_image, "ispm", "audit", "/runs/gold")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"consensus: {entry['task_id']} " in done.stdout + done.stderr


def test_the_container_has_no_network_and_a_read_only_root(runs: Path, runner_image: ImageRef) -> None:
    probe = (
        "import socket, pathlib\n"
        "names = sorted(n for _, n in socket.if_nameindex())\n"
        "try:\n"
        "    pathlib.Path('/usr/local/x').write_text('x')\n"
        "    root = 'writable'\n"
        "except OSError as exc:\n"
        "    root = type(exc).__name__\n"
        "print(names, root)\n"
    )
    done = _compose(runs, runner_image, "python3", "-I", "-c", probe)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['lo'] OSError"
