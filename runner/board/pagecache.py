"""Pages rendered once per change of what they show, not once per request.

A page is cached by its route with the *stamp* it was rendered from: a small value read from the database that
changes whenever the page would (for the leaderboard, a publish, a failure or a cancel). A request within
``recheck_s`` of the last check is served from memory without touching the database; after that, the stamp is
read again (one query, in a thread, in the background while the page in memory is served) and the page rendered
again only when the stamp moved. The board's own changes (a new submission, a cancel) mark every page for a check
that the next request waits for, so they show at once; changes made by another board process on the same database,
or by the board's workers, show within about ``recheck_s``.

One render at a time per route: requests that arrive while a page renders wait for it and share it. A page
without a stamp (static content, a published run's files) is rendered once per process. Each render is also
gzipped once, for the clients that accept it (every browser): a leaderboard of 1,000 runs is about 1.2 MB of HTML
and a tenth of that gzipped. A cache made with ``max_bytes`` keeps at most that much, dropping the pages least
recently served first.
"""

from __future__ import annotations

import asyncio
import gzip
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

Stamp = Callable[[], Hashable]
"""Reads what a page depends on; equal results mean the page would render the same."""


@dataclass(frozen=True)
class RenderedPage:
    """One render of a page."""

    html: bytes
    """The page, UTF-8."""
    gzipped: bytes
    """The same, gzip-compressed."""


@dataclass
class _Entry:
    stamp: Hashable
    page: RenderedPage
    checked_at: float = field(default=0.0)


class PageCache:
    """Rendered pages by route (bytes), each kept until its stamp changes."""

    def __init__(self, *, recheck_s: float = 0.5, max_bytes: int | None = None) -> None:
        """Re-read a page's stamp at most every ``recheck_s`` seconds (unless :meth:`changed` says to sooner); keep
        at most ``max_bytes`` of pages (``None``: every page)."""
        self.recheck_s = recheck_s
        self.max_bytes = max_bytes
        self.renders = 0
        """Pages rendered so far (for tests and the bench)."""
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._locks: dict[str, anyio.Lock] = {}
        self._changed_at = 0.0
        self._checking: dict[str, asyncio.Task[RenderedPage]] = {}

    def holds(self, route: str) -> bool:
        """Whether a render of ``route`` is kept (fresh or not)."""
        return route in self._entries

    def changed(self) -> None:
        """Something every page may show has changed here: check each page's stamp at its next request."""
        self._changed_at = time.monotonic()

    async def page(self, route: str, render: Callable[[], str], stamp: Stamp | None = None) -> RenderedPage:
        """The page at ``route``: from memory while fresh, else rendered by ``render`` (in a thread) if ``stamp``
        moved since it was last rendered.

        A page that is only old (not marked by :meth:`changed`) is served as it is while one check runs in the
        background, so no request waits on the database; a page marked changed here waits for its check.
        """
        entry = self._entries.get(route)
        if entry is not None:
            if self.max_bytes is not None:
                self._entries.move_to_end(route)
            if self._fresh(entry, stamp):
                return entry.page
            if entry.checked_at > self._changed_at:
                self._check_soon(route, render, stamp)
                return entry.page
        return await self._check(route, render, stamp)

    def _check_soon(self, route: str, render: Callable[[], str], stamp: Stamp | None) -> None:
        if route in self._checking:
            return
        task = asyncio.get_running_loop().create_task(self._check(route, render, stamp))
        self._checking[route] = task
        task.add_done_callback(lambda _: self._checking.pop(route, None))

    async def _check(self, route: str, render: Callable[[], str], stamp: Stamp | None) -> RenderedPage:
        lock = self._locks.setdefault(route, anyio.Lock())
        async with lock:
            entry = self._entries.get(route)
            if entry is not None and self._fresh(entry, stamp):
                return entry.page  # another request rendered or checked it while this one waited
            checked_at = time.monotonic()
            now = None if stamp is None else await anyio.to_thread.run_sync(stamp)
            if entry is None or entry.stamp != now:
                page = await anyio.to_thread.run_sync(_rendered, render)
                self.renders += 1
                entry = _Entry(stamp=now, page=page, checked_at=checked_at)
                self._keep(route, entry)
            else:
                entry.checked_at = checked_at
            return entry.page

    def _keep(self, route: str, entry: _Entry) -> None:
        old = self._entries.pop(route, None)
        if old is not None:
            self._bytes -= _size(old.page)
        self._entries[route] = entry
        self._bytes += _size(entry.page)
        while self.max_bytes is not None and self._bytes > self.max_bytes and len(self._entries) > 1:
            dropped_route, dropped = self._entries.popitem(last=False)
            self._bytes -= _size(dropped.page)
            self._locks.pop(dropped_route, None)

    def _fresh(self, entry: _Entry, stamp: Stamp | None) -> bool:
        if stamp is None:
            return True
        return entry.checked_at > self._changed_at and time.monotonic() - entry.checked_at < self.recheck_s


def _size(page: RenderedPage) -> int:
    return len(page.html) + len(page.gzipped)


def _rendered(render: Callable[[], str]) -> RenderedPage:
    html = render().encode()
    return RenderedPage(html=html, gzipped=gzip.compress(html, compresslevel=6, mtime=0))
