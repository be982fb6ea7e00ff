"""``ispm board serve`` and ``ispm board token create`` as plain functions: the CLI only parses and prints."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import uvicorn

from runner.board.config import BoardConfig, load_config
from runner.board.db import make_engine, migrate, sessions
from runner.board.signing import load_or_create_key
from runner.board.tokens import create_token
from runner.board.worker import BoardContext, recover, work_forever


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


def serve_board(config_path: Path, *, host: str = "127.0.0.1", port: int = 8640, workers: int = 1) -> None:
    """Serve the board of ``config_path`` on ``host:port`` with ``workers`` worker threads, until interrupted.

    On start it releases what this board's workers held when it last stopped, so their runs resume from their
    journals.
    """
    from runner.board.app import create_app

    ctx = open_board(load_config(config_path))
    recover(ctx)
    stop = threading.Event()
    prefix = f"{ctx.config.board_id}/{socket.gethostname()}/{os.getpid()}"
    threads = [
        threading.Thread(target=work_forever, args=(ctx, f"{prefix}/{n}", stop), name=f"board-worker-{n}", daemon=True)
        for n in range(workers)
    ]
    for thread in threads:
        thread.start()
    try:
        uvicorn.run(create_app(ctx), host=host, port=port, log_level="warning")
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        ctx.engine.dispose()
