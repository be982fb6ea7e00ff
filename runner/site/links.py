"""Where each page lives: absolute paths on a board, relative file names in a static site.

A static site opens from the file system, where a folder link does not open its ``index.html``: every link names
a file, relative to the page that holds it (``depth`` folders below the site's root).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from runner.record.report import REPORT_NAME
from runner.site.model import SiteMode

PAGES: dict[str, tuple[str, str]] = {
    "contract": ("/", "index.html"),
    "tasks": ("/tasks", "tasks.html"),
    "dataset": ("/dataset", "dataset.html"),
    "leaderboard": ("/leaderboard", "leaderboard.html"),
    "scoring": ("/scoring", "scoring.html"),
    "submit": ("/submit", "submit.html"),
    "local": ("/run-locally", "run-locally.html"),
}
"""Each top-level page: its path on a board and its file in a static site."""
DOWNLOADS_DIR = "files"
"""Where the dataset's files sit, under ``/dataset/`` on a board and ``dataset/`` in a static site."""


@dataclass(frozen=True)
class Links:
    """The links of one page."""

    mode: SiteMode
    depth: int = 0
    """How many folders below the site's root the page sits (static only)."""

    @property
    def _up(self) -> str:
        return "../" * self.depth

    def page(self, key: str) -> str:
        """A top-level page (a key of :data:`PAGES`)."""
        server, static = PAGES[key]
        return server if self.mode == "server" else self._up + static

    def task(self, task_id: str) -> str:
        """One task's page."""
        name = quote(task_id, safe="")
        return f"/tasks/{name}" if self.mode == "server" else f"{self._up}tasks/{name}.html"

    def table(self, table: str) -> str:
        """One table's page."""
        name = quote(table, safe="")
        return f"/dataset/{name}" if self.mode == "server" else f"{self._up}dataset/{name}.html"

    def download(self, name: str) -> str:
        """One of the dataset's files."""
        file = quote(name, safe="")
        return (
            f"/dataset/{DOWNLOADS_DIR}/{file}" if self.mode == "server" else f"{self._up}dataset/{DOWNLOADS_DIR}/{file}"
        )

    def run_report(self, run_id: str) -> str:
        """A published run's report page (a folder, so the report's links to its sample pages resolve)."""
        name = quote(run_id, safe="")
        return f"/runs/{name}/" if self.mode == "server" else f"{self._up}runs/{name}/{REPORT_NAME}"

    def tasks_where(self, axis: str, value: str) -> str:
        """The task list filtered on one value (a static site's list reads the same query in the browser)."""
        return f"{self.page('tasks')}?{quote(axis)}={quote(value, safe='')}"
