"""The site's errors: a page that does not exist, a site that cannot be built."""

from __future__ import annotations

from runner.errors import IspmError


class SiteError(IspmError):
    """The site cannot be built or a page cannot be served: a missing source, an unwritable folder."""


class PageNotFound(SiteError):
    """No such page: an unknown task or table. The board answers it with the site's 404 page."""
