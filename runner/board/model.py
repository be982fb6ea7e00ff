"""What the board shows of its rows: a submission as the API answers it, a token as its admin lists it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner.board.states import SubmissionState


class SubmissionView(BaseModel):
    """A submission as the API shows it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    id: int
    """The submission's number on this board."""
    display_name: str
    """As the submitter wrote it."""
    candidate: str
    """The served candidate model it runs against."""
    links: list[str]
    """The submitter's links (http or https)."""
    state: SubmissionState
    """received, verified, queued, running, auditing, published, failed or cancelled."""
    reason: str | None
    """Why it failed or was cancelled."""
    samples_done: int
    """Samples graded so far."""
    samples_planned: int
    """Samples the run plans (0 before it starts)."""
    eta_s: float | None
    """Projected seconds left in the run, at its pace so far."""
    image_id: str
    """The engine's id of the loaded image."""
    upload_sha256: str
    """sha256 of the uploaded ``docker save`` stream."""
    run_id: str | None
    """The run's id, once it has one."""
    bundle_sha256: str | None
    """sha256 of the published bundle."""
    created_at: datetime
    """When the upload was received (UTC)."""
    updated_at: datetime
    """The last change (UTC)."""
    published_at: datetime | None
    """When it was published (UTC)."""
    status_url: str
    """The human status page."""


TokenState = Literal["active", "expired", "revoked"]
"""Whether a request presenting a token now is let through (active), or why not."""


class TokenView(BaseModel):
    """A token as ``ispm board token list`` shows it: never its secret, nor the secret's hash."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    id: int
    """The token's number on this board (what ``ispm board token revoke`` takes)."""
    submitter: str
    """Who the admin gave it to."""
    created_at: datetime
    """When it was made (UTC)."""
    expires_at: datetime | None
    """When it stops being accepted (UTC); ``None`` never."""
    last_used_at: datetime | None
    """When a request last presented it and was let through (UTC); ``None`` if never."""
    revoked_at: datetime | None
    """When the admin revoked it (UTC); ``None`` if not."""
    open_limit: int
    """Open submissions it may have at once."""
    state: TokenState
    """Whether a request presenting it now would be let through (active) or why not."""
