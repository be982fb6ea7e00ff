"""The board serves the single-file ``ispm`` (its config's ``binary``) and shows its sha256 on "Run it locally".

A real board process on loopback; a small stand-in file plays the executable (the real one is tested in
``test_binary.py``). While the file is missing, the download is a 404 and the page sends people to the source tree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from board_fixtures import BoardProcess

STAND_IN = b"\x7fELF stand-in for the ispm executable\n" * 64


@pytest.fixture(scope="module")
def executable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("built") / "ispm"


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, executable: Path) -> Iterator[BoardProcess]:
    settings = {
        "board_id": "test-board-download",
        "judges": ["ref#1", "ref#2"],
        "candidates": ["openai/cand"],
        "binary": str(executable),
    }
    with BoardProcess(tmp_path_factory.mktemp("board-download"), settings) as process:
        yield process


def test_the_executable_is_served_with_its_sha256(board: BoardProcess, executable: Path) -> None:
    executable.write_bytes(STAND_IN)
    try:
        download = httpx.get(board.url + "/downloads/ispm", timeout=10)
        page = httpx.get(board.url + "/run-locally", timeout=10)
    finally:
        executable.unlink()
    assert download.status_code == 200
    assert download.content == STAND_IN
    assert download.headers["content-disposition"] == 'attachment; filename="ispm"'
    assert page.status_code == 200
    assert '<a id="binary-link" href="/downloads/ispm">' in page.text
    assert f'<code id="binary-sha256">{hashlib.sha256(STAND_IN).hexdigest()}</code>' in page.text


def test_without_an_executable_the_page_points_to_the_source_tree(board: BoardProcess, executable: Path) -> None:
    assert not executable.exists()
    download = httpx.get(board.url + "/downloads/ispm", timeout=10)
    assert (download.status_code, download.json()) == (404, {"error": "this board serves no ispm binary yet"})
    page = httpx.get(board.url + "/run-locally", timeout=10).text
    assert "binary-sha256" not in page
    assert "<code>make venv</code>" in page
