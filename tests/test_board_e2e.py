"""A submission all the way to a published, signed record, against a real board process, per database.

The board runs as ``ispm board serve`` on loopback with SQLite and with a real PostgreSQL cluster.
The submitter's client streams ``docker save`` of the gold replay image; the board quarantines and loads it,
smoke-tests it on one task in Docker, runs an official-shaped run shortened by the test-only ``trial`` setting
(one task, one epoch, gold recordings, the offline reference judges), audits, bundles and signs it. The candidate's
wire model id comes from the fake provider, probed with the board's own key. ``ispm verify`` then passes on the
downloaded bundle, and a flipped byte, a wrong key and an edited statement each fail, named.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from board_fixtures import ISPM, BoardProcess, browser, contract_image, postgres_cluster
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fake_provider import FakeProvider, Reply, openai_completion

from runner.board.client import submit, submit_with_progress, watch_submission
from runner.board.quarantine import board_name
from runner.record.model import RunRecord
from runner.record.verify import verify

pytestmark = [pytest.mark.docker, pytest.mark.slow]
__all__ = ["browser"]  # a fixture, imported for pytest
TASK = "ispm-001"
CANDIDATE = "openai/cand"
NAME = '<script>alert("pwned")</script> & co'
WIRE_MODEL = "cand-2026-11-30"


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def board(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    with FakeProvider() as candidate, _database(request.param) as url:
        candidate.push(Reply(body=openai_completion("ok", model=WIRE_MODEL)))
        settings: dict[str, Any] = {
            "board_id": f"test-board-{request.param}",
            "judges": ["ref#1", "ref#2"],
            "candidates": [CANDIDATE],
            "max_upload_bytes": 1 << 30,
            "smoke_task": TASK,
            "trial": {"tasks": [TASK], "epochs": 1, "calibration": "replay"},
        }
        if url is not None:
            settings["database_url"] = url
        env = {"OPENAI_API_KEY": "sk-board-e2e", "OPENAI_BASE_URL": candidate.openai_base}
        with BoardProcess(tmp_path_factory.mktemp(f"board-{request.param}"), settings, env) as process:
            yield process


def _database(kind: str) -> Any:
    from contextlib import nullcontext

    return postgres_cluster() if kind == "postgresql" else nullcontext(None)


@pytest.fixture(scope="module")
def published(board: BoardProcess, refs: Any, monkeypatch_module: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch_module.setenv("ISPM_BOARD_TOKEN", board.token("alice"))
    sent: list[int] = []
    receipt = submit(board.url, refs["agent-replay"].tag, CANDIDATE, NAME, links=["https://example.org/agent"],
                     on_bytes=sent.append)  # fmt: skip
    assert receipt["state"] == "received" and receipt["display_name"] == NAME
    states: list[str] = []
    final = watch_submission(board.url, receipt["id"], every_s=0.5, on_change=lambda s: states.append(s["state"]))
    assert final["state"] == "published", final
    return {"receipt": receipt, "final": final, "states": states, "sent": sum(sent)}


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def downloads(board: BoardProcess, published: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("downloads")
    run_id = published["final"]["run_id"]
    for what, name in (("bundle", f"{run_id}.tar.gz"), ("statement", f"{run_id}.tar.gz.statement.json"),
                       ("signature", f"{run_id}.tar.gz.statement.sig")):  # fmt: skip
        response = httpx.get(f"{board.url}/runs/{run_id}/{what}", timeout=30)
        assert response.status_code == 200, response.text
        (folder / name).write_bytes(response.content)
    (folder / "board.pub").write_bytes(httpx.get(board.url + "/api/v1/key", timeout=10).content)
    return folder


def _bundle(folder: Path) -> Path:
    (found,) = folder.glob("*.tar.gz")
    return found


def test_the_submission_went_through_every_state_to_published(published: dict[str, Any]) -> None:
    seen = published["states"]
    # Progress changes are reported too: keep each state once, in the order seen.
    states = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]
    # Polling can miss a short state; the order of those seen is fixed, and it ends published.
    order = ["received", "verified", "queued", "running", "auditing", "published"]
    assert states == sorted(set(states), key=order.index) and states[-1] == "published"
    final = published["final"]
    assert (final["samples_done"], final["samples_planned"]) == (1, 1)
    assert final["upload_sha256"] == published["receipt"]["upload_sha256"]


def test_the_published_record_is_marked_not_official_and_pins_the_wire_model(
    board: BoardProcess, published: dict[str, Any]
) -> None:
    run_id = published["final"]["run_id"]
    record_dir = next((board.folder / "data" / "runs").iterdir())
    record = RunRecord.model_validate_json((record_dir / "record.json").read_text(encoding="utf-8"))
    assert record.run_id == run_id and record.status == "completed" and record.official is False
    assert record.resolved_models == {CANDIDATE: WIRE_MODEL}
    board_id = yaml.safe_load(board.config.read_text())["board_id"]
    tag = f"ispm-board/{board_name(board_id)}/submission-{published['final']['id']}:"
    assert record.spec.agent_image.startswith(tag)
    assert list(record.images.values()) == [published["final"]["image_id"]]


def test_verify_passes_on_the_downloaded_bundle(downloads: Path) -> None:
    report = verify(_bundle(downloads), downloads / "board.pub")
    assert report.problems == [] and report.audit is not None and report.audit.ok
    # and as a person runs it: exit 0, and the summary says so
    done = subprocess.run([ISPM, "verify", str(_bundle(downloads)), "--key", str(downloads / "board.pub")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and done.stdout.splitlines() == report.summary_lines(), done.stderr


def test_verify_cli_exits_1_naming_a_wrong_key(downloads: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pub"
    other.write_bytes(Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))  # fmt: skip
    done = subprocess.run([ISPM, "verify", str(_bundle(downloads)), "--key", str(other)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 1 and "a wrong key" in done.stdout


def test_verify_names_a_flipped_byte(downloads: Path, tmp_path: Path) -> None:
    for path in downloads.iterdir():
        shutil.copy(path, tmp_path / path.name)
    bundle = _bundle(tmp_path)
    data = bytearray(bundle.read_bytes())
    data[len(data) // 2] ^= 0x01
    bundle.write_bytes(bytes(data))
    (problem,) = verify(bundle, tmp_path / "board.pub").problems
    assert problem.startswith("bundle: sha256 ") and problem.endswith("the bundle was changed")


def test_verify_names_a_wrong_key(downloads: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pub"
    other.write_bytes(Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))  # fmt: skip
    (problem,) = verify(_bundle(downloads), other).problems
    assert problem.startswith("key: the statement was signed by the key ") and problem.endswith("a wrong key")


def test_verify_names_an_edited_statement(downloads: Path, tmp_path: Path) -> None:
    for path in downloads.iterdir():
        shutil.copy(path, tmp_path / path.name)
    bundle = _bundle(tmp_path)
    statement = bundle.with_name(bundle.name + ".statement.json")
    edited = json.loads(statement.read_text(encoding="utf-8"))
    edited["official"] = True
    statement.write_text(json.dumps(edited, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    (problem,) = verify(bundle, tmp_path / "board.pub").problems
    assert problem.startswith("signature: the signature does not hold") and "edited after signing" in problem


def test_verify_names_a_signed_statement_that_does_not_match_the_bundle(
    board: BoardProcess, downloads: Path, tmp_path: Path
) -> None:
    from runner.board.signing import load_or_create_key, sign_statement
    from runner.record.verify import Statement

    for path in downloads.iterdir():
        shutil.copy(path, tmp_path / path.name)
    bundle = _bundle(tmp_path)
    statement = Statement.model_validate_json(bundle.with_name(bundle.name + ".statement.json").read_bytes())
    # Signed by the board's own key, so the signature holds: only the comparison with the record can catch it.
    sign_statement(
        load_or_create_key(board.folder / "data"), statement.model_copy(update={"candidate": "openai/x"}), bundle
    )
    (problem,) = verify(bundle, tmp_path / "board.pub").problems
    assert problem == f"statement: candidate is 'openai/x' but the bundle's record says {CANDIDATE!r}"


def test_the_key_endpoint_serves_the_key_the_statement_names(downloads: Path) -> None:
    from runner.record.verify import load_public_key, public_key_sha256

    statement = json.loads(next(downloads.glob("*.statement.json")).read_text(encoding="utf-8"))
    assert statement["key_sha256"] == public_key_sha256(load_public_key(downloads / "board.pub"))


@pytest.fixture(scope="module")
def crashing_image(refs: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    program = 'import sys; print("boom", file=sys.stderr); sys.exit(7)'
    return contract_image(
        refs["base"].tag, tmp_path_factory.mktemp("crashing"), "ispm-test/crashing-agent:latest", program
    )


def test_an_image_that_crashes_on_the_smoke_task_fails_and_no_run_starts(
    board: BoardProcess, crashing_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ISPM_BOARD_TOKEN", board.token("dave"))
    shown = io.StringIO()
    receipt = submit_with_progress(board.url, crashing_image, CANDIDATE, "crashes", stream=shown)
    final = watch_submission(board.url, receipt["id"], every_s=0.5)
    assert final["state"] == "failed"
    assert (
        final["reason"]
        == "smoke test on ispm-001: agent_error: the agent exited with code 7; answer.json missing (exit code 7); stderr ends: boom"
    )
    assert (final["samples_planned"], final["run_id"]) == (0, None)
    assert not (board.folder / "data" / "runs" / f"submission-{receipt['id']}").exists()


def _no_script_ran(browser: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 (the property raises when no alert is open)
    assert browser.find_elements(By.XPATH, "//script[contains(., 'pwned')]") == []


@pytest.mark.browser
def test_pages_in_chromium_show_the_submitters_name_as_text(
    board: BoardProcess, published: dict[str, Any], browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    final = published["final"]
    browser.get(f"{board.url}/submissions/{final['id']}")
    assert browser.find_element(By.ID, "display-name").text == NAME
    assert browser.find_element(By.ID, "state").text == "published"
    assert browser.find_element(By.ID, "progress").text.startswith("1 of 1 samples")
    assert browser.find_elements(By.CSS_SELECTOR, "meta[http-equiv=refresh]") == []  # closed: no more refreshing
    _no_script_ran(browser)

    browser.get(f"{board.url}/submissions")
    names = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#submissions td.name")]
    assert NAME in names
    _no_script_ran(browser)

    browser.get(board.url + "/leaderboard")  # "/" is the contract (runner/site)
    assert browser.find_element(By.ID, "board-panel").is_displayed()
    links = [a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "a")]
    # The report sits at /runs/<id>/ so that its sample pages (samples/...) resolve; /runs/<id> redirects there.
    assert f"{board.url}/runs/{final['run_id']}/" in links
    _no_script_ran(browser)

    browser.get(f"{board.url}/runs/{final['run_id']}")
    assert browser.current_url == f"{board.url}/runs/{final['run_id']}/"
    assert final["run_id"] in browser.page_source
    _no_script_ran(browser)

    browser.get(f"{board.url}/run-locally")
    assert (
        browser.find_element(By.ID, "public-key").text == httpx.get(board.url + "/api/v1/key", timeout=10).text.strip()
    )


KILL_TASKS = ["ispm-001", "ispm-002", "ispm-003", "ispm-004", "ispm-005", "ispm-006"]
KILL_LEASE_S = 10.0
KILL_HEARTBEAT_S = 1.0


def test_a_board_killed_mid_run_resumes_and_publishes_once(
    refs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The board started again is another worker: it takes the submission over once the dead one's lease ran out."""
    import time
    from datetime import UTC, datetime

    from runner.run.journal import RunStarted, SampleGraded, read_entries

    with FakeProvider() as candidate:
        candidate.push(Reply(body=openai_completion("ok", model=WIRE_MODEL)))
        settings: dict[str, Any] = {
            "board_id": "test-board-kill",
            "judges": ["ref#1", "ref#2"],
            "candidates": [CANDIDATE],
            "max_upload_bytes": 1 << 30,
            "smoke_task": TASK,
            "trial": {"tasks": KILL_TASKS, "epochs": 1, "calibration": "replay"},
            "lease_s": KILL_LEASE_S,
            "heartbeat_s": KILL_HEARTBEAT_S,
        }
        env = {"OPENAI_API_KEY": "sk-board-e2e", "OPENAI_BASE_URL": candidate.openai_base}
        board = BoardProcess(tmp_path / "board", settings, env).start()
        try:
            monkeypatch.setenv("ISPM_BOARD_TOKEN", board.token("erin"))
            receipt = submit(board.url, refs["agent-replay"].tag, CANDIDATE, "killed mid-run")
            journal = board.folder / "data" / "runs" / f"submission-{receipt['id']}" / "journal.jsonl"
            deadline = time.monotonic() + 300
            while not (journal.is_file() and any(isinstance(e, SampleGraded) for e in read_entries(journal))):
                assert time.monotonic() < deadline, "the run never graded a sample"
                time.sleep(0.1)
            board.kill()
            killed_at = datetime.now(UTC)
            graded_before = sum(isinstance(e, SampleGraded) for e in read_entries(journal))
            assert graded_before < len(KILL_TASKS)
            board.start()
            final = watch_submission(board.url, receipt["id"], every_s=0.5)
        finally:
            board.stop()
    assert final["state"] == "published", final
    entries = read_entries(journal)
    starts = [e for e in entries if isinstance(e, RunStarted)]
    assert [s.resumed for s in starts] == [False, True]
    # The dead board's last renewal came at most a heartbeat before the kill: its lease held until it ran out.
    waited = (datetime.fromisoformat(starts[1].ts) - killed_at).total_seconds()
    assert waited >= KILL_LEASE_S - KILL_HEARTBEAT_S - 0.5, waited
    graded = [(e.task_id, e.epoch) for e in entries if isinstance(e, SampleGraded)]
    assert sorted(graded) == [(t, 1) for t in KILL_TASKS]  # each sample graded once, none twice
    published = sorted((board.folder / "data" / "published").glob("*.tar.gz"))
    assert [p.name for p in published] == [f"{final['run_id']}.tar.gz"]
    assert verify(published[0], board.folder / "data" / "board.pub").problems == []
