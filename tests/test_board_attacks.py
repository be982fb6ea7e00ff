"""A hostile submitter with a valid token: every trick on the upload is refused with a 4xx, no tag on the engine
moves or appears, no image id is taken that the upload's content does not hash to, and nothing is run or signed.

A real board process on loopback (no worker: nothing it takes would run) and the real Docker engine. The uploaded
image is a tiny one built here from scratch with the contract label, saved by id as ``ispm submit`` saves it, then
spoiled. The victims are throwaway tags and images of this module, except in the test that names the project's own
images, which snapshots their ids first and puts back, in a ``finally``, any that moved.
"""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from board_fixtures import BoardProcess, engine_client, tiny_contract_image

from runner.sandbox.transfer import engine_image_ids

pytestmark = pytest.mark.docker

RUN = secrets.token_hex(4)
REPOSITORY = f"ispm-test-attack-{RUN}"
"""Every tag this module makes is in this repository (or names the project's own images, and is put back)."""
PROJECT = ("ispm/base:latest", "ispm/agent-reference:latest", "ispm/agent-null:latest", "ispm/agent-replay:latest")
VICTIMS = (f"{REPOSITORY}:victim", f"{REPOSITORY}:made")
"""A tag that exists (the victim image) and one that does not yet: an attack tries to move the one, make the other."""
GIB = 1024**3


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from runner.board.quarantine import board_name

    with engine_client(f"{REPOSITORY}:", f"ispm-board/{board_name(f'attack-{RUN}')}/") as engine:
        yield engine


@pytest.fixture(scope="module")
def images(client: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The agent (uploaded) and the victim (an image already on the engine), by name: their image ids."""
    folder = tmp_path_factory.mktemp("attack-images")
    return {
        "agent": tiny_contract_image(client, folder / "agent", f"{REPOSITORY}:agent", f"agent {RUN}"),
        "victim": tiny_contract_image(client, folder / "victim", f"{REPOSITORY}:victim", f"victim {RUN}"),
    }


def _saved(client: Any, image_id: str) -> bytes:
    return b"".join(client.images.get(image_id).save(named=False))


@pytest.fixture(scope="module")
def saved(client: Any, images: dict[str, str]) -> bytes:
    """The agent image's ``docker save`` by id, as ``ispm submit`` sends it: no names anywhere."""
    return _saved(client, images["agent"])


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    settings = {
        "board_id": f"attack-{RUN}",
        "judges": ["ref#1", "ref#2"],
        "candidates": ["openai/cand"],
        "open_submissions_per_token": 2,
    }  # fmt: skip (the connection limits are the defaults: 2 s to a first byte, 64 connections an address)
    folder = tmp_path_factory.mktemp("board-attacks")
    with BoardProcess(folder, settings, env={"ISPM_LOG_FILE": str(folder / "ispm.jsonl")}, workers=0) as process:
        yield process


@pytest.fixture
def token(board: BoardProcess) -> str:
    """A fresh token per test, so one test's open submissions never count against another's."""
    return board.token(f"mallory-{secrets.token_hex(3)}")


def _members(saved: bytes) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
        return [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]  # type: ignore[union-attr]


def _archive(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def _file(name: str, data: bytes, *, pax_path: str | None = None) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo("placeholder" if pax_path else name)
    info.size = len(data)
    if pax_path:
        info.pax_headers = {"path": pax_path}
    return info, data


def _link(name: str, target: str) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, target
    return info, None


def _manifest(saved: bytes, tags: list[str] | None) -> list[dict[str, Any]]:
    with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
        manifest: list[dict[str, Any]] = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    manifest[0]["RepoTags"] = tags
    return manifest


def _without(saved: bytes, *names: str) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    return [(m, data) for m, data in _members(saved) if m.name not in names]


def _post(board: BoardProcess, token: str, body: Any) -> httpx.Response:
    return httpx.post(
        board.url + "/api/v1/submissions",
        params={"name": "attack", "candidate": "openai/cand"},
        content=body,
        headers={"authorization": f"Bearer {token}"},
        timeout=120,
    )


def _engine(client: Any, tags: tuple[str, ...] = VICTIMS) -> dict[str, str | None]:
    return engine_image_ids(client, tags)


def _nothing_taken(board: BoardProcess) -> None:
    """No submission was admitted or run, nothing was published, and no upload is left on disk."""
    listing = httpx.get(board.url + "/submissions", timeout=10).text
    assert "attack" not in listing
    assert sorted((board.folder / "data" / "uploads").glob("*")) == []
    assert not (board.folder / "data" / "published").exists() or not any(
        (board.folder / "data" / "published").iterdir()
    )


def _refused(response: httpx.Response, board: BoardProcess, message: str) -> None:
    assert (response.status_code, response.json()) == (422, {"error": message})
    _nothing_taken(board)


def test_a_config_renamed_to_another_images_id_is_refused_and_that_image_is_not_taken(
    board: BoardProcess, token: str, client: Any, images: dict[str, str], saved: bytes
) -> None:
    before = _engine(client)
    manifest = _manifest(saved, None)
    config = manifest[0]["Config"]
    victim_hex = images["victim"].removeprefix("sha256:")
    renamed = [
        (tarfile.TarInfo(f"{victim_hex}.json"), data) if m.name == config else (m, data)
        for m, data in _without(saved, "manifest.json")
    ]
    for info, data in renamed:
        info.size = len(data) if data is not None else 0
    manifest[0]["Config"] = f"{victim_hex}.json"
    body = _archive([*renamed, _file("manifest.json", json.dumps(manifest).encode())])
    response = _post(board, token, body)
    _refused(
        response,
        board,
        f"refused: '{victim_hex}.json' is named for sha256:{victim_hex} but its bytes hash to {images['agent']}",
    )
    assert _engine(client) == before


def test_another_images_config_without_its_layers_is_refused_though_the_engine_has_them(
    board: BoardProcess, token: str, client: Any, images: dict[str, str], saved: bytes
) -> None:
    # The victim's config (its id is public, and its config may be), the agent's layer in place of the victim's:
    # an engine that has the victim's layers would not even read the upload's.
    victim = _manifest(_saved(client, images["victim"]), None)[0]
    victim_config = next(d for m, d in _members(_saved(client, images["victim"])) if m.name == victim["Config"])
    agent = _manifest(saved, None)[0]
    members = [(m, d) for m, d in _members(saved) if m.name not in ("manifest.json", agent["Config"])]
    assert victim_config is not None
    manifest = [{"Config": victim["Config"], "RepoTags": None, "Layers": agent["Layers"]}]
    body = _archive(
        [*members, _file(victim["Config"], victim_config), _file("manifest.json", json.dumps(manifest).encode())]
    )
    before = _engine(client)
    response = _post(board, token, body)
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith("refused: layer 0 (")
    assert "the config's rootfs.diff_ids names sha256:" in response.json()["error"]
    _nothing_taken(board)
    assert _engine(client) == before


def test_a_second_manifest_behind_a_pax_path_with_a_nul_is_refused_and_no_tag_moves(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _engine(client)
    hostile = json.dumps(_manifest(saved, list(VICTIMS))).encode()
    body = _archive([*_members(saved), _file("", hostile, pax_path="manifest.json\0x")])
    _refused(
        _post(board, token, body), board, "refused: the member name 'manifest.json\\x00x' holds the character U+0000"
    )
    assert _engine(client) == before


def test_a_tagged_manifest_behind_a_pax_path_with_a_nul_and_no_clean_one_is_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _engine(client, PROJECT)
    try:
        hostile = json.dumps(_manifest(saved, ["ispm/base:latest"])).encode()
        body = _archive([*_without(saved, "manifest.json"), _file("", hostile, pax_path="manifest.json\0x")])
        message = "refused: the member name 'manifest.json\\x00x' holds the character U+0000"
        _refused(_post(board, token, body), board, message)
        assert _engine(client, PROJECT) == before
    finally:
        _put_back(client, before)


def test_a_link_to_the_archives_root_and_a_manifest_through_it_is_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _engine(client)
    hostile = json.dumps(_manifest(saved, list(VICTIMS))).encode()
    body = _archive([*_members(saved), _link("d", "."), _file("d/manifest.json", hostile)])
    _refused(_post(board, token, body), board, "refused: the link 'd' points at '.', a directory")
    assert _engine(client) == before


@pytest.mark.parametrize("name", ["index.json", "manifest.json", "config"])
def test_a_link_to_a_name_the_archive_does_not_hold_is_a_422_not_a_500(
    board: BoardProcess, token: str, saved: bytes, name: str
) -> None:
    config = _manifest(saved, None)[0]["Config"]
    link = config if name == "config" else name
    body = _archive([*_without(saved, link), _link(link, "nowhere.json")])
    _refused(
        _post(board, token, body),
        board,
        f"refused: the link '{link}' points at 'nowhere.json', nothing the archive holds",
    )


def _pax_header_stream(header_bytes: int) -> Iterator[bytes]:
    """A tar stream opening with a PAX header of ``header_bytes``, generated as it is sent."""
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, header_bytes
    yield info.tobuf(format=tarfile.USTAR_FORMAT)
    piece = b"%d path=" % header_bytes
    piece += b"a" * (1024 * 1024 - len(piece))
    sent = 0
    while sent < header_bytes:
        chunk = piece[: header_bytes - sent]
        sent += len(chunk)
        yield chunk


def test_a_1_gib_pax_header_is_a_422_in_seconds_and_costs_the_board_little_memory(
    board: BoardProcess, token: str
) -> None:
    peak_before = board.peak_rss()
    started = time.monotonic()
    response = _post(board, token, _pax_header_stream(GIB))
    took = time.monotonic() - started
    _refused(response, board, f"refused: a tar extended header of {GIB} bytes (the limit is {64 * 1024})")
    assert took < 10, took
    assert board.peak_rss() - peak_before < 64 * 1024 * 1024, (peak_before, board.peak_rss())


def test_tags_that_name_the_projects_own_images_are_refused_and_their_ids_unchanged(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _engine(client, PROJECT)
    try:
        hostile = json.dumps(_manifest(saved, list(PROJECT))).encode()
        body = _archive([*_without(saved, "manifest.json"), _file("./manifest.json", hostile)])
        _refused(
            _post(board, token, body),
            board,
            f"refused: manifest.json names the image ({json.dumps(list(PROJECT))[:200]}); save it by id",
        )
        assert _engine(client, PROJECT) == before
    finally:
        _put_back(client, before)


def test_a_repositories_file_or_an_oci_name_annotation_is_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _engine(client)
    top = _manifest(saved, None)[0]["Layers"][-1].split("/")[0]
    repositories = {REPOSITORY: {"victim": top}}
    body = _archive([*_members(saved), _file("repositories", json.dumps(repositories).encode())])
    _refused(
        _post(board, token, body),
        board,
        f"refused: repositories names the image ({json.dumps(repositories)}); save it by id",
    )
    names = {"io.containerd.image.name": VICTIMS[0]}
    index = {"schemaVersion": 2, "manifests": [], "annotations": names}
    body = _archive([*_members(saved), _file("index.json", json.dumps(index).encode())])
    _refused(
        _post(board, token, body), board, f"refused: index.json names the image ({json.dumps(names)}); save it by id"
    )
    assert _engine(client) == before


def test_a_clean_upload_saved_by_id_is_taken_under_the_boards_own_tag_only(
    board: BoardProcess, token: str, client: Any, images: dict[str, str], saved: bytes
) -> None:
    before = _engine(client)
    response = _post(board, token, saved)
    assert response.status_code == 202, response.text
    assert response.json()["image_id"] == images["agent"]
    assert _engine(client) == before
    assert sorted((board.folder / "data" / "uploads").glob("*")) == []


def test_five_uploads_at_once_with_one_token_admit_no_more_than_its_open_limit(
    board: BoardProcess, token: str, saved: bytes
) -> None:
    answers: list[int] = []

    def upload() -> None:
        answers.append(_post(board, token, saved).status_code)

    threads = [threading.Thread(target=upload) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(answers) == [202, 202, 429, 429, 429]


def _idle_socket(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.2", 0))  # one client address; the probes come from 127.0.0.1
    sock.setblocking(False)
    with contextlib.suppress(BlockingIOError):
        sock.connect(("127.0.0.1", port))
    return sock


def test_1100_idle_sockets_from_one_address_leave_the_board_answering_in_under_a_second(board: BoardProcess) -> None:
    idle = [_idle_socket(board.port) for _ in range(1100)]
    stop = threading.Event()
    reopened = [0]

    def reopen() -> None:
        # As the attacker does: every socket the board closed is opened again, every second, for the whole test.
        while not stop.wait(1.0):
            for n, sock in enumerate(idle):
                with contextlib.suppress(BlockingIOError, OSError):
                    if sock.recv(1) == b"":
                        sock.close()
                        idle[n] = _idle_socket(board.port)
                        reopened[0] += 1

    attacker = threading.Thread(target=reopen, daemon=True)
    try:
        time.sleep(1.0)  # the connection storm is accepted (the probe's own connect queues behind it)
        attacker.start()
        waits = []
        with httpx.Client(base_url=board.url, timeout=10) as probe:
            for _ in range(19):
                started = time.monotonic()
                assert probe.get("/").status_code == 200
                waits.append(time.monotonic() - started)
                time.sleep(0.3)
        assert max(waits) < 1.0, waits
        assert reopened[0] >= 1000  # the board kept closing them: the attack was on all along
    finally:
        stop.set()
        attacker.join(timeout=30)
        for sock in idle:
            sock.close()


def test_an_idle_connection_that_never_sends_a_byte_is_closed_in_seconds(board: BoardProcess) -> None:
    with socket.create_connection(("127.0.0.1", board.port), timeout=15) as sock:
        started = time.monotonic()
        assert sock.recv(1024) == b""  # closed, unanswered
        assert time.monotonic() - started < 5


def _put_back(client: Any, before: dict[str, str | None]) -> None:
    """Point every tag of ``before`` where it was (a failing test must not leave the shared engine changed)."""
    for tag, now in _engine(client, tuple(before)).items():
        if now == before[tag]:
            continue
        repository, _, version = tag.rpartition(":")
        if before[tag] is None:
            client.api.remove_image(tag, noprune=True)
        else:
            client.api.tag(before[tag], repository, version, force=True)


def test_a_load_that_moved_a_tag_anyway_is_put_back_refused_and_logged_as_an_attack(
    client: Any, images: dict[str, str], saved: bytes, tmp_path: Path
) -> None:
    import structlog.testing

    from runner.board import quarantine
    from runner.board.errors import BoardError
    from runner.sandbox import canonical
    from runner.sandbox.image_archive import read_image_archive

    before = _engine(client)
    image = read_image_archive(io.BytesIO(saved), tmp_path / "blobs")
    hostile = _archive(
        [
            *_without(saved, "manifest.json"),
            _file("manifest.json", json.dumps(_manifest(saved, list(VICTIMS))).encode()),
        ]
    )
    real = canonical.load_verified

    def flawed(image: Any, tag: str, **kwargs: Any) -> Any:
        # Stands for a flaw in the canonical archive no one has found yet: the engine gets a named archive.
        return real(image, tag, **kwargs, chunks=[hostile])

    with contextlib.ExitStack() as stack:
        stack.enter_context(pytest.MonkeyPatch.context()).setattr(quarantine, "load_verified", flawed)
        logged = stack.enter_context(structlog.testing.capture_logs())
        with pytest.raises(BoardError) as refused:
            quarantine.load_image(image, f"{REPOSITORY}:quarantined")
    assert (refused.value.status, str(refused.value)) == (
        422,
        f"refused as an attack: the load pointed 2 name(s) of the engine at itself ({', '.join(sorted(VICTIMS))}); put back",
    )
    assert [(e["event"], e["log_level"]) for e in logged] == [("board.attack", "error")]
    assert _engine(client, (*VICTIMS, f"{REPOSITORY}:quarantined")) == {**before, f"{REPOSITORY}:quarantined": None}
