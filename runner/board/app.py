"""The board's web app: the submission API, the public key, the pages and the downloads (Starlette).

Every handler that touches the database or Docker runs in a thread; the upload streams the request body to disk
as it arrives, so a large image never sits in memory.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread
from sqlalchemy import ColumnElement, func, select, true
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from runner import __version__, log
from runner.board import inputs, pages
from runner.board.cancel import cancel
from runner.board.context import PUBLISHED_DIR, BoardContext
from runner.board.db import CLOSED, Submission, utcnow
from runner.board.errors import BoardError
from runner.board.lease import Hold, lease_end
from runner.board.model import SubmissionView
from runner.board.pagecache import PageCache, RenderedPage
from runner.board.published import PublishedRecords
from runner.board.quarantine import board_tag, inspect_archive, load_image, remove_image
from runner.board.signing import public_pem
from runner.board.tokens import authenticate, bearer
from runner.board.upload import receive
from runner.record.model import RunRecord
from runner.record.report import REPORT_NAME
from runner.record.sample_page import sample_page_path
from runner.record.verify import public_key_sha256, statement_paths
from runner.serving import head_problem
from runner.site import render
from runner.site.errors import PageNotFound
from runner.site.links import Links
from runner.site.model import BoardFacts, PublishedRun
from runner.site.render import shown
from runner.site.results import published_run, task_results
from runner.site.sources import load_sources
from runner.world import MANIFEST_NAME, SNAPSHOT_NAME
from runner.world.digest import file_sha256

UPLOADS_DIR = "uploads"

_log = log.get(__name__)


def view(sub: Submission, base_url: str) -> SubmissionView:
    """The API's view of ``sub``."""
    fields = {k: getattr(sub, k) for k in SubmissionView.model_fields if k != "status_url"}
    return SubmissionView(**fields, status_url=f"{base_url}/submissions/{sub.id}")


def binary_sha256(path: Path) -> str:
    """sha256 of the served ``ispm`` binary, hashed once per version of the file, not on every page view (~100 MB)."""
    stat = path.stat()
    return _sha256_of(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _sha256_of(path: Path, mtime_ns: int, size: int) -> str:
    return file_sha256(path)


def _stamp(ctx: BoardContext, where: ColumnElement[bool]) -> Hashable:
    """How many submissions match ``where``, their last change, and sums of their ids and samples done: moves with
    any change to them (``updated_at`` keeps whole seconds, so the sums catch a second change within one second)."""
    with ctx.sessions() as session:
        row = session.execute(
            select(
                func.count(),
                func.max(Submission.updated_at),
                func.sum(Submission.id),
                func.sum(Submission.samples_done),
                func.sum(func.length(Submission.state)),
            ).where(where)
        ).one()
    return tuple(row)


def _html(request: Request, page: RenderedPage) -> Response:
    """``page``, gzipped for a client that accepts it."""
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers = {"content-encoding": "gzip", "vary": "accept-encoding"}
        return Response(page.gzipped, media_type="text/html; charset=utf-8", headers=headers)
    return Response(page.html, media_type="text/html; charset=utf-8", headers={"vary": "accept-encoding"})


def _full_record(run_dir: Path) -> RunRecord:
    return RunRecord.model_validate_json((run_dir / "record.json").read_text(encoding="utf-8"))


def _readable(sub: Submission, read: Callable[[Path], RunRecord]) -> RunRecord | None:
    """``read`` of the submission's run folder, or ``None``: a record gone or damaged on disk is logged and left
    off the page rather than taking the page down."""
    try:
        return read(Path(sub.run_dir or ""))
    except (OSError, ValueError) as exc:
        _log.warning("board.published_record_unreadable", submission=sub.id, error=str(exc)[:500])
        return None


def _label(sub: Submission) -> str:
    return f"{sub.display_name} ({sub.candidate})"


def _present(path: Path) -> Path:
    """``path``, or a 404 when it is gone (a board whose files were moved must not answer 500)."""
    if not path.is_file():
        raise BoardError(f"{path.name} is not on this board", status=404)
    return path


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def create_app(ctx: BoardContext) -> Starlette:
    """The board's ASGI app over ``ctx``."""
    config = ctx.config
    key_pem = public_pem(ctx.key).decode()
    key_sha = public_key_sha256(ctx.key.public_key())
    cache = PageCache()
    records = PublishedRecords(config.data_dir / PUBLISHED_DIR)
    # The publisher's site (runner/site): its sources are read once; its pages go through the page cache.
    sources = load_sources()
    top = Links("server")
    facts = BoardFacts(board_id=config.board_id, candidates=tuple(config.candidates), judges=tuple(config.judges))
    task_ids = {t.id for t in sources.tasks}
    table_names = {t.name for t in sources.tables}
    with_tasks: dict[str, PublishedRun] = {}  # each published run with its tasks' consensus, read once

    def check_submission(authorization: str | None, name: str, candidate: str) -> int:
        with ctx.sessions() as session:
            token = authenticate(session, bearer(authorization))
            inputs.display_name(name)
            if candidate not in config.candidates:
                raise BoardError(
                    f"this board does not serve the candidate {candidate!r}; it serves {config.candidates}"
                )
            open_count = session.scalar(
                select(func.count())
                .select_from(Submission)
                .where(Submission.token_id == token.id, Submission.state.not_in(CLOSED))
            )
            if (open_count or 0) >= token.open_limit:
                raise BoardError(
                    f"this token already has {open_count} open submissions (limit {token.open_limit})", status=429
                )
            return token.id

    def register(token_id: int, name: str, candidate: str, links: list[str], path: Path, size: int, sha: str) -> int:
        archive = inspect_archive(path)
        now = utcnow()
        # Held (under a lease) while its image loads, so no worker takes it before it has one.
        holder = f"{config.board_id}/upload/{secrets.token_hex(4)}"
        with ctx.sessions() as session, session.begin():
            sub = Submission(
                token_id=token_id, display_name=name, candidate=candidate, links=links, state="received",
                upload_sha256=sha, upload_bytes=size, image_id=archive.image_id, image_tag="",
                worker=holder, lease_until=lease_end(ctx), samples_done=0, samples_planned=0,
                created_at=now, updated_at=now,
            )  # fmt: skip
            session.add(sub)
            session.flush()
            sub_id = sub.id
        tag = board_tag(config.board_id, sub_id, archive)
        with Hold(ctx, sub_id, holder):
            try:
                image_id = load_image(path, archive, tag)
            except BoardError as exc:
                with ctx.sessions() as session, session.begin():
                    row = session.get_one(Submission, sub_id)
                    row.state, row.reason = "failed", f"quarantine: {exc}"
                raise
            with ctx.sessions() as session, session.begin():
                row = session.get_one(Submission, sub_id)
                row.image_id, row.image_tag = image_id, tag
                cancelled = row.state == "cancelled"
        if cancelled:
            remove_image(tag)  # cancelled while its image loaded: no worker will ever take it
        return sub_id

    async def submit(request: Request) -> Response:
        query = request.query_params
        name, candidate = query.get("name", ""), query.get("candidate", "")
        token_id = await anyio.to_thread.run_sync(
            check_submission, request.headers.get("authorization"), name, candidate
        )
        links = inputs.links(query.getlist("link"))
        path = config.data_dir / UPLOADS_DIR / f"{secrets.token_hex(8)}.tar"
        upload = await receive(request.stream(), path, cap=config.max_upload_bytes)
        try:
            sub_id = await anyio.to_thread.run_sync(
                register, token_id, name, candidate, links, upload.path, upload.size, upload.sha256
            )
        finally:
            path.unlink(missing_ok=True)
            cache.changed()  # a new submission, or a failed one
        sub = await anyio.to_thread.run_sync(_get, sub_id)
        return JSONResponse(view(sub, _base(request)).model_dump(mode="json"), status_code=202)

    def _get(sub_id: int) -> Submission:
        with ctx.sessions() as session:
            sub = session.get(Submission, sub_id)
        if sub is None:
            raise BoardError(f"no submission {sub_id}", status=404)
        return sub

    def _by_run(run_id: str) -> Submission:
        with ctx.sessions() as session:
            sub = session.scalars(
                select(Submission).where(Submission.run_id == run_id, Submission.state == "published")
            ).first()
        if sub is None:
            raise BoardError(f"no published run {run_id!r}", status=404)
        return sub

    def cancel_submission(request: Request) -> Response:
        with ctx.sessions() as session:
            token = authenticate(session, bearer(request.headers.get("authorization")))
        sub = cancel(
            ctx, inputs.submission_id(request.path_params["id"]), token_id=token.id, reason="cancelled by the submitter"
        )
        if sub.worker is None and sub.image_tag:
            remove_image(sub.image_tag)  # no worker holds it, so nothing runs the image; else its worker removes it
        cache.changed()
        return JSONResponse(view(sub, _base(request)).model_dump(mode="json"))

    def status_json(request: Request) -> Response:
        return JSONResponse(
            view(_get(inputs.submission_id(request.path_params["id"])), _base(request)).model_dump(mode="json")
        )

    def status_page(request: Request) -> Response:
        sub = _get(inputs.submission_id(request.path_params["id"]))
        refresh = None if sub.state in CLOSED else pages.REFRESH_S
        html = pages.board_page("status", f"Submission {sub.id}", s=sub, refresh_s=refresh)
        return HTMLResponse(html)

    def closed_stamp() -> Hashable:
        # What the leaderboard shows changes only when a submission is published, fails or is cancelled.
        return _stamp(ctx, Submission.state.in_(CLOSED))

    def any_stamp() -> Hashable:
        return _stamp(ctx, true())

    def render_submissions() -> str:
        with ctx.sessions() as session:
            subs = list(session.scalars(select(Submission).order_by(Submission.id.desc())))
        return pages.board_page("submissions", "Submissions", submissions=subs)

    def published_runs() -> list[PublishedRun]:
        """The published runs, oldest first, each with its tasks' consensus (the site's task pages show them)."""
        with ctx.sessions() as session:
            subs = list(
                session.scalars(select(Submission).where(Submission.state == "published").order_by(Submission.id))
            )
        runs = []
        for sub in subs:
            if not sub.run_dir or not sub.run_id:
                continue
            run = with_tasks.get(sub.run_id)
            if run is None:
                record = _readable(sub, _full_record)
                if record is None:
                    continue
                run = with_tasks[sub.run_id] = published_run(record, label=_label(sub), has_report=True)
            runs.append(run)
        return runs

    def render_leaderboard() -> str:
        with ctx.sessions() as session:
            subs = list(session.scalars(select(Submission).where(Submission.state.in_(CLOSED)).order_by(Submission.id)))
        published = []
        for sub in subs:
            record = _readable(sub, records.get) if sub.state == "published" and sub.run_dir else None
            if record is not None:
                published.append(PublishedRun(record=record, tasks={}, label=_label(sub), has_report=True))
        closed = [s for s in subs if s.state in ("failed", "cancelled")]
        panel = pages.board_panel(closed, board_id=config.board_id, key_sha256=key_sha)
        return render.leaderboard_page(sources, top, published, panel)

    async def submissions_page(request: Request) -> Response:
        return _html(request, await cache.page("submissions", render_submissions, any_stamp))

    async def leaderboard(request: Request) -> Response:
        return _html(request, await cache.page("leaderboard", render_leaderboard, closed_stamp))

    def render_tasks(params: Mapping[str, str]) -> str:
        runs = published_runs()
        return render.tasks_page(sources, top, task_results(runs), params, runs=len(runs))

    async def contract_page(request: Request) -> Response:
        return _html(request, await cache.page("/", lambda: render.contract_page(sources, top)))

    async def tasks_page(request: Request) -> Response:
        params = request.query_params
        if any(params.values()):  # a visitor's filters are never a cache key
            return HTMLResponse(await anyio.to_thread.run_sync(render_tasks, params))
        return _html(request, await cache.page("/tasks", lambda: render_tasks({}), closed_stamp))

    async def task_page(request: Request) -> Response:
        task_id = request.path_params["task_id"]
        if task_id not in task_ids:  # checked first: only real tasks' pages are cached
            raise PageNotFound(f"There is no task {shown(task_id)!r} in the v1 task set.")

        def page() -> str:
            return render.task_page(sources, top, task_results(published_runs()), task_id)

        return _html(request, await cache.page(f"/tasks/{task_id}", page, closed_stamp))

    async def dataset_page(request: Request) -> Response:
        return _html(request, await cache.page("/dataset", lambda: render.dataset_page(sources, top)))

    async def table_page(request: Request) -> Response:
        name = request.path_params["table"]
        if name not in table_names:
            raise PageNotFound(f"There is no table {shown(name)!r} in {sources.manifest.dataset}.")
        return _html(request, await cache.page(f"/dataset/{name}", lambda: render.table_page(sources, top, name)))

    def dataset_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in (SNAPSHOT_NAME, MANIFEST_NAME):
            raise PageNotFound(f"The dataset has no file {shown(name)!r}.")
        path = sources.world / name
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")

    async def scoring_page(request: Request) -> Response:
        return _html(request, await cache.page("/scoring", lambda: render.scoring_page(sources, top)))

    def submit_page(request: Request) -> Response:
        return HTMLResponse(render.submit_page(sources, top, facts, _base(request)))  # names the request's address

    def favicon(request: Request) -> Response:
        return Response(status_code=204)  # no icon, and no 404 in every visitor's console

    def run_report(request: Request) -> Response:
        sub = _by_run(inputs.run_id(request.path_params["run_id"]))
        if not request.url.path.endswith("/"):
            # The report links its sample pages as samples/...: they resolve under /runs/<id>/ only.
            return Response(status_code=308, headers={"location": f"/runs/{sub.run_id}/"})
        return FileResponse(_present(Path(sub.run_dir or "") / REPORT_NAME), media_type="text/html")

    def sample_page(request: Request) -> Response:
        sub = _by_run(inputs.run_id(request.path_params["run_id"]))
        page = sample_page_path(Path(sub.run_dir or ""), request.path_params["page"])
        if page is None:
            raise BoardError("no such sample page", status=404)
        return FileResponse(page, media_type="text/html")

    def download(request: Request) -> Response:
        sub = _by_run(inputs.run_id(request.path_params["run_id"]))
        bundle = config.data_dir / PUBLISHED_DIR / f"{sub.run_id}.tar.gz"
        statement, signature = statement_paths(bundle)
        files = {"bundle": bundle, "statement": statement, "signature": signature}
        path = files.get(request.path_params["what"])
        if path is None:
            raise BoardError("downloads are bundle, statement and signature", status=404)
        return FileResponse(_present(path), filename=path.name, media_type="application/octet-stream")

    def run_locally(request: Request) -> Response:
        binary = config.binary if config.binary is not None and config.binary.is_file() else None
        html = pages.board_page(
            "local", "Run it locally", version=__version__, binary=binary,
            binary_sha256=binary_sha256(binary) if binary else None, judges=config.judges,
            base_url=_base(request), key_sha256=key_sha, public_key=key_pem,
        )  # fmt: skip
        return HTMLResponse(html)

    def binary_download(request: Request) -> Response:
        if config.binary is None or not config.binary.is_file():
            raise BoardError("this board serves no ispm binary yet", status=404)
        return FileResponse(config.binary, filename="ispm", media_type="application/octet-stream")

    def public_key(request: Request) -> Response:
        return PlainTextResponse(key_pem, media_type="application/x-pem-file")

    async def board_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BoardError)
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    async def client_gone(request: Request, exc: Exception) -> Response:
        # Nothing will read this answer: the client went away while sending its body.
        _log.info("board.client_disconnected", method=request.method, path=request.url.path)
        return Response(status_code=400)

    async def page_not_found(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException) and request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        message = str(exc) if isinstance(exc, PageNotFound) else f"There is no page at {shown(request.url.path)!r}."
        return HTMLResponse(render.not_found_page(sources, top, message), status_code=404)

    routes: list[Any] = [
        Route("/", contract_page),
        Route("/leaderboard", leaderboard),
        Route("/tasks", tasks_page),
        Route("/tasks/{task_id}", task_page),
        Route("/dataset", dataset_page),
        Route("/dataset/files/{name}", dataset_file),
        Route("/dataset/{table}", table_page),
        Route("/scoring", scoring_page),
        Route("/submit", submit_page),
        Route("/favicon.ico", favicon),
        Route("/submissions", submissions_page),
        Route("/submissions/{id:int}", status_page),
        Route("/runs/{run_id}", run_report),
        Route("/runs/{run_id}/", run_report),
        Route("/runs/{run_id}/samples/{page}", sample_page),
        Route("/runs/{run_id}/{what:str}", download),
        Route("/run-locally", run_locally),
        Route("/downloads/ispm", binary_download),
        Route("/api/v1/key", public_key),
        Route("/api/v1/submissions", submit, methods=["POST"]),
        Route("/api/v1/submissions/{id:int}", status_json, methods=["GET"]),
        Route("/api/v1/submissions/{id:int}", cancel_submission, methods=["DELETE"]),
    ]
    handlers = {
        BoardError: board_error,
        ClientDisconnect: client_gone,
        PageNotFound: page_not_found,
        404: page_not_found,
    }
    app = Starlette(routes=routes, middleware=[Middleware(HeadLimits)], exception_handlers=handlers)
    app.state.page_cache = cache  # tests and the bench count its renders
    return app


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
