"""The board's web app: the submission API, the public key, the pages and the downloads (Starlette).

Every handler that touches the database or Docker runs in a thread; the upload streams the request body to disk
as it arrives, so a large image never sits in memory.
"""

from __future__ import annotations

import functools
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from runner import __version__
from runner.board import pages
from runner.board.db import CLOSED, Submission, utcnow
from runner.board.errors import BoardError
from runner.board.lease import Hold, lease_end
from runner.board.quarantine import board_tag, inspect_archive, load_image, remove_image
from runner.board.signing import public_pem
from runner.board.tokens import authenticate, bearer
from runner.board.upload import receive
from runner.board.worker import PUBLISHED_DIR, BoardContext, cancel
from runner.record.model import RunRecord
from runner.record.report import REPORT_NAME
from runner.record.verify import public_key_sha256, statement_paths
from runner.site.errors import PageNotFound
from runner.site.model import BoardFacts, PublishedRun
from runner.site.pages import SitePages
from runner.site.render import shown
from runner.site.results import published_run
from runner.site.sources import load_sources
from runner.world import MANIFEST_NAME, SNAPSHOT_NAME
from runner.world.digest import file_sha256

UPLOADS_DIR = "uploads"
MAX_NAME = 200
MAX_LINKS = 5


class SubmissionView(BaseModel):
    """A submission as the API shows it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    id: int
    """The submission's number on this board."""
    display_name: str
    """As the submitter wrote it."""
    candidate: str
    """The served candidate model it runs against."""
    links: list[str]
    """The submitter's links (http or https)."""
    state: str
    """received, verified, queued, running, auditing, published, failed or cancelled."""
    reason: str | None
    """Why it failed or was cancelled."""
    samples_done: int
    """Samples graded so far."""
    samples_planned: int
    """Samples the run plans (0 before it starts)."""
    eta_s: float | None
    """Projected seconds left in the run, at its pace so far."""
    image_id: str
    """The engine's id of the loaded image."""
    upload_sha256: str
    """sha256 of the uploaded ``docker save`` stream."""
    run_id: str | None
    """The run's id, once it has one."""
    bundle_sha256: str | None
    """sha256 of the published bundle."""
    created_at: datetime
    """When the upload was received (UTC)."""
    updated_at: datetime
    """The last change (UTC)."""
    published_at: datetime | None
    """When it was published (UTC)."""
    status_url: str
    """The human status page."""


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


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _links(values: list[str]) -> list[str]:
    if len(values) > MAX_LINKS:
        raise BoardError(f"at most {MAX_LINKS} links", status=422)
    for link in values:
        parts = urlsplit(link)
        if parts.scheme not in ("http", "https") or not parts.netloc or len(link) > 500:
            raise BoardError(f"a link must be an http or https URL: {link!r}", status=422)
    return values


def create_app(ctx: BoardContext) -> Starlette:
    """The board's ASGI app over ``ctx``."""
    config = ctx.config
    key_pem = public_pem(ctx.key).decode()
    key_sha = public_key_sha256(ctx.key.public_key())
    facts = BoardFacts(board_id=config.board_id, candidates=tuple(config.candidates), judges=tuple(config.judges))
    site = SitePages(load_sources(), facts)
    kept: dict[str, PublishedRun] = {}  # a published record never changes: each is read once

    def check_submission(authorization: str | None, name: str, candidate: str) -> int:
        with ctx.sessions() as session:
            token = authenticate(session, bearer(authorization))
            if not name.strip() or len(name) > MAX_NAME:
                raise BoardError(f"name: 1 to {MAX_NAME} characters", status=422)
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
        tag = board_tag(sub_id, archive)
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
        links = _links(query.getlist("link"))
        path = config.data_dir / UPLOADS_DIR / f"{secrets.token_hex(8)}.tar"
        upload = await receive(request.stream(), path, cap=config.max_upload_bytes)
        try:
            sub_id = await anyio.to_thread.run_sync(
                register, token_id, name, candidate, links, upload.path, upload.size, upload.sha256
            )
        finally:
            path.unlink(missing_ok=True)
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
        sub = cancel(ctx, int(request.path_params["id"]), token_id=token.id, reason="cancelled by the submitter")
        if sub.worker is None and sub.image_tag:
            remove_image(sub.image_tag)  # no worker holds it, so nothing runs the image; else its worker removes it
        return JSONResponse(view(sub, _base(request)).model_dump(mode="json"))

    def status_json(request: Request) -> Response:
        return JSONResponse(view(_get(int(request.path_params["id"])), _base(request)).model_dump(mode="json"))

    def status_page(request: Request) -> Response:
        sub = _get(int(request.path_params["id"]))
        refresh = None if sub.state in CLOSED else pages.REFRESH_S
        html = pages.board_page("status", f"Submission {sub.id}", s=sub, refresh_s=refresh)
        return HTMLResponse(html)

    def submissions_page(request: Request) -> Response:
        with ctx.sessions() as session:
            subs = list(session.scalars(select(Submission).order_by(Submission.id.desc())))
        return HTMLResponse(pages.board_page("submissions", "Submissions", submissions=subs))

    def published_runs() -> tuple[list[PublishedRun], list[Submission]]:
        """The published runs, oldest first (the site shows them), and the failed or cancelled submissions."""
        with ctx.sessions() as session:
            subs = list(session.scalars(select(Submission).order_by(Submission.id)))
        runs = []
        for sub in subs:
            if sub.state != "published" or not sub.run_dir or not sub.run_id:
                continue
            run = kept.get(sub.run_id)
            if run is None:
                record = RunRecord.model_validate_json((Path(sub.run_dir) / "record.json").read_text(encoding="utf-8"))
                label = f"{sub.display_name} ({sub.candidate})"
                run = kept[sub.run_id] = published_run(record, label=label, has_report=True)
            runs.append(run)
        site.publish(runs)
        return runs, [s for s in subs if s.state in ("failed", "cancelled")]

    def leaderboard(request: Request) -> Response:
        _, closed = published_runs()
        return HTMLResponse(site.leaderboard(pages.board_panel(closed, board_id=config.board_id, key_sha256=key_sha)))

    def contract_page(request: Request) -> Response:
        return HTMLResponse(site.contract())

    def tasks_page(request: Request) -> Response:
        published_runs()
        return HTMLResponse(site.tasks(request.query_params))

    def task_page(request: Request) -> Response:
        published_runs()
        return HTMLResponse(site.task(request.path_params["task_id"]))

    def dataset_page(request: Request) -> Response:
        return HTMLResponse(site.dataset())

    def table_page(request: Request) -> Response:
        return HTMLResponse(site.table(request.path_params["table"]))

    def dataset_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in (SNAPSHOT_NAME, MANIFEST_NAME):
            raise PageNotFound(f"The dataset has no file {shown(name)!r}.")
        path = site.sources.world / name
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")

    def scoring_page(request: Request) -> Response:
        return HTMLResponse(site.scoring())

    def favicon(request: Request) -> Response:
        return Response(status_code=204)  # no icon, and no 404 in every visitor's console

    def submit_page(request: Request) -> Response:
        return HTMLResponse(site.submit(_base(request)))

    def run_report(request: Request) -> Response:
        sub = _by_run(request.path_params["run_id"])
        return FileResponse(Path(sub.run_dir or "") / REPORT_NAME, media_type="text/html")

    def download(request: Request) -> Response:
        sub = _by_run(request.path_params["run_id"])
        bundle = config.data_dir / PUBLISHED_DIR / f"{sub.run_id}.tar.gz"
        statement, signature = statement_paths(bundle)
        files = {"bundle": bundle, "statement": statement, "signature": signature}
        path = files.get(request.path_params["what"])
        if path is None:
            raise BoardError("downloads are bundle, statement and signature", status=404)
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")

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

    async def page_not_found(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException) and request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        message = str(exc) if isinstance(exc, PageNotFound) else f"There is no page at {shown(request.url.path)!r}."
        return HTMLResponse(site.not_found(message), status_code=404)

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
        Route("/runs/{run_id}/{what:str}", download),
        Route("/run-locally", run_locally),
        Route("/downloads/ispm", binary_download),
        Route("/api/v1/key", public_key),
        Route("/api/v1/submissions", submit, methods=["POST"]),
        Route("/api/v1/submissions/{id:int}", status_json, methods=["GET"]),
        Route("/api/v1/submissions/{id:int}", cancel_submission, methods=["DELETE"]),
    ]
    handlers = {BoardError: board_error, PageNotFound: page_not_found, 404: page_not_found}
    return Starlette(routes=routes, exception_handlers=handlers)
