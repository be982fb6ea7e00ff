"""What a request may say: names, links and ids, checked before they reach the database or a page.

Each check is pure and refuses with the 4xx the API answers: an id past the database's range names no submission
(404, not an overflow), and a name or link with a control, format (bidi) or separator character is a 422 that
says which character, since such characters are kept by HTML escaping yet change what a page shows.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final
from urllib.parse import urlsplit

from runner.board.errors import BoardError

MAX_NAME: Final = 200
MAX_LINKS: Final = 5
MAX_LINK: Final = 500
MAX_ID: Final = 2**31 - 1
"""The largest id the ``submissions`` table's ``INTEGER`` key holds on every database the board runs on."""
_UNSHOWABLE: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories refused in what a page shows: control, format (bidi overrides and isolates, zero-width),
surrogate, private use, unassigned, and line and paragraph separators."""
_RUN_ID: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,99}")
"""A run id as ``runner.pipeline.new_run_id`` makes them (with room to spare); anything else names no run."""


def _unshowable(text: str) -> str | None:
    for char in text:
        if unicodedata.category(char) in _UNSHOWABLE:
            return f"U+{ord(char):04X} ({unicodedata.name(char, 'a control character')})"
    return None


def display_name(value: str) -> str:
    """``value`` as a submission's name: 1 to ``MAX_NAME`` characters of printable text.

    Raises:
        BoardError: 422, it is blank, too long, or holds a control, bidi or separator character (named).
    """
    if not value.strip() or len(value) > MAX_NAME:
        raise BoardError(f"name: 1 to {MAX_NAME} characters", status=422)
    found = _unshowable(value)
    if found is not None:
        raise BoardError(f"name: {found} is not allowed: no control, bidi or separator characters", status=422)
    return value


def links(values: list[str]) -> list[str]:
    """``values`` as a submission's links: at most ``MAX_LINKS`` http or https URLs of printable text.

    Raises:
        BoardError: 422 naming the first bad link.
    """
    if len(values) > MAX_LINKS:
        raise BoardError(f"at most {MAX_LINKS} links", status=422)
    for link in values:
        found = _unshowable(link)
        if found is not None:
            raise BoardError(f"link: {found} is not allowed: no control, bidi or separator characters", status=422)
        parts = urlsplit(link)
        if parts.scheme not in ("http", "https") or not parts.netloc or len(link) > MAX_LINK:
            raise BoardError(f"a link must be an http or https URL: {link!r}", status=422)
    return values


def submission_id(raw: str | int) -> int:
    """The submission id a path names.

    Raises:
        BoardError: 404, no submission can have it (past the database's range).
    """
    number = int(raw)
    if not 0 < number <= MAX_ID:
        raise BoardError(f"no submission {str(raw)[:30]}", status=404)
    return number


def run_id(raw: str) -> str:
    """The run id a path names.

    Raises:
        BoardError: 404, no run can have it.
    """
    if not _RUN_ID.fullmatch(raw):
        raise BoardError(f"no published run {raw[:100]!r}", status=404)
    return raw
