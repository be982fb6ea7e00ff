"""The publisher's site as the board serves it (``runner.site``): the contract at ``/``, the tasks, the dataset,
the scoring and how to submit.

Every page is rendered once per change of what it shows (``runner.board.pagecache``). A search of the task list
(``/tasks?q=...``) is cached by its query (``BoardSite.searches``, the most recently served first), and a search
not cached renders one at a time, with at most :data:`SEARCHES_WAITING` waiting (more are a 503): a flood of searches
costs one thread, and leaves the other routes theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from runner.board.errors import BoardError
from runner.board.views.shared import BoardSite, html
from runner.site import render
from runner.site.errors import PageNotFound
from runner.site.render import shown
from runner.site.results import task_results
from runner.world import MANIFEST_NAME, SNAPSHOT_NAME

SEARCHES_WAITING: Final = 16
"""Searches that may wait for the one render at a time; past it a search is a 503."""
MAX_SEARCH: Final = 2000
"""A search's query string, in characters (the task list's filters are short)."""


class SitePages:
    """``/``, ``/tasks``, ``/tasks/<id>``, ``/dataset``, ``/dataset/<table>``, its files, ``/scoring``,
    ``/submit``."""

    def __init__(self, board: BoardSite) -> None:
        """Serve ``board``'s site pages."""
        self.board = board
        self._search_slot = anyio.CapacityLimiter(1)
        self._waiting = 0

    def routes(self) -> list[Route]:
        """This page kind's routes."""
        return [
            Route("/", self.contract),
            Route("/tasks", self.tasks),
            Route("/tasks/{task_id}", self.task),
            Route("/dataset", self.dataset),
            Route("/dataset/files/{name}", self.dataset_file),
            Route("/dataset/{table}", self.table),
            Route("/scoring", self.scoring),
            Route("/submit", self.submit),
            Route("/favicon.ico", self.favicon),
        ]

    async def contract(self, request: Request) -> Response:
        """The contract: what an agent must do and how it is graded."""
        board = self.board
        return html(request, await board.cache.page("/", lambda: render.contract_page(board.sources, board.top)))

    def _tasks(self, params: Mapping[str, str]) -> str:
        runs = self.board.published_runs()
        return render.tasks_page(self.board.sources, self.board.top, task_results(runs), params, runs=len(runs))

    async def tasks(self, request: Request) -> Response:
        """The task list, filtered by the query's parameters."""
        params = {k: v for k, v in request.query_params.items() if v}
        if not params:
            page = await self.board.cache.page("/tasks", lambda: self._tasks({}), self.board.closed_stamp)
            return html(request, page)
        key = "&".join(f"{k}={v}" for k, v in sorted(params.items()))
        if len(key) > MAX_SEARCH:
            raise BoardError(f"a search of the task list is at most {MAX_SEARCH} characters", status=414)
        if self._waiting >= SEARCHES_WAITING and not self.board.searches.holds(key):
            raise BoardError("too many searches at once: try again in a moment", status=503)
        self._waiting += 1
        try:
            async with self._search_slot:
                page = await self.board.searches.page(key, lambda: self._tasks(params), self.board.closed_stamp)
        finally:
            self._waiting -= 1
        return html(request, page)

    async def task(self, request: Request) -> Response:
        """One task: its question, its ground truth, and every published run's grades on it."""
        board = self.board
        task_id = request.path_params["task_id"]
        if task_id not in board.task_ids:  # checked first: only real tasks' pages are cached
            raise PageNotFound(f"There is no task {shown(task_id)!r} in the v1 task set.")

        def page() -> str:
            return render.task_page(board.sources, board.top, task_results(board.published_runs()), task_id)

        return html(request, await board.cache.page(f"/tasks/{task_id}", page, board.closed_stamp))

    async def dataset(self, request: Request) -> Response:
        """The dataset: its tables and files."""
        board = self.board
        return html(request, await board.cache.page("/dataset", lambda: render.dataset_page(board.sources, board.top)))

    async def table(self, request: Request) -> Response:
        """One table's columns."""
        board = self.board
        name = request.path_params["table"]
        if name not in board.table_names:
            raise PageNotFound(f"There is no table {shown(name)!r} in {board.sources.manifest.dataset}.")
        page = await board.cache.page(f"/dataset/{name}", lambda: render.table_page(board.sources, board.top, name))
        return html(request, page)

    def dataset_file(self, request: Request) -> Response:
        """The world's snapshot or manifest."""
        name = request.path_params["name"]
        if name not in (SNAPSHOT_NAME, MANIFEST_NAME):
            raise PageNotFound(f"The dataset has no file {shown(name)!r}.")
        path = self.board.sources.world / name
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")

    async def scoring(self, request: Request) -> Response:
        """How runs are scored."""
        board = self.board
        return html(request, await board.cache.page("/scoring", lambda: render.scoring_page(board.sources, board.top)))

    async def submit(self, request: Request) -> Response:
        """How to submit to this board (rendered once per address it names)."""
        board = self.board
        base_url = board.base(request)
        page = await board.keyed.page(
            f"/submit@{base_url}", lambda: render.submit_page(board.sources, board.top, board.facts, base_url)
        )
        return html(request, page)

    def favicon(self, request: Request) -> Response:
        """No icon, and no 404 in every visitor's console."""
        return Response(status_code=204)
