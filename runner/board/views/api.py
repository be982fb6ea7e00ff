"""The submission API: submit, status, cancel, and the board's public key.

``POST /api/v1/submissions`` streams the upload through quarantine (``runner.board.upload``,
``runner.board.quarantine``) and answers 202 with the new submission; ``GET``/``DELETE
/api/v1/submissions/<id>`` show and cancel one; ``GET /api/v1/key`` is the Ed25519 public key records are signed with.
"""

from __future__ import annotations

import secrets
import shutil
from collections import Counter

import anyio.to_thread
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from runner.board import inputs
from runner.board.cancel import cancel
from runner.board.db import Submission, Token, utcnow
from runner.board.errors import BoardError
from runner.board.lease import Hold, lease_end
from runner.board.quarantine import board_tag, check_image, load_image, remove_image
from runner.board.states import CLOSED, SubmissionState
from runner.board.tokens import authenticate, bearer
from runner.board.upload import ReceivedImage, receive_image, upload_folder
from runner.board.views.shared import BoardSite, served
from runner.sandbox.image_archive import ArchiveLimits


class SubmissionApi:
    """``/api/v1/...``."""

    def __init__(self, board: BoardSite) -> None:
        """Serve ``board``'s API."""
        self.board = board
        self.ctx = board.ctx
        self.uploading: Counter[int] = Counter()
        """Uploads under way in this process, by token: they count toward the token's open limit."""

    def routes(self) -> list[Route]:
        """This page kind's routes."""
        return [
            Route("/api/v1/key", self.public_key),
            Route("/api/v1/submissions", self.submit, methods=["POST"]),
            Route("/api/v1/submissions/{id:int}", self.status, methods=["GET"]),
            Route("/api/v1/submissions/{id:int}", self.cancel, methods=["DELETE"]),
        ]

    def public_key(self, request: Request) -> Response:
        """The board's public key, PEM."""
        return PlainTextResponse(self.board.key_pem, media_type="application/x-pem-file")

    def _open_count(self, session: Session, token_id: int) -> int:
        return int(
            session.scalar(
                select(func.count())
                .select_from(Submission)
                .where(Submission.token_id == token_id, Submission.state.not_in(CLOSED))
            )
            or 0
        )

    def _check(self, authorization: str | None, name: str, candidate: str) -> int:
        """The token's id and open limit, refused before a byte of the body is read when the request cannot be
        taken; the limit counts this process's uploads under way."""
        config = self.ctx.config
        with self.ctx.sessions() as session:
            token = authenticate(session, bearer(authorization))
            inputs.display_name(name)
            if candidate not in config.candidates:
                raise BoardError(
                    f"this board does not serve the candidate {candidate!r}; it serves {config.candidates}"
                )
            open_count = self._open_count(session, token.id) + self.uploading[token.id]
            if open_count >= token.open_limit:
                raise BoardError(
                    f"this token already has {open_count} open submissions (limit {token.open_limit})", status=429
                )
            return token.id

    def _admit(
        self, token_id: int, name: str, candidate: str, links: list[str], upload: ReceivedImage
    ) -> tuple[int, str]:
        """Insert the submission, held while its image loads, if the token is still under its limit: the token's
        row is written first, so two processes admitting uploads of one token take turns (a row lock on
        PostgreSQL, the write lock on SQLite)."""
        holder = f"{self.ctx.config.board_id}/upload/{secrets.token_hex(4)}"
        now = utcnow()
        with self.ctx.sessions() as session, session.begin():
            session.execute(update(Token).where(Token.id == token_id).values(last_used_at=now))
            limit = session.scalar(select(Token.open_limit).where(Token.id == token_id)) or 0
            open_count = self._open_count(session, token_id)
            if open_count >= limit:
                raise BoardError(f"this token already has {open_count} open submissions (limit {limit})", status=429)
            sub = Submission(
                token_id=token_id, display_name=name, candidate=candidate, links=links,
                state=SubmissionState.RECEIVED, upload_sha256=upload.sha256, upload_bytes=upload.size,
                image_id=upload.image.image_id, image_tag="", worker=holder, lease_until=lease_end(self.ctx),
                samples_done=0, samples_planned=0, created_at=now, updated_at=now,
            )  # fmt: skip
            session.add(sub)
            session.flush()
            return int(sub.id), holder

    def _load(self, sub_id: int, holder: str, upload: ReceivedImage) -> None:
        """Load the verified image under the board's tag while holding the new row (no worker takes it before it
        has its image); a refused load fails the submission with the reason."""
        tag = board_tag(self.ctx.config.board_id, sub_id, upload.image.image_id)
        with Hold(self.ctx, sub_id, holder):
            try:
                image_id = load_image(upload.image, tag)
            except BoardError as exc:
                with self.ctx.sessions() as session, session.begin():
                    row = session.get_one(Submission, sub_id)
                    row.state, row.reason = SubmissionState.FAILED, f"quarantine: {exc}"
                raise
            with self.ctx.sessions() as session, session.begin():
                row = session.get_one(Submission, sub_id)
                row.image_id, row.image_tag = image_id, tag
                cancelled = row.state is SubmissionState.CANCELLED
        if cancelled:
            remove_image(tag)  # cancelled while its image loaded: no worker will ever take it

    async def submit(self, request: Request) -> Response:
        """Take an upload: check the request, stream and verify the archive, admit it, load its image."""
        query = request.query_params
        name, candidate = query.get("name", ""), query.get("candidate", "")
        token_id = await anyio.to_thread.run_sync(self._check, request.headers.get("authorization"), name, candidate)
        links = inputs.links(query.getlist("link"))
        config = self.ctx.config
        folder = upload_folder(config.data_dir)
        limits = ArchiveLimits(max_stored_bytes=config.max_upload_bytes, max_unpacked_bytes=4 * config.max_upload_bytes)
        self.uploading[token_id] += 1  # until its row exists and the database counts it
        try:
            upload = await receive_image(request.stream(), folder, cap=config.max_upload_bytes, limits=limits)
            check_image(upload.image)
            sub_id, holder = await anyio.to_thread.run_sync(self._admit, token_id, name, candidate, links, upload)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            self.uploading[token_id] -= 1
            if not self.uploading[token_id]:
                del self.uploading[token_id]
        try:
            await anyio.to_thread.run_sync(self._load, sub_id, holder, upload)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            self.board.cache.changed()  # a new submission, or a failed one
        sub = await anyio.to_thread.run_sync(self.board.submission, sub_id)
        return JSONResponse(self.board.view(sub, request).model_dump(mode="json"), status_code=202)

    async def status(self, request: Request) -> Response:
        """One submission's state, progress and links: from memory until its row moves, as its status page."""
        board = self.board
        sub_id = inputs.submission_id(request.path_params["id"])
        base = board.base(request)
        route = f"/api/v1/submissions/{sub_id} at {base}"  # the status URL in it names the board's address
        if not board.keyed.holds(route):
            await anyio.to_thread.run_sync(board.submission, sub_id)  # a 404 for no such submission, never cached

        def render() -> str:
            view = board.view(board.submission(sub_id), request)
            return view.model_dump_json()

        page = await board.keyed.page(route, render, lambda: board.row_stamp(sub_id))
        return served(request, page, "application/json")

    def cancel(self, request: Request) -> Response:
        """Cancel one of the token's submissions not yet auditing."""
        with self.ctx.sessions() as session:
            token = authenticate(session, bearer(request.headers.get("authorization")))
        sub = cancel(
            self.ctx, inputs.submission_id(request.path_params["id"]), token_id=token.id,
            reason="cancelled by the submitter",
        )  # fmt: skip
        if sub.worker is None and sub.image_tag:
            remove_image(sub.image_tag)  # no worker holds it, so nothing runs the image; else its worker removes it
        self.board.cache.changed()
        self.board.keyed.changed()  # this status, and its page, are checked again at their next request
        return JSONResponse(self.board.view(sub, request).model_dump(mode="json"))
