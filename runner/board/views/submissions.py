"""The submissions: the list of every one (``/submissions``) and each one's status page, which reloads itself
while the submission is open."""

from __future__ import annotations

import anyio.to_thread
from sqlalchemy import select, true
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runner.board import inputs, pages
from runner.board.db import Submission
from runner.board.states import CLOSED
from runner.board.views.shared import BoardSite, html


class SubmissionPages:
    """``/submissions`` and ``/submissions/<id>``."""

    def __init__(self, board: BoardSite) -> None:
        """Serve ``board``'s submissions."""
        self.board = board

    def routes(self) -> list[Route]:
        """This page kind's routes."""
        return [Route("/submissions", self.listing), Route("/submissions/{id:int}", self.status)]

    def _status(self, sub_id: int) -> str:
        sub = self.board.submission(sub_id)
        refresh = None if sub.state in CLOSED else pages.REFRESH_S
        return pages.board_page("status", f"Submission {sub.id}", s=sub, refresh_s=refresh)

    async def status(self, request: Request) -> Response:
        """One submission's status page, rendered again only when its row moves (its progress, its state)."""
        board = self.board
        sub_id = inputs.submission_id(request.path_params["id"])
        route = f"/submissions/{sub_id}"
        if not board.keyed.holds(route):
            await anyio.to_thread.run_sync(board.submission, sub_id)  # a 404 for no such submission, never cached
        page = await board.keyed.page(route, lambda: self._status(sub_id), lambda: board.row_stamp(sub_id))
        return html(request, page)

    def _render(self) -> str:
        with self.board.ctx.sessions() as session:
            subs = list(session.scalars(select(Submission).order_by(Submission.id.desc())))
        return pages.board_page("submissions", "Submissions", submissions=subs)

    async def listing(self, request: Request) -> Response:
        """Every submission, newest first."""
        page = await self.board.cache.page("submissions", self._render, lambda: self.board.stamp(true()))
        return html(request, page)
