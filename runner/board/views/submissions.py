"""The submissions: the list of every one (``/submissions``) and each one's status page, which reloads itself
while the submission is open."""

from __future__ import annotations

from sqlalchemy import select, true
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
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

    def status(self, request: Request) -> Response:
        """One submission's status page (not cached: it shows the run's progress)."""
        sub = self.board.submission(inputs.submission_id(request.path_params["id"]))
        refresh = None if sub.state in CLOSED else pages.REFRESH_S
        return HTMLResponse(pages.board_page("status", f"Submission {sub.id}", s=sub, refresh_s=refresh))

    def _render(self) -> str:
        with self.board.ctx.sessions() as session:
            subs = list(session.scalars(select(Submission).order_by(Submission.id.desc())))
        return pages.board_page("submissions", "Submissions", submissions=subs)

    async def listing(self, request: Request) -> Response:
        """Every submission, newest first."""
        page = await self.board.cache.page("submissions", self._render, lambda: self.board.stamp(true()))
        return html(request, page)
