"""The engine's whole tag list before and after a load, and which of its changes the load made.

A load can only apply names (a ``docker load`` of an archive with ``RepoTags``, a ``repositories`` file, or OCI name
annotations). The board's loads carry none (``runner.sandbox.canonical``), and this is the check that they did not:
the engine's tags and image ids are listed before and after, and every difference is either the load's or someone
else's. A change is the load's when the engine reported it in the load's own output (``Loaded image: <tag>``,
``Loaded image ID: <id>``) or when it points a tag at the loaded image; every other change (an operator's build or
tag, another lane's, another board's quarantine of another image) is someone else's, and is never touched. While a
board loads, it holds the image build lock, so ``ispm images`` on the same install builds nothing meanwhile.
"""

from __future__ import annotations

import contextlib
from typing import Any

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict


class EngineImages(BaseModel):
    """What the engine holds at one moment: its tags and its images."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    tags: dict[str, str]
    """Every ``repository:tag`` and the image id it points at."""
    ids: frozenset[str]
    """Every image id, tagged or not."""


class TagMove(BaseModel):
    """A tag that points elsewhere after a load than before it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    tag: str
    """``repository:tag`` as the engine lists it."""
    before: str | None
    """The image id it pointed at before the load; ``None`` when it is new."""
    after: str | None
    """The image id it points at now; ``None`` when it is gone."""


class LoadEffects(BaseModel):
    """The differences between the engine before and after a load, split by who made them."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    moves: list[TagMove]
    """Tags the load moved or made (never expected: the board's loads carry no names), by tag."""
    images: list[str]
    """Image ids the engine says the load made other than the expected one."""
    others: list[TagMove]
    """Tag changes someone else made meanwhile; left alone."""


def engine_images(client: Any) -> EngineImages:
    """The engine's whole tag list and image ids, in one listing."""
    listed = client.api.images()
    tags = {tag: str(image["Id"]) for image in listed for tag in image.get("RepoTags") or [] if tag != "<none>:<none>"}
    return EngineImages(tags=tags, ids=frozenset(str(image["Id"]) for image in listed))


def load_effects(
    before: EngineImages,
    after: EngineImages,
    *,
    image_id: str,
    reported_tags: list[str],
    reported_ids: list[str],
    keep: str,
    spare_new: str | None = None,
) -> LoadEffects:
    """Split what changed between ``before`` and ``after`` into the load's and others'.

    The load's: a tag the engine reported it applied, or one that points at ``image_id`` now and did not before,
    other than ``keep`` (the caller's own tag); and an image id it reported other than ``image_id``. A new tag under
    ``spare_new`` that points at the image and that the engine did not report is another board's quarantine
    loading the same image at the same moment, and counts as others'.
    """
    moves, others = [], []
    for tag in sorted(before.tags.keys() | after.tags.keys()):
        was, now = before.tags.get(tag), after.tags.get(tag)
        if was == now or tag == keep:
            continue
        move = TagMove(tag=tag, before=was, after=now)
        spared = spare_new is not None and was is None and tag.startswith(spare_new) and tag not in reported_tags
        if tag in reported_tags or (now == image_id and not spared):
            moves.append(move)
        else:
            others.append(move)
    images = sorted(i for i in set(reported_ids) if i != image_id)
    return LoadEffects(moves=moves, images=images, others=others)


def put_back(client: Any, effects: LoadEffects) -> None:
    """Point each tag the load moved at its old image again, drop each it made, and remove each image it made that
    was not expected (best effort, one by one)."""
    for move in effects.moves:
        repository, _, version = move.tag.rpartition(":")
        with contextlib.suppress(docker.errors.DockerException):
            if move.before is None:
                client.api.remove_image(move.tag, noprune=True)
            else:
                client.api.tag(move.before, repository, version, force=True)
    for image_id in effects.images:
        with contextlib.suppress(docker.errors.DockerException):
            client.api.remove_image(image_id, noprune=False)
