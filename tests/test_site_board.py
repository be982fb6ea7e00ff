"""The site as a real board serves it: ``ispm board serve`` on loopback (SQLite), with one published run.

The run is the ``mixed`` run of the report tests, written into the board's database as a published submission,
as a worker would leave it. Every site page answers with its content, every internal link on every site page
resolves, bad input gets a 404 page or an empty result that says so, and the task list's filters work in Chromium
against the server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest
from board_fixtures import BoardProcess
from chromium import screenshot
from report_runs import mixed
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait
from site_fixtures import (
    PageLinks,
    chromium,
    console_errors,
    is_internal,
    unlabelled_controls,
    visible_task_rows,
)
from sqlalchemy import create_engine, text

from runner.paths import tasks_dir, world_dir
from runner.record.build import load_record
from runner.tasks.load import load_tasks
from runner.world import MANIFEST_NAME, SNAPSHOT_NAME
from runner.world.manifest import load_manifest

__all__ = ["chromium", "mixed"]  # fixtures, imported for pytest
TASKS = load_tasks(tasks_dir())
SITE_PAGES = ("/", "/tasks", "/dataset", "/leaderboard", "/scoring", "/submit")
SCRIPT = "<script>window.pwned=1</script>"


def _publish(board: BoardProcess, run_dir: Path, name: str) -> None:
    """A published submission of ``run_dir``, written to the board's SQLite as a worker leaves one."""
    engine = create_engine(f"sqlite:///{board.folder / 'data' / 'board.sqlite'}")
    try:
        with engine.begin() as db:
            # The token row the submission hangs off; its secret is never used, so only its hash is made up.
            db.execute(
                text(
                    "INSERT INTO tokens (submitter, token_sha256, created_at, open_limit)"
                    " VALUES ('publisher', :h, '2026-12-01', 1)"
                ),
                {"h": "0" * 64},
            )
            (token_id,) = db.execute(text("SELECT id FROM tokens WHERE submitter = 'publisher'")).one()
            db.execute(
                text(
                    "INSERT INTO submissions (token_id, display_name, candidate, links, state, upload_sha256,"
                    " upload_bytes, image_id, image_tag, samples_done, samples_planned, created_at, updated_at,"
                    " run_id, run_dir, published_at)"
                    " VALUES (:t, :n, 'openai/cand', '[]', 'published', '', 0, '', '', 20, 20, '2026-12-01',"
                    " '2026-12-01', :r, :d, '2026-12-01')"
                ),
                {"t": token_id, "n": name, "r": load_record(run_dir).run_id, "d": str(run_dir)},
            )
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, mixed: Path) -> Iterator[BoardProcess]:
    settings = {"board_id": "test-site", "judges": ["ref#1", "ref#2"], "candidates": ["openai/cand"]}
    process = BoardProcess(tmp_path_factory.mktemp("board-site"), settings).start()
    _publish(process, mixed, "Mixed <b>agent</b>")
    try:
        yield process
    finally:
        process.stop()


def _get(board: BoardProcess, path: str) -> httpx.Response:
    return httpx.get(board.url + path, timeout=30)


def _rows(html: str) -> list[str]:
    return re.findall(r'<tr class="task-row" id="row-([^"]+)"', html)


def test_every_site_page_answers_with_its_content(board: BoardProcess, mixed: Path) -> None:
    manifest = load_manifest(world_dir() / MANIFEST_NAME)
    expected = {
        "/": ["What every conforming run holds constant", "answer_correctness", "Structural coverage."],
        "/tasks": ["All 127 tasks", "127 of 127 tasks shown; results of 1 published run."],
        "/tasks/ispm-001": ["Leavers who can still sign in to Okta", "Witness SQL", "Dual witness", "lumen_login"],
        "/dataset": [manifest.logical_digest, manifest.snapshot.sha256, manifest.publish_date, "okta_users"],
        "/dataset/okta_users": ["First 20 rows of", "Columns"],
        "/leaderboard": [f'<a href="/runs/{load_record(mixed).run_id}/">', "test-site", 'href="/tasks"'],
        "/scoring": ["How a run becomes a score", "Consensus, both rules"],
        "/submit": ["ispm submit --board " + board.url, "openai/cand"],
    }
    for path, needles in expected.items():
        response = _get(board, path)
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/html"), path
        shown = " ".join(re.sub(r"<[^>]+>", "", response.text).split())
        for needle in needles:
            assert needle in response.text or needle in shown, f"{path}: {needle}"
    assert _rows(_get(board, "/tasks").text) == [t.id for t in TASKS]


def test_a_vendor_filter_answers_exactly_the_tasks_that_touch_it(board: BoardProcess) -> None:
    for vendor in ("okta", "atlas"):
        html = _get(board, f"/tasks?vendor={vendor}").text
        assert _rows(html) == [t.id for t in TASKS if vendor in t.vendors]


def test_a_published_run_shows_on_the_task_list_and_its_task_pages(board: BoardProcess, mixed: Path) -> None:
    record = load_record(mixed)
    assert record.scores is not None
    graded = {r.task_id: r.grades["answer_correctness"] for r in record.scores.tasks}
    html = _get(board, "/tasks").text
    for task_id, grade in graded.items():
        row = html.split(f'id="row-{task_id}"')[1].split("</tr>")[0]
        assert f'class="g {grade}"' in row and record.run_id in row, task_id
    page = _get(board, "/tasks/ispm-046").text
    assert f'<a href="/runs/{record.run_id}/">{record.run_id}</a>' in page
    assert "Mixed &lt;b&gt;agent&lt;/b&gt; (openai/cand)" in page  # the submitter's name, escaped


def test_every_internal_link_on_every_site_page_resolves(board: BoardProcess) -> None:
    seen: dict[str, int] = {}
    pages = list(SITE_PAGES)
    site_page = re.compile(r"^/(tasks|dataset)(/[^/]+)?$|^/(leaderboard|scoring|submit)?$")
    with httpx.Client(base_url=board.url, timeout=30) as client:
        while pages:
            path = pages.pop()
            response = client.get(path)
            seen[path] = response.status_code
            assert response.status_code == 200, path
            if not response.headers["content-type"].startswith("text/html") or not site_page.match(path):
                continue  # a file, a report or a board page: it must answer, but it is not the site's to crawl
            for link in PageLinks(response.text).links:
                if not is_internal(link):
                    continue
                target = urlsplit(urljoin(board.url + path, link))
                if target.path not in seen and target.path not in pages:
                    pages.append(target.path)
    assert sum(p.startswith("/tasks/") for p in seen) == 127
    assert sum(p.startswith("/dataset/") and not p.startswith("/dataset/files/") for p in seen) == 67
    assert {"/dataset/files/" + SNAPSHOT_NAME, "/dataset/files/" + MANIFEST_NAME, "/run-locally"} <= set(seen)


def test_the_downloads_are_the_files_whose_digests_the_dataset_page_shows(board: BoardProcess) -> None:
    page = _get(board, "/dataset").text
    for name in (SNAPSHOT_NAME, MANIFEST_NAME):
        body = _get(board, f"/dataset/files/{name}").content
        assert body == (world_dir() / name).read_bytes()
        assert hashlib.sha256(body).hexdigest() in page


@pytest.mark.parametrize("path", ["/tasks/ispm-999", "/dataset/sqlite_master", "/dataset/files/board.sqlite",
                                  "/tasks/%3Cscript%3Ewindow.pwned=1%3C%2Fscript%3E", "/no/such/page"])  # fmt: skip
def test_an_unknown_page_is_the_sites_404_page(board: BoardProcess, path: str) -> None:
    response = _get(board, path)
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
    assert 'id="not-found"' in response.text and "All tasks" not in response.text
    assert SCRIPT not in response.text


def test_an_unknown_api_path_is_still_json(board: BoardProcess) -> None:
    response = _get(board, "/api/v1/nothing")
    assert response.status_code == 404 and response.json() == {"error": "Not Found"}


@pytest.mark.parametrize("axis", ["vendor", "q", "trap"])
def test_a_script_tag_in_a_filter_is_an_escaped_empty_result(board: BoardProcess, axis: str) -> None:
    response = httpx.get(board.url + "/tasks", params={axis: SCRIPT}, timeout=30)
    assert response.status_code == 200
    assert SCRIPT not in response.text and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in response.text
    assert _rows(response.text) == [] and "No task matches these filters." in response.text


@pytest.mark.browser
def test_the_task_filters_work_against_the_server_in_chromium(board: BoardProcess, chromium: WebDriver) -> None:
    console_errors(chromium)
    for path in SITE_PAGES:
        chromium.get(board.url + path)
        assert console_errors(chromium) == [] and unlabelled_controls(chromium) == [], path
    chromium.get(board.url + "/tasks")
    Select(chromium.find_element(By.ID, "filter-vendor")).select_by_value("okta")
    okta = [t.id for t in TASKS if "okta" in t.vendors]

    WebDriverWait(chromium, 10).until(lambda d: visible_task_rows(d) == okta)
    assert chromium.execute_script("return location.search") == "?vendor=okta"  # the address can be linked
    Select(chromium.find_element(By.ID, "filter-difficulty")).select_by_value("expert")
    expert = [t.id for t in TASKS if "okta" in t.vendors and t.difficulty == "expert"]
    WebDriverWait(chromium, 10).until(lambda d: visible_task_rows(d) == expert)
    assert chromium.find_element(By.ID, "shown-count").text == str(len(expert))
    assert console_errors(chromium) == []
    screenshot(chromium, Path("/tmp/ispm-site-board-tasks.png"))
    chromium.get(board.url + "/leaderboard")
    screenshot(chromium, Path("/tmp/ispm-site-leaderboard.png"))
