"""The single-file ``ispm`` (``make binary``) runs from an empty folder on a host with Docker and nothing else.

The executable is built by the code ``make binary`` runs (:func:`runner.binary.ensure_binary`), which reuses the
build cached under ``~/.cache/ispm/binary/`` while no input changed: only the first run after a change pays for PyInstaller.
Each command runs in a bare environment (``env -i`` with a minimal ``PATH`` and a fresh ``HOME``), no virtualenv
and no source tree in sight. The signed bundle is the session's gold run, bundled and signed here with a fresh
Ed25519 key, as a board would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.binary import ensure_binary
from runner.board.signing import PUBLIC_KEY_NAME, load_or_create_key, sign_statement, statement_of
from runner.record.bundle import bundle
from runner.record.model import RunRecord
from runner.sandbox.images import UPSTREAM_ENV, ImageRef, expected_tags
from runner.world.digest import file_sha256

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASKS = 127
# "Runs without Python" is proven on a few tasks of both kinds (enumeration, verdict); the whole set runs once, in
# test_demo.
DEMO_TASKS = ("ispm-001", "ispm-060", "ispm-127")


class Folder:
    """An empty folder holding only the executable, and a bare environment to run it in."""

    def __init__(self, root: Path, executable: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir()
        self.ispm = root / "ispm"
        shutil.copy2(executable, self.ispm)
        self.env = {"PATH": "/usr/bin:/bin", "HOME": str(self.home)}
        # What decides where the engine is and which images are current, when the host sets it.
        self.env.update({k: os.environ[k] for k in ("DOCKER_HOST", UPSTREAM_ENV) if k in os.environ})

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.ispm), *args], cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Folder:
    build = ensure_binary(dist=tmp_path_factory.mktemp("dist"))
    return Folder(tmp_path_factory.mktemp("empty"), build.path)


@pytest.fixture(scope="module")
def signed(gold_run: Path, folder: Folder) -> Path:
    """The gold run as a board publishes it: a bundle, its signed statement and the board's public key."""
    out = bundle(gold_run, folder.root / f"{gold_run.name}.tar.gz")
    record = RunRecord.model_validate_json((gold_run / "record.json").read_text(encoding="utf-8"))
    key = load_or_create_key(folder.root / "board")
    statement = statement_of(
        record, out, board_id="test-board-binary", key=key, submission_id=1, signed_at="2026-01-01T00:00:00+00:00"
    )
    sign_statement(key, statement, out)
    return out


def test_tasks_verify_rederives_every_answer_from_the_bundled_world(folder: Folder) -> None:
    done = folder.run("tasks", "verify")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ok: {TASKS} tasks match the world"), done.stdout


def test_audit_recomputes_a_bundle(folder: Folder, signed: Path, gold_run: Path) -> None:
    run_id = json.loads((gold_run / "record.json").read_text(encoding="utf-8"))["run_id"]
    done = folder.run("audit", signed.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok: run {run_id} recomputes exactly ("), done.stdout
    assert "replayed_queries" in done.stdout and "coverage_samples" in done.stdout


def test_verify_holds_on_the_signed_bundle_and_names_a_changed_byte(folder: Folder, signed: Path) -> None:
    key = f"board/{PUBLIC_KEY_NAME}"
    done = folder.run("verify", signed.name, "--key", key)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok {signed.name}: signature, bundle sha256, statement and audit hold ("), (
        done.stdout
    )

    tampered = folder.root / "tampered.tar.gz"
    data = bytearray(signed.read_bytes())
    data[len(data) // 2] ^= 0x01
    tampered.write_bytes(bytes(data))
    for suffix in (".statement.json", ".statement.sig"):
        shutil.copyfile(signed.with_name(signed.name + suffix), tampered.with_name(tampered.name + suffix))
    done = folder.run("verify", tampered.name, "--key", key)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"FAIL bundle: sha256 {file_sha256(tampered)} is not the signed {file_sha256(signed)}" in done.stdout


def test_the_interpreter_forms_run_inside_the_executable(folder: Folder) -> None:
    # The image build vendors an agent's pinned wheels with `ispm -m pip` (sys.executable is ispm itself).
    done = folder.run("-m", "pip", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pip 25.3 from "), done.stdout


def test_the_demo_scores_its_tasks_on_the_checkouts_images(folder: Folder, refs: dict[str, ImageRef]) -> None:
    done = folder.run("demo", *(f"--task={t}" for t in DEMO_TASKS), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    graded = len(DEMO_TASKS)
    assert f"samples graded {graded}/{graded}" in " ".join(lines), done.stdout
    assert any(
        line.split() == ["answer_correctness", "1.000", f"({graded}", "graded,", "0", "abstained)"] for line in lines
    )
    (record_line,) = [line for line in lines if line.startswith("record: ")]
    record = json.loads((folder.root / record_line.removeprefix("record: ")).read_text(encoding="utf-8"))
    assert record["calibration"] == "replay" and not record["official"]
    assert sorted(s["task_id"] for s in record["samples"]) == list(DEMO_TASKS)
    # The coverage worker is `ispm -m runner.grading.bounded_coverage`: the gold replay covers every witness table.
    assert [s["coverage"]["table_recall"] for s in record["samples"]] == [1.0] * graded
    # The bundled build contexts give the checkout's input digests: the images the demo runs (and only those) were
    # found, none rebuilt.
    made = json.loads((folder.home / ".cache" / "ispm" / "images.json").read_text(encoding="utf-8"))["images"]
    assert set(made) == {"base", "agent-replay"}
    assert {name: ref["tag"] for name, ref in made.items()} == {name: refs[name].tag for name in made}
    assert expected_tags() == {n: r.tag for n, r in refs.items()}
    assert not any(ref["built"] for ref in made.values())
