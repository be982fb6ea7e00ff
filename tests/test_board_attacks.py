"""No upload can move a tag on the board's engine: each attack is refused, and every image id stays where it was.

A real board process on loopback and the real Docker engine. The uploaded image is a tiny one built here from
scratch with the contract label, saved by id as ``ispm submit`` saves it, then spoiled so that a ``docker load``
would apply a name. The victims are throwaway tags of this module, except in the test that names the project's
own images, which snapshots their ids first and puts back, in a ``finally``, any that moved.
"""

from __future__ import annotations

import contextlib
import io
import json
import secrets
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import httpx
import pytest
import structlog.testing
from board_fixtures import BoardProcess, tiny_contract_image

from runner.board import quarantine
from runner.board.errors import BoardError
from runner.sandbox.tags import TagMove
from runner.sandbox.transfer import TagsMoved, engine_image_ids, load_and_tag

pytestmark = pytest.mark.docker

RUN = secrets.token_hex(4)
REPOSITORY = f"ispm-test-attack-{RUN}"
"""Every tag this module makes is in this repository (or names the project's own images, and is put back)."""
PROJECT = ("ispm/base:latest", "ispm/agent-reference:latest", "ispm/agent-null:latest", "ispm/agent-replay:latest")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    engine = docker.from_env()
    try:
        yield engine
    finally:
        for image in engine.images.list(name=REPOSITORY):
            for tag in image.tags:
                with contextlib.suppress(docker.errors.DockerException):
                    engine.images.remove(tag, force=True)
        engine.close()


@pytest.fixture(scope="module")
def images(client: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The agent (uploaded) and the victim (a tag an attack tries to move), by name: their image ids."""
    folder = tmp_path_factory.mktemp("attack-images")
    return {
        "agent": tiny_contract_image(client, folder / "agent", f"{REPOSITORY}:agent", f"agent {RUN}"),
        "victim": tiny_contract_image(client, folder / "victim", f"{REPOSITORY}:victim", f"victim {RUN}"),
    }


@pytest.fixture(scope="module")
def saved(client: Any, images: dict[str, str]) -> bytes:
    """The agent image's ``docker save`` by id, as ``ispm submit`` sends it: no names anywhere."""
    return b"".join(client.images.get(images["agent"]).save(named=False))


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    settings = {"board_id": f"attack-{RUN}", "judges": ["ref#1", "ref#2"], "candidates": ["openai/cand"]}
    with BoardProcess(tmp_path_factory.mktemp("board-attacks"), settings) as process:
        yield process


@pytest.fixture(scope="module")
def token(board: BoardProcess) -> str:
    return board.token("mallory")


def _spoiled(saved: bytes, added: list[tuple[str, Any]], *, keep_manifest: bool = False) -> bytes:
    """``saved`` without its manifest (unless ``keep_manifest``), then each of ``added`` (name, JSON value)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(saved)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            if member.name != "manifest.json" or keep_manifest:
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        for name, value in added:
            data = json.dumps(value).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _manifest(saved: bytes, tags: list[str] | None) -> list[dict[str, Any]]:
    with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
        manifest: list[dict[str, Any]] = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    manifest[0]["RepoTags"] = tags
    return manifest


def _post(board: BoardProcess, token: str, body: bytes) -> httpx.Response:
    return httpx.post(
        board.url + "/api/v1/submissions",
        params={"name": "attack", "candidate": "openai/cand"},
        content=body,
        headers={"authorization": f"Bearer {token}"},
        timeout=120,
    )


def _victims(client: Any) -> dict[str, str | None]:
    """The throwaway victims: a tag that exists (the victim image) and one that does not yet."""
    return engine_image_ids(client, [f"{REPOSITORY}:victim", f"{REPOSITORY}:made"])


def test_a_manifest_named_dot_slash_manifest_is_read_as_the_manifest_and_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _victims(client)
    tags = [f"{REPOSITORY}:victim", f"{REPOSITORY}:made"]
    response = _post(board, token, _spoiled(saved, [("./manifest.json", _manifest(saved, tags))]))
    assert (response.status_code, response.json()) == (
        422,
        {"error": f"refused: manifest.json names the image ({json.dumps(tags)}); save it by id"},
    )
    assert _victims(client) == before


def test_a_second_manifest_after_a_clean_one_is_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _victims(client)
    hostile = [("./manifest.json", _manifest(saved, [f"{REPOSITORY}:victim"]))]
    response = _post(board, token, _spoiled(saved, hostile, keep_manifest=True))
    assert (response.status_code, response.json()) == (
        422,
        {"error": "refused: the archive holds 'manifest.json' twice ('manifest.json' and './manifest.json')"},
    )
    assert _victims(client) == before


def test_a_repositories_file_that_names_a_tag_is_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _victims(client)
    top = _manifest(saved, None)[0]["Layers"][-1].split("/")[0]
    repositories = {REPOSITORY: {"victim": top}}
    response = _post(board, token, _spoiled(saved, [("repositories", repositories)], keep_manifest=True))
    assert (response.status_code, response.json()) == (
        422,
        {"error": f"refused: repositories names the image ({json.dumps(repositories)}); save it by id"},
    )
    assert _victims(client) == before


def test_an_oci_index_with_name_annotations_is_refused(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = _victims(client)
    names = {"io.containerd.image.name": f"{REPOSITORY}:victim", "org.opencontainers.image.ref.name": "victim"}
    index = {
        "schemaVersion": 2,
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "0" * 64, "size": 1,
             "annotations": names}
        ],
    }  # fmt: skip
    body = _spoiled(saved, [("oci-layout", {"imageLayoutVersion": "1.0.0"}), ("index.json", index)], keep_manifest=True)
    response = _post(board, token, body)
    assert (response.status_code, response.json()) == (
        422,
        {"error": f"refused: index.json names the image ({json.dumps(names)}); save it by id"},
    )
    assert _victims(client) == before


def test_tags_that_name_the_projects_own_images_are_refused_and_their_ids_unchanged(
    board: BoardProcess, token: str, client: Any, saved: bytes
) -> None:
    before = engine_image_ids(client, list(PROJECT))
    try:
        response = _post(board, token, _spoiled(saved, [("./manifest.json", _manifest(saved, list(PROJECT)))]))
        assert (response.status_code, response.json()) == (
            422,
            {"error": f"refused: manifest.json names the image ({json.dumps(list(PROJECT))[:200]}); save it by id"},
        )
        assert engine_image_ids(client, list(PROJECT)) == before
    finally:
        _put_back(client, before)


def _put_back(client: Any, before: dict[str, str | None]) -> None:
    """Point every tag of ``before`` where it was (a failing test must not leave the shared engine changed)."""
    for tag, now in engine_image_ids(client, list(before)).items():
        if now == before[tag]:
            continue
        repository, _, version = tag.rpartition(":")
        if before[tag] is None:
            client.api.remove_image(tag, noprune=True)
        else:
            client.api.tag(before[tag], repository, version, force=True)


def test_a_load_that_moves_tags_puts_them_back_and_keeps_nothing_of_the_image(
    client: Any, images: dict[str, str], saved: bytes, tmp_path: Path
) -> None:
    before = _victims(client)
    named = tmp_path / "named.tar"
    tags = [f"{REPOSITORY}:victim", f"{REPOSITORY}:made"]
    named.write_bytes(_spoiled(saved, [("manifest.json", _manifest(saved, tags))]))
    quarantine_tag = f"{REPOSITORY}:quarantined"
    with pytest.raises(TagsMoved) as refused:
        load_and_tag(named, images["agent"], quarantine_tag)
    assert refused.value.moves == [
        TagMove(tag=f"{REPOSITORY}:made", before=None, after=images["agent"]),
        TagMove(tag=f"{REPOSITORY}:victim", before=images["victim"], after=images["agent"]),
    ]
    assert engine_image_ids(client, [*before, quarantine_tag]) == {**before, quarantine_tag: None}


def test_a_load_that_got_past_the_checks_and_moved_a_tag_is_refused_and_logged_as_an_attack(
    client: Any, images: dict[str, str], saved: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _victims(client)
    named = tmp_path / "named.tar"
    named.write_bytes(_spoiled(saved, [("manifest.json", _manifest(saved, [f"{REPOSITORY}:victim"]))]))
    archive = quarantine.ImageArchive(image_id=images["agent"], config_name="", layers=[], labels={})
    # Stands for a way past the archive checks no one has found yet: the copy keeps the names.
    monkeypatch.setattr(quarantine, "untagged_copy", lambda source, out: out.write_bytes(source.read_bytes()) and out)
    with structlog.testing.capture_logs() as logged, pytest.raises(BoardError) as refused:
        quarantine.load_image(named, archive, f"{REPOSITORY}:quarantined")
    assert (refused.value.status, str(refused.value)) == (
        422,
        f"refused as an attack: the archive pointed 1 tag(s) of the engine at itself ({REPOSITORY}:victim); put back",
    )
    assert [(e["event"], e["log_level"]) for e in logged] == [("board.attack", "error")]
    assert _victims(client) == before


def test_a_clean_upload_saved_by_id_is_taken_under_the_boards_own_tag_only(
    board: BoardProcess, token: str, client: Any, images: dict[str, str], saved: bytes
) -> None:
    before = _victims(client)
    response = _post(board, token, saved)
    assert response.status_code == 202, response.text
    assert response.json()["image_id"] == images["agent"]
    assert _victims(client) == before
