"""What every page of the board shares: the board's context, its caches, the site's sources, and the lookups and
answers more than one page uses.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import ColumnElement, func, select
from starlette.requests import Request
from starlette.responses import Response

from runner.board.context import PUBLISHED_DIR, BoardContext
from runner.board.db import Submission
from runner.board.errors import BoardError
from runner.board.model import SubmissionView
from runner.board.pagecache import PageCache, RenderedPage
from runner.board.published import PublishedRuns
from runner.board.signing import public_pem
from runner.board.states import CLOSED, SubmissionState
from runner.record.verify import public_key_sha256
from runner.site.links import Links
from runner.site.model import BoardFacts, PublishedRun, SiteSources
from runner.world.digest import file_sha256

FILE_CACHE_BYTES = 256 * 1024 * 1024
"""Published reports and sample pages kept in memory at most (least recently used go first)."""
SEARCH_CACHE_BYTES = 64 * 1024 * 1024
"""Searches of the task list kept rendered at most (least recently used go first)."""
KEYED_CACHE_BYTES = 64 * 1024 * 1024
"""Status pages and pages by address kept rendered at most (least recently used go first)."""


@dataclass
class BoardSite:
    """The board's pages' shared state: one per app."""

    ctx: BoardContext
    sources: SiteSources
    """The publisher's site's sources (``runner.site``), read once."""
    cache: PageCache = field(default_factory=PageCache)
    """Rendered pages, each kept until its stamp moves."""
    files: PageCache = field(default_factory=lambda: PageCache(max_bytes=FILE_CACHE_BYTES))
    """Published runs' files (reports, sample pages): they never change, so they have no stamp."""
    searches: PageCache = field(default_factory=lambda: PageCache(max_bytes=SEARCH_CACHE_BYTES))
    """The task list as each recent search showed it (``runner.board.views.site_pages``)."""
    keyed: PageCache = field(default_factory=lambda: PageCache(max_bytes=KEYED_CACHE_BYTES))
    """Pages of which there are many: each submission's status page (until its row moves), and the pages that
    name the board's address, by that address (a ``Host`` header is the client's to choose, so this is bounded)."""
    top: Links = field(default_factory=lambda: Links("server"))
    run_dirs: dict[str, Path] = field(default_factory=dict)
    """Each published run's folder by run id, once looked up (a published run's folder never changes)."""

    def __post_init__(self) -> None:
        config = self.ctx.config
        self.key_pem = public_pem(self.ctx.key).decode()
        self.key_sha = public_key_sha256(self.ctx.key.public_key())
        self.runs = PublishedRuns(config.data_dir / PUBLISHED_DIR)
        self.facts = BoardFacts(
            board_id=config.board_id, candidates=tuple(config.candidates), judges=tuple(config.judges)
        )
        self.task_ids = {t.id for t in self.sources.tasks}
        self.table_names = {t.name for t in self.sources.tables}

    def base(self, request: Request) -> str:
        """The board's address in absolute links: the configured public URL, else the request's own."""
        return (self.ctx.config.public_url or str(request.base_url)).rstrip("/")

    def view(self, sub: Submission, request: Request) -> SubmissionView:
        """The API's view of ``sub``."""
        fields = {k: getattr(sub, k) for k in SubmissionView.model_fields if k != "status_url"}
        return SubmissionView(**fields, status_url=f"{self.base(request)}/submissions/{sub.id}")

    def submission(self, sub_id: int) -> Submission:
        """Submission ``sub_id``.

        Raises:
            BoardError: 404, there is none.
        """
        with self.ctx.sessions() as session:
            sub = session.get(Submission, sub_id)
        if sub is None:
            raise BoardError(f"no submission {sub_id}", status=404)
        return sub

    def published(self, run_id: str) -> Submission:
        """The published submission of ``run_id``.

        Raises:
            BoardError: 404, no published run has that id.
        """
        with self.ctx.sessions() as session:
            sub = session.scalars(
                select(Submission).where(Submission.run_id == run_id, Submission.state == SubmissionState.PUBLISHED)
            ).first()
        if sub is None or not sub.run_dir:
            raise BoardError(f"no published run {run_id!r}", status=404)
        self.run_dirs[run_id] = Path(sub.run_dir)
        return sub

    def stamp(self, where: ColumnElement[bool]) -> Hashable:
        """How many submissions match ``where``, their last change, and sums of their ids, samples done and state
        lengths: moves with any change to them (``updated_at`` keeps whole seconds, so the sums catch a second
        change within one second)."""
        with self.ctx.sessions() as session:
            row = session.execute(
                select(
                    func.count(),
                    func.max(Submission.updated_at),
                    func.sum(Submission.id),
                    func.sum(Submission.samples_done),
                    func.sum(func.length(Submission.state)),
                ).where(where)
            ).one()
        return tuple(row)

    def row_stamp(self, sub_id: int) -> Hashable:
        """What a submission's status page shows of its row: moves with any change to it."""
        with self.ctx.sessions() as session:
            row = session.execute(
                select(
                    Submission.state,
                    Submission.updated_at,
                    Submission.samples_done,
                    Submission.samples_planned,
                    Submission.eta_s,
                    Submission.reason,
                    Submission.run_id,
                    Submission.bundle_sha256,
                ).where(Submission.id == sub_id)
            ).one_or_none()
        return None if row is None else tuple(row)

    def closed_stamp(self) -> Hashable:
        """What the leaderboard and the task pages show changes only when a submission is published, fails or is
        cancelled."""
        return self.stamp(Submission.state.in_(CLOSED))

    def published_runs(self) -> list[PublishedRun]:
        """The published runs, oldest first, each read once (``runner.board.published``); a record gone or damaged
        on disk is logged and left off."""
        with self.ctx.sessions() as session:
            subs = list(
                session.scalars(
                    select(Submission).where(Submission.state == SubmissionState.PUBLISHED).order_by(Submission.id)
                )
            )
        runs = (self.runs.read(Path(sub.run_dir), label=label(sub)) for sub in subs if sub.run_dir and sub.run_id)
        return [run for run in runs if run is not None]


def label(sub: Submission) -> str:
    """Who ran what, as the pages show a submission's run."""
    return f"{sub.display_name} ({sub.candidate})"


def html(request: Request, page: RenderedPage) -> Response:
    """``page``, gzipped for a client that accepts it."""
    return served(request, page, "text/html; charset=utf-8")


def served(request: Request, page: RenderedPage, media_type: str) -> Response:
    """A cached document of ``media_type``, gzipped for a client that accepts it."""
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers = {"content-encoding": "gzip", "vary": "accept-encoding"}
        return Response(page.gzipped, media_type=media_type, headers=headers)
    return Response(page.html, media_type=media_type, headers={"vary": "accept-encoding"})


def present(path: Path) -> Path:
    """``path``, or a 404 when it is gone (a board whose files were moved must not answer 500)."""
    if not path.is_file():
        raise BoardError(f"{path.name} is not on this board", status=404)
    return path


def binary_sha256(path: Path) -> str:
    """sha256 of the served ``ispm`` binary, hashed once per version of the file, not on every page view (~100 MB)."""
    stat = path.stat()
    return _sha256_of(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _sha256_of(path: Path, mtime_ns: int, size: int) -> str:
    return file_sha256(path)
