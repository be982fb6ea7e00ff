"""A published run: its report (``/runs/<id>/``), its sample pages (``/runs/<id>/samples/<page>``) and its
downloads (bundle, statement, signature).

The report and the sample pages never change once published, so each is read once and served from memory
(gzipped once), the least recently served dropped first past the cache's size (``BoardSite.files``). As served,
every control or bidi character in them (a model's U+202E in a transcript) is shown as its code point,
``⟨U+202E⟩``, not applied: a page cannot be made to read other than what the run recorded.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Final

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from runner.board import inputs
from runner.board.context import PUBLISHED_DIR
from runner.board.errors import BoardError
from runner.board.views.shared import BoardSite, html, present
from runner.record.report import REPORT_NAME
from runner.record.verify import statement_paths
from runner.trace.sample_page import SAMPLES_DIR, sample_page_path

BIDI: Final = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
"""The bidirectional formatting characters: marks, embeddings, overrides and isolates."""


@functools.cache
def _visible() -> dict[int, str]:
    kept = {0x09, 0x0A, 0x0D}
    controls = [c for c in (*range(0x20), *range(0x7F, 0xA0)) if c not in kept]
    return {c: f"\u27e8U+{c:04X}\u27e9" for c in (*controls, *BIDI, 0x2028, 0x2029)}


def visible(text: str) -> str:
    """``text`` with each control, bidi or line/paragraph separator character shown as ``⟨U+XXXX⟩``."""
    return text.translate(_visible())


def _page_text(path: Path) -> str:
    return visible(path.read_text(encoding="utf-8", errors="replace"))


class RunPages:
    """``/runs/<id>/...``."""

    def __init__(self, board: BoardSite) -> None:
        """Serve ``board``'s published runs."""
        self.board = board

    def routes(self) -> list[Route]:
        """This page kind's routes."""
        return [
            Route("/runs/{run_id}", self.report),
            Route("/runs/{run_id}/", self.report),
            Route("/runs/{run_id}/samples/{page}", self.sample),
            Route("/runs/{run_id}/{what:str}", self.download),
        ]

    async def _run_dir(self, raw: str) -> tuple[str, Path]:
        run_id = inputs.run_id(raw)
        found = self.board.run_dirs.get(run_id)
        if found is None:
            found = Path((await anyio.to_thread.run_sync(self.board.published, run_id)).run_dir or "")
        return run_id, found

    async def report(self, request: Request) -> Response:
        """The run's report."""
        run_id, run_dir = await self._run_dir(request.path_params["run_id"])
        if not request.url.path.endswith("/"):
            # The report links its sample pages as samples/...: they resolve under /runs/<id>/ only.
            return Response(status_code=308, headers={"location": f"/runs/{run_id}/"})
        route = f"/runs/{run_id}/"
        if not self.board.files.holds(route):
            await anyio.to_thread.run_sync(present, run_dir / REPORT_NAME)
        return html(request, await self.board.files.page(route, lambda: _page_text(run_dir / REPORT_NAME)))

    async def sample(self, request: Request) -> Response:
        """One sample's page: its transcript, its SQL and its grades."""
        run_id, run_dir = await self._run_dir(request.path_params["run_id"])
        name = request.path_params["page"]
        route = f"/runs/{run_id}/samples/{name}"
        if not self.board.files.holds(route):
            path = await anyio.to_thread.run_sync(sample_page_path, run_dir, name)
            if path is None:
                raise BoardError("no such sample page", status=404)
        return html(request, await self.board.files.page(route, lambda: _page_text(run_dir / SAMPLES_DIR / name)))

    async def download(self, request: Request) -> Response:
        """The run's bundle, signed statement or signature."""
        run_id, _ = await self._run_dir(request.path_params["run_id"])
        bundle = self.board.ctx.config.data_dir / PUBLISHED_DIR / f"{run_id}.tar.gz"
        statement, signature = statement_paths(bundle)
        path = {"bundle": bundle, "statement": statement, "signature": signature}.get(request.path_params["what"])
        if path is None:
            raise BoardError("downloads are bundle, statement and signature", status=404)
        await anyio.to_thread.run_sync(present, path)
        return FileResponse(path, filename=path.name, media_type="application/octet-stream")
