"""The site's pages for a board's process: each rendered once per change of what it shows.

Pages that show only the project's own definitions (the contract, the dataset, a table, the scoring page) never
change while the process runs: each is rendered on first use and kept. Pages that show published runs (the task
list, a task) are kept until the set of published runs changes, and the leaderboard until those or the board's panel
(the submissions not published) change. A filtered task list and the submit page (it names the request's address) are
rendered for each request: a visitor's parameters are never cache keys, so nobody can fill the memory.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from markupsafe import Markup

from runner.site import render
from runner.site.filters import AXES
from runner.site.links import Links
from runner.site.model import BoardFacts, PublishedRun, SiteSources, TaskResultCell
from runner.site.results import task_results


class SitePages:
    """The pages a board serves over fixed ``sources``, with server links."""

    def __init__(self, sources: SiteSources, board: BoardFacts | None = None) -> None:
        self.sources = sources
        self.board = board
        self.top = Links("server")
        self._lock = threading.Lock()
        self._fixed: dict[str, str] = {}
        self._runs_key: tuple[str, ...] = ()
        self._runs: tuple[PublishedRun, ...] = ()
        self._results: dict[str, tuple[TaskResultCell, ...]] = {}
        self._with_runs: dict[str, str] = {}
        self._leaderboard: tuple[tuple[tuple[str, ...], str], str] | None = None

    def _fixed_page(self, key: str, build: render.PageBuilder) -> str:
        with self._lock:
            page = self._fixed.get(key)
        if page is None:
            page = build()
            with self._lock:
                self._fixed[key] = page
        return page

    def publish(self, runs: Sequence[PublishedRun]) -> None:
        """Show ``runs`` from now on; pages that show runs are rendered afresh only when the set changed."""
        key = tuple(r.record.run_id for r in runs)
        with self._lock:
            if key == self._runs_key:
                return
        results = task_results(runs)
        with self._lock:
            self._runs_key, self._runs, self._results = key, tuple(runs), results
            self._with_runs = {}

    def _run_page(self, key: str, build: render.PageBuilder) -> str:
        with self._lock:
            page = self._with_runs.get(key)
            runs_key = self._runs_key
        if page is None:
            page = build()
            with self._lock:
                if runs_key == self._runs_key:
                    self._with_runs[key] = page
        return page

    def contract(self) -> str:
        """``/``."""
        return self._fixed_page("contract", lambda: render.contract_page(self.sources, self.top))

    def dataset(self) -> str:
        """``/dataset``."""
        return self._fixed_page("dataset", lambda: render.dataset_page(self.sources, self.top))

    def table(self, name: str) -> str:
        """``/dataset/<table>``. Raises ``PageNotFound`` for a table the world does not have (never cached)."""
        if name not in {t.name for t in self.sources.tables}:
            return render.table_page(self.sources, Links("server"), name)  # raises PageNotFound
        return self._fixed_page(f"table/{name}", lambda: render.table_page(self.sources, Links("server"), name))

    def scoring(self) -> str:
        """``/scoring``."""
        return self._fixed_page("scoring", lambda: render.scoring_page(self.sources, self.top))

    def submit(self, board_url: str) -> str:
        """``/submit``, naming ``board_url`` (the request's: rendered for each request, never cached)."""
        return render.submit_page(self.sources, self.top, self.board, board_url)

    def tasks(self, params: Mapping[str, str]) -> str:
        """``/tasks``, filtered by ``params``."""
        if not any(params.get(axis) for axis in (*AXES, "q")):
            return self._run_page("tasks", lambda: self._tasks({}))
        return self._tasks(params)

    def _tasks(self, params: Mapping[str, str]) -> str:
        return render.tasks_page(self.sources, self.top, self._results, params, runs=len(self._runs))

    def task(self, task_id: str) -> str:
        """``/tasks/<id>``. Raises ``PageNotFound`` for an id the task set does not have (never cached)."""
        if task_id not in {t.id for t in self.sources.tasks}:
            return render.task_page(self.sources, self.top, self._results, task_id)  # raises PageNotFound
        return self._run_page(
            f"task/{task_id}", lambda: render.task_page(self.sources, self.top, self._results, task_id)
        )

    def leaderboard(self, panel: Markup | None = None) -> str:
        """``/leaderboard`` with the board's ``panel``: kept until the published runs or the panel change."""
        key = (self._runs_key, str(panel or ""))
        with self._lock:
            kept = self._leaderboard
        if kept is not None and kept[0] == key:
            return kept[1]
        page = render.leaderboard_page(self.sources, self.top, self._runs, panel)
        with self._lock:
            self._leaderboard = (key, page)  # one page kept, the latest: the panel is the board's, not a visitor's
        return page

    def not_found(self, message: str) -> str:
        """The 404 page."""
        return render.not_found_page(self.sources, self.top, message)
