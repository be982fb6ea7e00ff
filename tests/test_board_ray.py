"""A board whose backend is a real Ray cluster runs a submission on the cluster's nodes and publishes it.

The cluster is started here from the wheel on loopback (``tests/loopback_cluster.py``: a head with no sandbox unit,
one worker node with two), sharing the local Docker engine as nodes on one host would. The board's worker runs in this process: it smoke-tests the gold
replay image on its own engine, then runs the shortened trial (two tasks, one epoch) on the cluster (the nodes'
sandboxes labelled and named with the board), audits, bundles and signs it; ``verify`` then passes on the published
bundle.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from board_fixtures import add_submission, board_in_process, board_tag
from docker_fixtures import containers_of
from fake_provider import FakeProvider, Reply, openai_completion
from loopback_cluster import loopback_cluster

from runner.board.context import PUBLISHED_DIR
from runner.board.db import Submission
from runner.board.worker import work_one
from runner.record.model import RunRecord
from runner.record.verify import verify

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]
TASKS = ["ispm-001", "ispm-010"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with loopback_cluster(1, 2) as (started, _workers):
        yield started


def test_a_board_on_the_ray_backend_runs_and_publishes_a_submission_on_the_cluster(
    cluster: Any, refs: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider() as candidate:
        candidate.push(Reply(body=openai_completion("ok", model="cand-ray-1")))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-board-ray")
        monkeypatch.setenv("OPENAI_BASE_URL", candidate.openai_base)
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        ctx = board_in_process(
            tmp_path / "data", board_id="ray-board", candidates=["openai/cand"], backend="ray",
            ray_address=str(cluster.address), smoke_task="ispm-001",
            trial={"tasks": TASKS, "epochs": 1, "calibration": "replay"},
        )  # fmt: skip
        sub_id = add_submission(ctx, board_tag(refs["agent-replay"].tag, "submission-ray"))
        since = int(time.time()) - 1
        try:
            assert work_one(ctx, "ray-board/w0") is True
            with ctx.sessions() as session:
                row = session.get_one(Submission, sub_id)
        finally:
            ctx.engine.dispose()
    assert (row.state, row.reason, row.worker, row.samples_done, row.samples_planned) == (
        "published", None, None, 2, 2,
    )  # fmt: skip
    record = RunRecord.model_validate_json((Path(row.run_dir or "") / "record.json").read_text(encoding="utf-8"))
    assert record.run_id == row.run_id and record.status == "completed" and record.official is False
    assert record.spec.backend == "ray" and record.resolved_models == {"openai/cand": "cand-ray-1"}
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    # Every sample ran on the cluster's worker node (the head advertises no sandbox unit), none on this process.
    assert {s.node for s in record.samples} == {str(n.node_id) for n in cluster.worker_nodes}
    assert containers_of(record.run_id) == []
    engine = docker.from_env()
    try:
        events = engine.events(
            since=since, until=int(time.time()) + 1, decode=True,
            filters={"type": "container", "event": "create", "label": f"ispm.run={record.run_id}"},
        )  # fmt: skip
        made = [e["Actor"]["Attributes"] for e in events]
    finally:
        engine.close()
    # The nodes' sandboxes name the board that ran them, as this engine's do; the record does not.
    assert len(made) == 2 and {m.get("ispm.board") for m in made} == {"ray-board"}
    assert all(m["name"].startswith("ispm-ray-board-") for m in made)
    assert "ray-board" not in record.model_dump_json()
    bundle = tmp_path / "data" / PUBLISHED_DIR / f"{record.run_id}.tar.gz"
    report = verify(bundle, tmp_path / "data" / "board.pub")
    assert report.problems == [] and report.audit is not None and report.audit.ok
