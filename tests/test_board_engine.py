"""One engine, many boards: every image and sandbox a board makes names the board, so two boards on one engine
never touch each other's.

The real Docker engine: two boards' quarantines load one image at the same moment, each under its own tag, and a
board's smoke test's sandbox is named and labelled with its board.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from board_fixtures import board_in_process, tiny_contract_image

from runner.board.quarantine import ImageArchive, board_name, board_tag, inspect_archive, load_image, remove_image
from runner.board.smoke import smoke_test

RUN = secrets.token_hex(4)


def _archive(hex_id: str = "ab" * 32) -> ImageArchive:
    return ImageArchive(image_id=f"sha256:{hex_id}", config_name="c.json", layers=["l/layer.tar"], labels={})


def test_two_boards_tag_the_same_submission_apart_even_when_their_ids_slug_alike() -> None:
    tags = {board_tag(board_id, 3, _archive()) for board_id in ("Board A", "board-a", "board_a", "other")}
    assert len(tags) == 4
    assert board_tag("Board A", 3, _archive()) == f"ispm-board/{board_name('Board A')}/submission-3:abababababab"
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
    archive = inspect_archive(saved)
    tags = {board: board_tag(f"{board}-{RUN}", 1, archive) for board in ("north", "south")}
    loaded: dict[str, str] = {}
    errors: list[BaseException] = []

    def load(board: str) -> None:
        copy = tmp_path / f"{board}.tar"
        copy.write_bytes(saved.read_bytes())
        try:
            loaded[board] = load_image(copy, archive, tags[board])
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
    names = [e["Actor"]["Attributes"]["name"] for e in events]
    ctx.engine.dispose()
    assert len(names) == 1
    assert names[0].startswith(f"ispm-{run_id}-")
