"""``/leaderboard``: the site's leaderboard of the published runs, with the board's panel (its key, and the
submissions not published and why) on top."""

from __future__ import annotations

from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runner.board import pages
from runner.board.db import Submission
from runner.board.states import SubmissionState
from runner.board.views.shared import BoardSite, html
from runner.site import render


class LeaderboardPage:
    """``/leaderboard``."""

    def __init__(self, board: BoardSite) -> None:
        """Serve ``board``'s leaderboard."""
        self.board = board

    def routes(self) -> list[Route]:
        """This page kind's routes."""
        return [Route("/leaderboard", self.leaderboard)]

    def _render(self) -> str:
        board = self.board
        with board.ctx.sessions() as session:
            closed = list(
                session.scalars(
                    select(Submission)
                    .where(Submission.state.in_([SubmissionState.FAILED, SubmissionState.CANCELLED]))
                    .order_by(Submission.id)
                )
            )
        panel = pages.board_panel(closed, board_id=board.ctx.config.board_id, key_sha256=board.key_sha)
        return render.leaderboard_page(board.sources, board.top, board.published_runs(), panel)

    async def leaderboard(self, request: Request) -> Response:
        """The leaderboard, rendered once per publish, failure or cancel."""
        return html(request, await self.board.cache.page("leaderboard", self._render, self.board.closed_stamp))
