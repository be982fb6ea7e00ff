"""Running the benchmark locally: ``/run-locally`` (the version, the judges, the key) and the single-file ``ispm``
at ``/downloads/ispm`` with its sha256."""

from __future__ import annotations

from collections.abc import Hashable

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from runner import __version__
from runner.board import pages
from runner.board.errors import BoardError
from runner.board.views.shared import BoardSite, binary_sha256, html


class LocalPages:
    """``/run-locally`` and ``/downloads/ispm``."""

    def __init__(self, board: BoardSite) -> None:
        """Serve ``board``'s "Run it locally"."""
        self.board = board

    def routes(self) -> list[Route]:
        """This page kind's routes."""
        return [Route("/run-locally", self.run_locally), Route("/downloads/ispm", self.binary)]

    def _render(self, base_url: str) -> str:
        config = self.board.ctx.config
        binary = config.binary if config.binary is not None and config.binary.is_file() else None
        return pages.board_page(
            "local", "Run it locally", version=__version__, binary=binary,
            binary_sha256=binary_sha256(binary) if binary else None, judges=config.judges,
            base_url=base_url, key_sha256=self.board.key_sha, public_key=self.board.key_pem,
        )  # fmt: skip

    def _binary_stamp(self) -> Hashable:
        binary = self.board.ctx.config.binary
        if binary is None or not binary.is_file():
            return None
        stat = binary.stat()
        return (stat.st_mtime_ns, stat.st_size)

    async def run_locally(self, request: Request) -> Response:
        """How to run the benchmark locally, with the binary when the board serves one (rendered once per address
        it names and per version of the binary: a stat of the binary per request, so a new one shows at once)."""
        base_url = self.board.base(request)
        route = f"/run-locally@{base_url}@{self._binary_stamp()}"
        return html(request, await self.board.keyed.page(route, lambda: self._render(base_url)))

    def binary(self, request: Request) -> Response:
        """The single-file ``ispm``."""
        config = self.board.ctx.config
        if config.binary is None or not config.binary.is_file():
            raise BoardError("this board serves no ispm binary yet", status=404)
        return FileResponse(config.binary, filename="ispm", media_type="application/octet-stream")
