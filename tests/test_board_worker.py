"""Two workers race for one submission and one wins, on SQLite and on a real PostgreSQL; a restart releases."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from board_fixtures import postgres_cluster
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import delete, select

from runner.board.config import BoardConfig
from runner.board.db import Submission, Token, make_engine, migrate, sessions, utcnow
from runner.board.worker import BoardContext, claim, recover

ROUNDS = 20


@pytest.fixture(params=["sqlite", "postgresql"])
def ctx(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BoardContext]:
    config = BoardConfig(board_id="race", data_dir=tmp_path, judges=("ref#1", "ref#2"), candidates=["openai/cand"])
    with postgres_cluster() if request.param == "postgresql" else _none() as url:
        engine = make_engine(url or config.url())
        migrate(engine)
        board = BoardContext(config=config, engine=engine, sessions=sessions(engine), key=Ed25519PrivateKey.generate())
        with board.sessions() as session, session.begin():
            session.add(Token(submitter="t", token_sha256="0" * 64, created_at=utcnow(), expires_at=None, open_limit=9))
        try:
            yield board
        finally:
            engine.dispose()


class _none:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def _submission(ctx: BoardContext, state: str = "received", worker: str | None = None) -> int:
    now = utcnow()
    with ctx.sessions() as session, session.begin():
        sub = Submission(
            token_id=1, display_name="x", candidate="openai/cand", links=[], state=state, upload_sha256="",
            upload_bytes=0, image_id="", image_tag="", worker=worker, samples_done=0, samples_planned=0,
            created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(sub)
        session.flush()
        return sub.id


def test_two_workers_race_for_one_submission_and_one_wins(ctx: BoardContext) -> None:
    for _ in range(ROUNDS):
        sub_id = _submission(ctx)
        gate = threading.Barrier(2)
        won: dict[str, int | None] = {}

        def race(name: str, gate: threading.Barrier, won: dict[str, int | None]) -> None:
            gate.wait()
            won[name] = claim(ctx, name)

        threads = [threading.Thread(target=race, args=(n, gate, won)) for n in ("race/a", "race/b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [n for n, got in won.items() if got == sub_id]
        assert len(winners) == 1 and sorted(won.values(), key=str) == sorted([sub_id, None], key=str), won
        with ctx.sessions() as session:
            assert session.get_one(Submission, sub_id).worker == winners[0]
        with ctx.sessions() as session, session.begin():
            session.execute(delete(Submission).where(Submission.id == sub_id))


def test_a_restart_releases_only_this_boards_workers_open_submissions(ctx: BoardContext) -> None:
    mine = _submission(ctx, "running", "race/host/1/0")
    other = _submission(ctx, "running", "another-board/host/1/0")
    closed = _submission(ctx, "published", "race/host/1/0")
    assert recover(ctx) == 1
    with ctx.sessions() as session:
        workers = {row[0]: row[1] for row in session.execute(select(Submission.id, Submission.worker))}
    assert workers == {mine: None, other: "another-board/host/1/0", closed: "race/host/1/0"}
    assert claim(ctx, "race/host/2/0") == mine
