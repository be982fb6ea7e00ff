"""The board's web app (Starlette): the pages and the API of ``runner.board.views``, behind the request limits.

Every handler that touches the database or Docker runs in a thread; the upload streams the request body through
the archive reader as it arrives, so a large image never sits in memory. A path that names a page but for a
trailing slash is redirected with a relative ``location`` (never one built from the request's ``Host``).
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

from runner import log
from runner.board.context import BoardContext
from runner.board.errors import BoardError
from runner.board.views import BoardSite, routes
from runner.serving import ClientLimits, head_problem
from runner.site import render
from runner.site.errors import PageNotFound
from runner.site.render import shown
from runner.site.sources import load_sources

_log = log.get(__name__)


def create_app(ctx: BoardContext) -> Starlette:
    """The board's ASGI app over ``ctx``."""
    board = BoardSite(ctx=ctx, sources=load_sources())

    async def board_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BoardError)
        # A refused upload may be refused mid-body: the connection closes, so the client stops sending at once
        # rather than the board reading (and dropping) the rest of a stream it has refused.
        headers = {"connection": "close"} if request.method == "POST" else None
        return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=headers)

    async def client_gone(request: Request, exc: Exception) -> Response:
        # Nothing will read this answer: the client went away while sending its body.
        _log.info("board.client_disconnected", method=request.method, path=request.url.path)
        return Response(status_code=400)

    async def page_not_found(request: Request, exc: Exception) -> Response:
        path = request.url.path
        if isinstance(exc, HTTPException) and not isinstance(exc, PageNotFound):
            other = path.rstrip("/") if path.endswith("/") else path + "/"
            if other != path and other and _matches(app, request.scope, other):
                # Percent-encoded: the path is decoded, and a control or non-ASCII character is no header byte.
                return Response(status_code=308, headers={"location": quote(other)})
        if isinstance(exc, HTTPException) and path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        message = str(exc) if isinstance(exc, PageNotFound) else f"There is no page at {shown(path)!r}."
        return HTMLResponse(render.not_found_page(board.sources, board.top, message), status_code=404)

    handlers = {
        BoardError: board_error, ClientDisconnect: client_gone, PageNotFound: page_not_found, 404: page_not_found,
    }  # fmt: skip
    middleware = [Middleware(ClientLimits, max_requests=ctx.config.max_per_client), Middleware(HeadLimits)]
    app = Starlette(routes=routes(board), middleware=middleware, exception_handlers=handlers)
    app.router.redirect_slashes = False  # Starlette's redirect names the request's Host: see page_not_found
    app.state.page_cache = board.cache  # tests and the bench count its renders
    app.state.board = board
    return app


def _matches(app: Starlette, scope: Scope, path: str) -> bool:
    """Whether a route of ``app`` answers ``path`` with the request's method."""
    other = {**scope, "path": path, "raw_path": path.encode()}
    return any(route.matches(other)[0] is Match.FULL for route in app.router.routes)


class HeadLimits:
    """The board's app behind the request head's size limits (``runner.serving.head_problem``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        problem = head_problem(scope) if scope["type"] == "http" else None
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, message = problem
        reply = JSONResponse({"error": message}, status_code=status, headers={"connection": "close"})
        await reply(scope, receive, send)
