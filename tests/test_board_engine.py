"""One engine, many boards: every image and sandbox a board makes names the board, so two boards on one engine
never touch each other's.

The real Docker engine: two boards' quarantines load one image at the same moment, each under its own tag, a
board's smoke test's sandbox is named and labelled with its board, and two boards' official-run sandboxes (same run
id, same process) are each swept only by their own board.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from board_fixtures import board_in_process, tiny_contract_image

from runner.board.quarantine import board_name, board_tag, load_image, remove_image
from runner.board.smoke import smoke_test
from runner.paths import tasks_dir
from runner.run.sample_runner import HostRunner, RanSample
from runner.sandbox.backend import LABEL_BOARD, LABEL_OWNER, LABEL_RUN, LABEL_SANDBOX, SampleSpec
from runner.sandbox.docker import DockerBackend, sweep
from runner.sandbox.docker.engine import name_part
from runner.sandbox.image_archive import read_image_archive
from runner.tasks.load import load_tasks
from runner.tasks.view import agent_files

RUN = secrets.token_hex(4)


def test_two_boards_tag_the_same_submission_apart_even_when_their_ids_slug_alike() -> None:
    image_id = "sha256:" + "ab" * 32
    tags = {board_tag(board_id, 3, image_id) for board_id in ("Board A", "board-a", "board_a", "other")}
    assert len(tags) == 4
    assert board_tag("Board A", 3, image_id) == f"ispm-board/{board_name('Board A')}/submission-3:abababababab"
    assert board_name("Board A").startswith("board-a-")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    engine = docker.from_env()
    try:
        yield engine
    finally:
        engine.close()


@pytest.mark.docker
def test_two_boards_load_one_image_at_once_and_each_keeps_only_its_own_tag(client: Any, tmp_path: Path) -> None:
    source = f"ispm-test-engine-{RUN}:agent"
    image_id = tiny_contract_image(client, tmp_path / "context", source, f"shared {RUN}")
    saved = tmp_path / "saved.tar"
    saved.write_bytes(b"".join(client.images.get(image_id).save(named=False)))
    tags = {board: board_tag(f"{board}-{RUN}", 1, image_id) for board in ("north", "south")}
    loaded: dict[str, str] = {}
    errors: list[BaseException] = []

    def load(board: str) -> None:
        with saved.open("rb") as upload:
            image = read_image_archive(upload, tmp_path / f"{board}-blobs")
        try:
            loaded[board] = load_image(image, tags[board])
        except BaseException as exc:  # reported below, with the board
            errors.append(exc)

    try:
        threads = [threading.Thread(target=load, args=(board,)) for board in tags]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert (errors, loaded) == ([], {"north": image_id, "south": image_id})
        remove_image(tags["north"])
        assert [str(client.images.get(tags["south"]).id)] == [image_id]
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get(tags["north"])
    finally:
        for tag in (*tags.values(), source):
            with contextlib.suppress(docker.errors.DockerException):
                client.images.remove(tag, force=True)


@pytest.mark.docker
def test_a_boards_smoke_test_names_and_labels_its_sandbox_with_the_board(
    refs: Any, client: Any, tmp_path: Path
) -> None:
    board_id = f"smoke {RUN}"
    ctx = board_in_process(
        tmp_path / "data", board_id=board_id, candidates=["openai/cand"],
        trial={"tasks": ["ispm-001"], "calibration": "null"},
    )  # fmt: skip

    class Sub:
        id = 7
        candidate = "openai/cand"
        image_tag = refs["agent-null"].tag

    run_id = f"board-{board_name(board_id)}-smoke-7"
    since = int(time.time()) - 1
    smoke_test(ctx.config, Sub())  # type: ignore[arg-type]
    events = client.events(
        since=since, until=int(time.time()) + 1, decode=True,
        filters={"type": "container", "event": "create", "label": f"ispm.run={run_id}"},
    )  # fmt: skip
    created = [e["Actor"]["Attributes"] for e in events]
    ctx.engine.dispose()
    assert len(created) == 1
    assert created[0]["name"].startswith(f"ispm-{name_part(board_id)}-{run_id}-")
    assert created[0][LABEL_BOARD] == board_id


def _sleeper(image: str, run_id: str) -> SampleSpec:
    task = {t.id: t for t in load_tasks(tasks_dir())}["ispm-001"]
    return SampleSpec(
        task_id=task.id, run_id=run_id, image=image, command=["sleep", "600"],
        task_files=agent_files(task, time_limit_seconds=120), time_limit_s=120, memory_bytes=64 * 1024**2, pids=16,
    )  # fmt: skip


def _board_containers(client: Any, run_id: str) -> dict[str, list[dict[str, Any]]]:
    found = client.api.containers(all=True, filters={"label": [f"{LABEL_RUN}={run_id}"]})
    by_board: dict[str, list[dict[str, Any]]] = {}
    for container in found:
        by_board.setdefault(container["Labels"].get(LABEL_BOARD, ""), []).append(container)
    return by_board


@pytest.mark.docker
def test_one_boards_official_run_sweep_ends_its_own_sandboxes_and_spares_another_boards(refs: Any, client: Any) -> None:
    run_id = f"test-boards-{RUN}"  # both boards' runs share the id: only the board label tells them apart
    boards = {name: f"{name} {RUN}" for name in ("north", "south")}
    backends = {name: DockerBackend(board=board) for name, board in boards.items()}
    runners = {name: HostRunner(backends[name], board=board) for name, board in boards.items()}
    ran: dict[str, RanSample] = {}
    threads = {
        name: threading.Thread(target=lambda n=name: ran.__setitem__(n, runners[n].run_sample(
            _sleeper(refs["base"].tag, run_id))))
        for name in boards
    }  # fmt: skip
    try:
        for thread in threads.values():
            thread.start()
        deadline = time.monotonic() + 60
        while {
            b for b, cs in _board_containers(client, run_id).items() if any(c["State"] == "running" for c in cs)
        } != set(boards.values()):
            assert time.monotonic() < deadline, f"the sandboxes never ran: {_board_containers(client, run_id)}"
            time.sleep(0.2)
        south_before = _board_containers(client, run_id)[boards["south"]]
        assert [c["Names"][0].startswith(f"/ispm-{name_part(boards['south'])}-{run_id}-") for c in south_before] == [
            True
        ]

        runners["north"].sweep(run_id)  # what north's cancel or Ctrl-C does
        threads["north"].join(timeout=60)
        assert ran["north"].output.status != "ok"  # its agent was ended mid-sleep
        left = _board_containers(client, run_id)
        assert boards["north"] not in left
        assert [(c["Id"], c["State"]) for c in left[boards["south"]]] == [(south_before[0]["Id"], "running")]
        assert "south" not in ran
    finally:
        for name in boards:
            runners[name].sweep(run_id)
        for thread in threads.values():
            thread.join(timeout=60)
        for backend in backends.values():
            backend.close()
    assert _board_containers(client, run_id) == {}


@pytest.mark.docker
def test_a_boards_backend_start_sweeps_only_its_own_boards_orphans(refs: Any, client: Any) -> None:
    run_id = f"test-orphans-{RUN}"
    dead = f"{socket.gethostname()}:{os.getpid()}:1"  # this pid with a start time it never had: a dead owner
    made = {}
    try:
        for board in ("north", "south"):
            labels = {LABEL_SANDBOX: "1", LABEL_RUN: run_id, LABEL_OWNER: dead, LABEL_BOARD: f"{board} {RUN}"}
            made[board] = client.api.create_container(refs["base"].tag, ["true"], labels=labels)["Id"]
        DockerBackend(board=f"north {RUN}").close()  # a board's backend starts: it sweeps its own orphans
        left = _board_containers(client, run_id)
        assert [c["Id"] for cs in left.values() for c in cs] == [made["south"]]
    finally:
        sweep(client, run_id)
