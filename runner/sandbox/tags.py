"""The engine's tags before and after a ``docker load``: which ones a load moved, and putting them back.

A load applies whatever names the archive carries. The board refuses archives that carry names, and checks the
result as well: every tag that, after the load, points at the loaded image but did not before (moved from another
image, or new) was made by the load, except the one tag the caller set itself. Only tags that point *at the loaded
image* count, so tags that other processes on a shared engine move meanwhile are never mistaken for the load's.
"""

from __future__ import annotations

import contextlib
from typing import Any

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict


class TagMove(BaseModel):
    """A tag a load pointed at the loaded image."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    tag: str
    """``repository:tag`` as the engine lists it."""
    before: str | None
    """The image id it pointed at before the load; ``None`` when the load made it."""
    after: str
    """The image id it points at now: the loaded image's."""


def tag_snapshot(client: Any) -> dict[str, str]:
    """Every tag on the engine and the image id it points at."""
    return {tag: str(image.id) for image in client.images.list() for tag in image.tags}


def moved_to(
    before: dict[str, str], after: dict[str, str], image_id: str, *, keep: str, spare_new: str | None = None
) -> list[TagMove]:
    """The tags that point at ``image_id`` in ``after`` and did not in ``before``, except ``keep``, by tag.

    A tag that is new (absent from ``before``) and starts with ``spare_new`` is spared: another load of the same
    image at the same time made it under its own tag (two boards, or two uploads, of one image). Such a tag that
    existed before and moved is never spared.
    """
    return [
        TagMove(tag=tag, before=before.get(tag), after=now)
        for tag, now in sorted(after.items())
        if now == image_id
        and before.get(tag) != image_id
        and tag != keep
        and not (spare_new and tag not in before and tag.startswith(spare_new))
    ]


def put_back(client: Any, moves: list[TagMove]) -> None:
    """Point each moved tag at its old image again, and drop each tag the load made (best effort, tag by tag)."""
    for move in moves:
        repository, _, version = move.tag.rpartition(":")
        with contextlib.suppress(docker.errors.DockerException):
            if move.before is None:
                # The loaded image keeps the caller's tag, so dropping this one never deletes the image.
                client.api.remove_image(move.tag, noprune=True)
            else:
                client.api.tag(move.before, repository, version, force=True)
