"""What the site's browser tests share: a headless Chromium that keeps its console log, and the checks every page
gets (its links, its console, its form labels).

Selenium is pointed at Debian's chromedriver explicitly, so it never downloads a driver (``make browser``).
"""

from __future__ import annotations

from collections.abc import Iterator
from html.parser import HTMLParser

import pytest
from chromium import open_chromium
from selenium.webdriver.remote.webdriver import WebDriver


@pytest.fixture(scope="module")
def chromium() -> Iterator[WebDriver]:
    with open_chromium(1400, 1000) as driver:
        yield driver


def console_errors(driver: WebDriver) -> list[str]:
    """The console's errors since the last call (the log is drained by reading it)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]  # type: ignore[no-untyped-call]


UNLABELLED = """
return Array.from(document.querySelectorAll("input, select, textarea, button")).filter(function (el) {
  if (el.type === "hidden") return false;
  if (el.tagName === "BUTTON") return !el.textContent.trim() && !el.getAttribute("aria-label");
  return el.labels.length === 0 && !el.getAttribute("aria-label");
}).map(function (el) { return el.outerHTML; });
"""
"""A script that lists the page's form controls without a label (a ``<label>``, or an ``aria-label``)."""


def unlabelled_controls(driver: WebDriver) -> list[str]:
    """Every form control on the current page that has no label."""
    found = driver.execute_script(UNLABELLED)
    assert isinstance(found, list)
    return [str(x) for x in found]


class PageLinks(HTMLParser):
    """Every link a page holds (``a href``, ``link href``, ``script src``, ``img src``) and every element id."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        target = values.get("href") if tag in ("a", "link") else values.get("src") if tag in ("script", "img") else None
        if target:
            self.links.append(target)


def is_internal(link: str) -> bool:
    """Whether a link stays on the site (not another scheme or host)."""
    return not link.startswith(("http://", "https://", "mailto:", "//", "javascript:", "data:"))


VISIBLE_ROWS = """
return Array.from(document.querySelectorAll("#task-list tr.task-row"))
  .filter(function (r) { return r.offsetParent !== null; }).map(function (r) { return r.id.slice(4); });
"""


def visible_task_rows(driver: WebDriver) -> list[str]:
    """The ids of the task list's shown rows, read in one script (one round trip; a list swapped in meanwhile is
    read whole, never half)."""
    found = driver.execute_script(VISIBLE_ROWS)
    assert isinstance(found, list)
    return [str(x) for x in found]
