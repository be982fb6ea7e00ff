"""The board's HTML pages, in the report's frame and with its autoescaping environment.

The leaderboard is the site's (``runner.site.render.leaderboard_page``: the record's leaderboard in the site's
header), with the board's panel (key, submissions not published and why) at the top of its main column.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader
from markupsafe import Markup

from runner.board.db import Submission
from runner.paths import scoring_doc
from runner.record.report import environment, render_markdown
from runner.site.links import Links
from runner.site.render import TEMPLATES as SITE_TEMPLATES

TEMPLATES = Path(__file__).resolve().parent / "templates"
REFRESH_S = 5
"""How often an open submission's status page reloads itself."""


@cache
def _scoring() -> Markup:
    return render_markdown(scoring_doc().read_text(encoding="utf-8"))


def _env() -> Environment:
    env = environment()
    assert env.loader is not None
    # The site's templates too: board pages carry the site's header (runner/site/templates/site_nav.html.j2).
    env.loader = ChoiceLoader([FileSystemLoader(TEMPLATES), env.loader, FileSystemLoader(SITE_TEMPLATES)])
    return env


def board_panel(closed: Sequence[Submission], *, board_id: str, key_sha256: str) -> Markup:
    """The board's panel for the top of the leaderboard: its key, and the submissions not published and why."""
    html = _env().get_template("board_panel.html.j2").render(board_id=board_id, key_sha256=key_sha256, closed=closed)
    return Markup(html)


def board_page(page: str, title: str, **values: Any) -> str:
    """One of the board's own pages (``status``, ``submissions``, ``local``)."""
    values.setdefault("refresh_s", None)
    current = "local" if page == "local" else ""
    return (
        _env()
        .get_template("board_page.html.j2")
        .render(page=page, title=title, scoring=_scoring(), links=Links("server"), current=current, **values)
    )
