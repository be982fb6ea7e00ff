"""Workers share submissions under leases, on SQLite and on a real PostgreSQL.

Two workers race for one submission and one wins; a live worker's lease is never taken, a dead one's is taken over
once it runs out; a worker that lost its lease stops, and its writes are fenced out. The lease migration upgrades
rows held before leases existed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from board_fixtures import postgres_cluster
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import create_engine, delete, inspect, select, text, update

from runner.board.config import BoardConfig
from runner.board.context import BoardContext
from runner.board.db import MIGRATIONS, Submission, Token, make_engine, migrate, sessions, utcnow
from runner.board.lease import Hold, claim, renew
from runner.board.worker import STEPS, WORKING, _advance, fail, work_one

ROUNDS = 20
LEASE_S = 1.0
HEARTBEAT_S = 0.2


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """``None`` for SQLite in the test's folder, else the URL of one PostgreSQL cluster for the module."""
    with postgres_cluster() if request.param == "postgresql" else nullcontext(None) as url:
        yield url


def _fresh(url: str | None, tmp_path: Path) -> str:
    """An empty database: a SQLite file, or a new database in the module's PostgreSQL cluster."""
    if url is None:
        return f"sqlite:///{tmp_path / 'board.sqlite'}"
    name = f"board_{time.monotonic_ns()}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def ctx(database: str | None, tmp_path: Path) -> Iterator[BoardContext]:
    config = BoardConfig(
        board_id="race", data_dir=tmp_path, judges=("ref#1", "ref#2"), candidates=["openai/cand"],
        lease_s=LEASE_S, heartbeat_s=HEARTBEAT_S,
    )  # fmt: skip
    engine = make_engine(_fresh(database, tmp_path))
    migrate(engine)
    board = BoardContext(config=config, engine=engine, sessions=sessions(engine), key=Ed25519PrivateKey.generate())
    with board.sessions() as session, session.begin():
        session.add(Token(submitter="t", token_sha256="0" * 64, created_at=utcnow(), expires_at=None, open_limit=9))
    try:
        yield board
    finally:
        engine.dispose()


def _submission(
    ctx: BoardContext, state: str = "received", worker: str | None = None, lease_s: float | None = None
) -> int:
    now = utcnow()
    lease = None if lease_s is None else datetime.now(UTC) + timedelta(seconds=lease_s)
    with ctx.sessions() as session, session.begin():
        sub = Submission(
            token_id=1, display_name="x", candidate="openai/cand", links=[], state=state, upload_sha256="",
            upload_bytes=0, image_id="", image_tag="", worker=worker, lease_until=lease, samples_done=0,
            samples_planned=0, created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(sub)
        session.flush()
        return sub.id


def _row(ctx: BoardContext, sub_id: int) -> Submission:
    with ctx.sessions() as session:
        return session.get_one(Submission, sub_id)


def test_two_workers_race_for_one_submission_and_one_wins(ctx: BoardContext) -> None:
    for _ in range(ROUNDS):
        sub_id = _submission(ctx)
        gate = threading.Barrier(2)
        won: dict[str, int | None] = {}

        def race(name: str, gate: threading.Barrier, won: dict[str, int | None]) -> None:
            gate.wait()
            won[name] = claim(ctx, name, WORKING)

        threads = [threading.Thread(target=race, args=(n, gate, won)) for n in ("race/a", "race/b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [n for n, got in won.items() if got == sub_id]
        assert len(winners) == 1 and sorted(won.values(), key=str) == sorted([sub_id, None], key=str), won
        assert _row(ctx, sub_id).worker == winners[0]
        with ctx.sessions() as session, session.begin():
            session.execute(delete(Submission).where(Submission.id == sub_id))


def test_a_claim_takes_a_submission_whose_lease_ran_out_and_never_a_live_one(ctx: BoardContext) -> None:
    _submission(ctx, "running", "race/live", lease_s=60)
    ran_out = _submission(ctx, "running", "race/gone", lease_s=-1)
    _submission(ctx, "failed", "race/gone", lease_s=-1)  # closed: never taken again
    assert claim(ctx, "race/heir", WORKING) == ran_out
    assert claim(ctx, "race/other", WORKING) is None
    row = _row(ctx, ran_out)
    assert row.worker == "race/heir" and row.lease_until is not None
    assert renew(ctx, ran_out, "race/gone") is False  # the old holder's compare-and-set no longer matches
    assert renew(ctx, ran_out, "race/heir") is True


def test_a_live_workers_lease_is_never_taken_and_a_dead_ones_is_taken_over(ctx: BoardContext) -> None:
    sub_id = _submission(ctx)
    assert claim(ctx, "race/live", WORKING) == sub_id
    attempts = 0
    with Hold(ctx, sub_id, "race/live") as hold:
        until = time.monotonic() + 3 * LEASE_S  # three leases long: only the renewals keep it
        while time.monotonic() < until:
            assert claim(ctx, "race/thief", WORKING) is None
            attempts += 1
            time.sleep(0.05)
        assert not hold.stop.is_set()
    assert attempts > 20
    row = _row(ctx, sub_id)
    assert (row.worker, row.lease_until) == (None, None)  # released at the end of the hold

    # A worker that dies renews nothing: its lease holds until it runs out, then another worker takes over.
    assert claim(ctx, "race/dies", WORKING) == sub_id
    assert claim(ctx, "race/heir", WORKING) is None
    time.sleep(LEASE_S + 0.2)
    assert claim(ctx, "race/heir", WORKING) == sub_id
    assert _row(ctx, sub_id).worker == "race/heir"


def test_a_worker_that_lost_its_lease_stops_and_its_writes_are_fenced_out(ctx: BoardContext) -> None:
    sub_id = _submission(ctx, "running")
    assert claim(ctx, "race/stalled", WORKING) == sub_id
    loaded = _row(ctx, sub_id)
    with Hold(ctx, sub_id, "race/stalled") as hold:
        # Its lease runs out unseen (a stalled host) and another worker takes the submission; the stalled
        # worker's own heartbeat may renew in between, so expire it again until the other worker gets it.
        for _ in range(20):
            with ctx.sessions() as session, session.begin():
                session.execute(
                    update(Submission)
                    .where(Submission.id == sub_id)
                    .values(lease_until=datetime(2000, 1, 1, tzinfo=UTC))
                )
            if claim(ctx, "race/heir", WORKING) == sub_id:
                break
        else:
            raise AssertionError("the other worker never took the submission")
        until = time.monotonic() + 10 * HEARTBEAT_S
        while not hold.lost:
            assert time.monotonic() < until, "the stalled worker never noticed that it lost its lease"
            time.sleep(0.05)
        assert (
            hold.stop.reason == f"the board worker race/stalled lost its lease on submission {sub_id} to another worker"
        )
        fail(hold, "a late failure")
        assert _advance(hold, loaded, "auditing") is False
    row = _row(ctx, sub_id)
    assert (row.state, row.reason, row.worker) == ("running", None, "race/heir")


def test_a_worker_leaves_a_submission_another_worker_took_without_redoing_its_step(
    ctx: BoardContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub_id = _submission(ctx, "verified")
    steps: list[str] = []
    queue = STEPS["verified"]

    def stalls_then_queues(hold: Hold, sub: Submission) -> None:
        # The worker stalls past its lease in this step, and another worker takes the submission meanwhile.
        steps.append(hold.holder)
        with ctx.sessions() as session, session.begin():
            session.execute(
                update(Submission).where(Submission.id == sub_id).values(lease_until=datetime(2000, 1, 1, tzinfo=UTC))
            )
        assert claim(ctx, "race/heir", WORKING) == sub_id
        queue(hold, sub)  # fenced out: the row stays as the other worker has it

    monkeypatch.setitem(STEPS, "verified", stalls_then_queues)
    done: list[bool] = []
    worker = threading.Thread(target=lambda: done.append(work_one(ctx, "race/stalled")))
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive() and done == [True]
    assert steps == ["race/stalled"]  # the step ran once: the worker left at once, before its heartbeat noticed
    row = _row(ctx, sub_id)
    assert (row.state, row.worker) == ("verified", "race/heir")


def _alembic(connection: Any) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def test_the_lease_migration_lets_a_row_held_before_leases_be_taken_over(database: str | None, tmp_path: Path) -> None:
    engine = make_engine(_fresh(database, tmp_path))
    try:
        with engine.begin() as connection:
            command.upgrade(_alembic(connection), "0001")
        with engine.begin() as connection:
            connection.execute(
                text("INSERT INTO tokens (submitter, token_sha256, created_at, open_limit) VALUES ('t', :h, :n, 1)"),
                {"h": "1" * 64, "n": utcnow()},
            )
            connection.execute(
                text(
                    "INSERT INTO submissions (token_id, display_name, candidate, links, state, upload_sha256,"
                    " upload_bytes, image_id, image_tag, worker, samples_done, samples_planned, created_at, updated_at)"
                    " VALUES (1, 'old', 'openai/cand', '[]', :s, '', 0, '', '', :w, 0, 0, :n, :n)"
                ),
                [{"s": "running", "w": "old-board/host/1/0", "n": utcnow()}, {"s": "queued", "w": None, "n": utcnow()}],
            )
        migrate(engine)
        config = BoardConfig(board_id="m", data_dir=tmp_path, judges=("ref#1", "ref#2"), candidates=["openai/cand"])
        ctx = BoardContext(config=config, engine=engine, sessions=sessions(engine), key=Ed25519PrivateKey.generate())
        with ctx.sessions() as session:
            held = session.scalars(select(Submission.id).where(Submission.state == "running")).one()
        assert claim(ctx, "m/new", ("running",)) == held  # the old board's hold has no lease: it is taken over
        assert _row(ctx, held).worker == "m/new"
        with engine.begin() as connection:
            command.downgrade(_alembic(connection), "0001")
        assert "lease_until" not in {c["name"] for c in inspect(engine).get_columns("submissions")}
        migrate(engine)
        assert "lease_until" in {c["name"] for c in inspect(engine).get_columns("submissions")}
    finally:
        engine.dispose()


def test_the_state_migration_keeps_every_row_and_the_database_then_refuses_an_unknown_state(
    database: str | None, tmp_path: Path
) -> None:
    from sqlalchemy.exc import IntegrityError

    from runner.board.states import SubmissionState

    engine = make_engine(_fresh(database, tmp_path))
    insert = text(
        "INSERT INTO submissions (token_id, display_name, candidate, links, state, upload_sha256, upload_bytes,"
        " image_id, image_tag, samples_done, samples_planned, created_at, updated_at)"
        " VALUES (1, 'x', 'openai/cand', '[]', :s, '', 0, '', '', 0, 0, :n, :n)"
    )
    try:
        with engine.begin() as connection:
            command.upgrade(_alembic(connection), "0003")
        with engine.begin() as connection:
            connection.execute(
                text("INSERT INTO tokens (submitter, token_sha256, created_at, open_limit) VALUES ('t', :h, :n, 1)"),
                {"h": "2" * 64, "n": utcnow()},
            )
            connection.execute(insert, [{"s": state.value, "n": utcnow()} for state in SubmissionState])
        migrate(engine)
        with sessions(engine)() as session:
            states = list(session.scalars(select(Submission.state).order_by(Submission.id)))
        assert states == list(SubmissionState) and all(isinstance(s, SubmissionState) for s in states)
        with pytest.raises(IntegrityError), engine.begin() as connection:
            connection.execute(insert, {"s": "hacked", "n": utcnow()})
    finally:
        engine.dispose()
