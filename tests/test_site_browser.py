"""The static site (``ispm site build``), opened from the file system in a real headless Chromium.

One build per module (with the ``mixed`` run published, so results and report links show). Every internal link of
every page must name a file the build wrote (and, with a fragment, an id on it); the main pages load with no
console error and every form control labelled; the task list's filters, search and linked queries work in the
browser; a task link opens its page. Screenshots land in /tmp/ispm-site-*.png for people to look at.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
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

from runner.paths import tasks_dir
from runner.record.build import load_record
from runner.site.build import build_site, published_from_folders
from runner.site.sources import load_sources
from runner.tasks.load import load_tasks
from runner.trace.sample_page import SAMPLES_DIR

__all__ = ["chromium", "mixed"]  # fixtures, imported for pytest
pytestmark = pytest.mark.browser
TASKS = load_tasks(tasks_dir())
MAIN_PAGES = ["index.html", "tasks.html", "dataset.html", "leaderboard.html", "scoring.html", "submit.html",
              "run-locally.html", "tasks/ispm-001.html", "tasks/ispm-118.html", "dataset/okta_users.html"]  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, mixed: Path) -> Path:
    # Built in-process (the command's own output is tested in test_site.py): one interpreter start less.
    out = tmp_path_factory.mktemp("site") / "public"
    runs, reports = published_from_folders([mixed])
    built = build_site(load_sources(), out, runs, reports)
    assert (built.pages, built.runs) == (201, 1)
    return out


def test_every_internal_link_on_every_page_names_a_file_of_the_site(site: Path, mixed: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    sample_pages = len(list((mixed / SAMPLES_DIR).glob("*.html")))
    assert sample_pages == 20  # 10 tasks x 2 epochs
    assert len(pages) == 201 + 1 + sample_pages  # the site, and the published run's report with its sample pages
    ids = {page: PageLinks(page.read_text(encoding="utf-8")).ids for page in pages}
    checked = 0
    for page in pages:
        for link in PageLinks(page.read_text(encoding="utf-8")).links:
            if not is_internal(link):
                continue
            parts = urlsplit(link)
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file() and target.is_relative_to(site.resolve()), f"{page.relative_to(site)}: {link}"
            if parts.fragment and target.suffix == ".html":
                assert parts.fragment in ids[target], f"{page.relative_to(site)}: {link} (no such id)"
            checked += 1
    assert checked > 8 * 201  # at least the header's eight links on each site page


def test_the_main_pages_load_without_console_errors_and_label_every_control(
    chromium: WebDriver, site: Path, tmp_path: Path
) -> None:
    console_errors(chromium)
    for name in MAIN_PAGES:
        chromium.get((site / name).as_uri())
        assert chromium.title.endswith("ISPM-Enterprise-SQL@v1"), name
        assert console_errors(chromium) == [], name
        assert unlabelled_controls(chromium) == [], name
    chromium.get((site / "index.html").as_uri())
    screenshot(chromium, Path("/tmp/ispm-site-contract.png"))


def test_the_task_list_filters_and_searches_in_the_browser(chromium: WebDriver, site: Path) -> None:
    chromium.get((site / "tasks.html").as_uri())
    assert visible_task_rows(chromium) == [t.id for t in TASKS]
    Select(chromium.find_element(By.ID, "filter-vendor")).select_by_value("okta")
    okta = [t.id for t in TASKS if "okta" in t.vendors]
    assert visible_task_rows(chromium) == okta
    Select(chromium.find_element(By.ID, "filter-kind")).select_by_value("verdict")
    both = [t.id for t in TASKS if "okta" in t.vendors and t.kind == "verdict"]
    assert 0 < len(both) < len(okta) and visible_task_rows(chromium) == both
    assert chromium.find_element(By.ID, "shown-count").text == str(len(both))
    Select(chromium.find_element(By.ID, "filter-kind")).select_by_value("")
    chromium.find_element(By.ID, "filter-q").send_keys("GitHub organization")
    found = [t.id for t in TASKS if "okta" in t.vendors and all(w in (t.id + t.title + t.prompt).lower()
                                                               for w in ("github", "organization"))]  # fmt: skip
    WebDriverWait(chromium, 5).until(lambda d: visible_task_rows(d) == found)
    assert found and console_errors(chromium) == []
    screenshot(chromium, Path("/tmp/ispm-site-tasks.png"))


def test_a_linked_query_filters_the_static_list_and_an_unknown_value_says_so(chromium: WebDriver, site: Path) -> None:
    chromium.get((site / "tasks.html").as_uri() + "?vendor=okta&trap=pim_eligible")
    assert visible_task_rows(chromium) == [
        t.id for t in TASKS if "okta" in t.vendors and "pim_eligible" in t.trap_families
    ]
    chromium.get((site / "tasks.html").as_uri() + "?vendor=%3Cscript%3Ewindow.pwned%3D1%3C%2Fscript%3E")
    assert visible_task_rows(chromium) == []
    empty = chromium.find_element(By.ID, "empty-result")
    assert empty.is_displayed() and "vendor: no task has the value '<script>window.pwned=1</script>'" in empty.text
    assert chromium.execute_script("return window.pwned === undefined") is True
    assert console_errors(chromium) == []


def test_a_task_link_opens_the_task_page_with_its_results(chromium: WebDriver, site: Path, mixed: Path) -> None:
    chromium.get((site / "tasks.html").as_uri() + "?q=ispm-046")
    chromium.find_element(By.LINK_TEXT, "ispm-046").click()
    assert chromium.current_url.endswith("/tasks/ispm-046.html")
    task = next(t for t in TASKS if t.id == "ispm-046")
    assert task.title in chromium.find_element(By.TAG_NAME, "h1").text
    run_id = load_record(mixed).run_id
    results = chromium.find_element(By.ID, "task-results")
    assert run_id in results.text and "incorrect" in results.text  # the mixed run answered it with nothing
    results.find_element(By.LINK_TEXT, run_id).click()
    assert run_id in chromium.title  # the copied report, opened from the file system
    screenshot(chromium, Path("/tmp/ispm-site-report-from-task.png"))
