"""The board's pages and API, one module per kind of page (as Datasette's ``views``): each holds a class over the
shared :class:`~runner.board.views.shared.BoardSite` whose ``routes()`` the app mounts.

- ``site_pages``: the publisher's site (``/``, ``/tasks``, ``/dataset``, ``/scoring``, ``/submit``);
- ``leaderboard``: ``/leaderboard``;
- ``submissions``: ``/submissions`` and each submission's status page;
- ``runs``: a published run's report, sample pages and downloads;
- ``local``: "Run it locally" and the single-file ``ispm``;
- ``api``: ``/api/v1/...``, the submission API and the public key.
"""

from __future__ import annotations

from starlette.routing import Route

from runner.board.views.api import SubmissionApi
from runner.board.views.leaderboard import LeaderboardPage
from runner.board.views.local import LocalPages
from runner.board.views.runs import RunPages
from runner.board.views.shared import BoardSite
from runner.board.views.site_pages import SitePages
from runner.board.views.submissions import SubmissionPages


def routes(board: BoardSite) -> list[Route]:
    """Every route of the board, page kind by page kind."""
    kinds = (SitePages, LeaderboardPage, SubmissionPages, RunPages, LocalPages, SubmissionApi)
    return [route for kind in kinds for route in kind(board).routes()]


__all__ = ["BoardSite", "routes"]
