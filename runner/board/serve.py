"""``ispm board serve``, ``ispm board token create`` and ``ispm board cancel`` as plain functions: the CLI only
parses and prints."""

from __future__ import annotations

import os
import secrets
import socket
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import uvicorn

from runner.board.app import create_app
from runner.board.cancel import cancel
from runner.board.config import BoardConfig, load_config
from runner.board.context import BoardContext
from runner.board.db import make_engine, migrate, sessions
from runner.board.model import TokenView
from runner.board.quarantine import remove_image
from runner.board.signing import load_or_create_key
from runner.board.tokens import create_token, list_tokens, revoke_token
from runner.board.upload import sweep_uploads
from runner.board.worker import work_forever
from runner.cluster.connection import connected
from runner.serving import MAX_HEAD_BYTES, guarded_h11

KEEP_ALIVE_S = 5
"""An idle keep-alive connection is closed after this (uvicorn's default; browsers reopen at once)."""


def open_board(config: BoardConfig) -> BoardContext:
    """Open the board's database (migrated to the newest schema) and its signing key."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(config.url())
    migrate(engine)
    return BoardContext(
        config=config, engine=engine, sessions=sessions(engine), key=load_or_create_key(config.data_dir)
    )


def create_board_token(config_path: Path, submitter: str, *, valid_days: float | None = None) -> str:
    """A new bearer token for ``submitter`` on the board of ``config_path`` (its secret; only a hash is stored)."""
    config = load_config(config_path)
    ctx = open_board(config)
    try:
        with ctx.sessions() as session:
            return create_token(session, submitter, open_limit=config.open_submissions_per_token, valid_days=valid_days)
    finally:
        ctx.engine.dispose()


def list_board_tokens(config_path: Path) -> list[TokenView]:
    """Every token of the board of ``config_path``: owner, expiry, last use and state, never a secret."""
    ctx = open_board(load_config(config_path))
    try:
        with ctx.sessions() as session:
            return list_tokens(session)
    finally:
        ctx.engine.dispose()


def revoke_board_token(config_path: Path, token_id: int) -> TokenView:
    """Revoke token ``token_id`` of the board of ``config_path``; a running board refuses it from the next request.

    Raises:
        BoardError: no such token, or it was revoked already.
    """
    ctx = open_board(load_config(config_path))
    try:
        with ctx.sessions() as session:
            return revoke_token(session, token_id)
    finally:
        ctx.engine.dispose()


def cancel_as_admin(config_path: Path, submission_id: int, *, why: str | None = None) -> str:
    """Cancel any submission on the board of ``config_path`` that is not yet being published; its new state line.

    A running one is stopped by the worker that holds it, within its heartbeat.

    Raises:
        BoardError: no such submission, or it is auditing or closed.
    """
    ctx = open_board(load_config(config_path))
    try:
        reason = "cancelled by the board's admin" + (f": {why}" if why else "")
        sub = cancel(ctx, submission_id, token_id=None, reason=reason)
        if sub.worker is None and sub.image_tag:
            remove_image(sub.image_tag)  # no worker holds it, so nothing runs the image
        return f"submission {sub.id}: {sub.state} ({sub.reason})"
    finally:
        ctx.engine.dispose()


def _cluster(config: BoardConfig) -> AbstractContextManager[None]:
    """The board's one connection to its Ray cluster, shared by every worker thread's runs (Ray's is per process)."""
    if config.backend != "ray":
        return nullcontext()
    return connected(config.ray_address or os.environ.get("RAY_ADDRESS"))


def server_config(ctx: BoardContext, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings for the board's app: h11 with the head deadline and body rate of ``runner.serving``, the
    head size limits, and the connection cap."""
    config = ctx.config
    protocol = guarded_h11(
        head_s=config.head_timeout_s,
        min_body_bytes_per_s=config.min_body_bytes_per_s,
        body_grace_s=config.body_grace_s,
        first_byte_s=config.first_byte_timeout_s,
        per_address=config.max_per_client,
        trusted=frozenset(config.trusted_proxies),
    )
    return uvicorn.Config(
        create_app(ctx), host=host, port=port, http=protocol, lifespan="off", log_level="warning",
        access_log=False, server_header=False, limit_concurrency=config.max_connections,
        timeout_keep_alive=KEEP_ALIVE_S, h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        proxy_headers=bool(config.trusted_proxies), forwarded_allow_ips=list(config.trusted_proxies),
    )  # fmt: skip


def serve_board(config_path: Path, *, host: str = "127.0.0.1", port: int = 8640, workers: int = 1) -> None:
    """Serve the board of ``config_path`` on ``host:port`` with ``workers`` worker threads, until interrupted.

    Submissions that a worker of a board that died was holding are taken over once its lease runs out, and their
    runs resume from their journals (``runner.board.lease``).
    """
    ctx = open_board(load_config(config_path))
    sweep_uploads(ctx.config.data_dir)  # what this host's board processes that died mid-upload left
    stop = threading.Event()
    # A holder's name must be unique across every board process: the lease's compare-and-set goes by it.
    prefix = f"{ctx.config.board_id}/{socket.gethostname()}/{os.getpid()}-{secrets.token_hex(3)}"
    threads = [
        threading.Thread(target=work_forever, args=(ctx, f"{prefix}/{n}", stop), name=f"board-worker-{n}", daemon=True)
        for n in range(workers)
    ]
    try:
        with _cluster(ctx.config):
            for thread in threads:
                thread.start()
            try:
                uvicorn.Server(server_config(ctx, host, port)).run()
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=5)
    finally:
        ctx.engine.dispose()
