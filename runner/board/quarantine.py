"""Quarantine: an upload is trusted for its content, never for a name it carries.

The upload is read as it arrives (``runner.board.upload``, ``runner.sandbox.image_archive``): bounded headers and
sizes, every blob hashed, the image id the sha256 of the config's bytes, every layer checked against the config's
``rootfs.diff_ids``. :func:`check_image` then holds the board's rules: the contract label
``ispm.agent.contract=ispm.agent/v1`` and no name for the image anywhere an engine reads names from (``ispm
submit`` saves the image by id). :func:`load_image` has the engine load the archive the board writes from the
verified blobs (``runner.sandbox.canonical``), never the submitter's, and tags it itself; a load that moved or
made any name anyway is undone, refused and logged as ``board.attack``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from runner import log
from runner.board.errors import BoardError
from runner.contract import AGENT_CONTRACT
from runner.errors import SandboxError
from runner.sandbox.canonical import TagsMoved, load_verified
from runner.sandbox.image_archive import ArchiveRefused, VerifiedImage
from runner.sandbox.transfer import ImageLoadRefused, remove_tag

CONTRACT_LABEL: Final = "ispm.agent.contract"
BOARD_IMAGES: Final = "ispm-board/"
"""Every board's image tags are under this repository path."""

_log = log.get(__name__)


def refused(exc: ArchiveRefused) -> BoardError:
    """The 422 for an archive the reader refused."""
    return BoardError(str(exc), status=422)


def check_image(image: VerifiedImage) -> None:
    """The board's rules for a verified image.

    Raises:
        BoardError: 422 when the archive names the image (``manifest.json``'s ``RepoTags``, a ``repositories`` file,
            an OCI name annotation) or the image has no contract label.
    """
    for source, names in image.named_by.items():
        raise BoardError(f"refused: {source} names the image ({names}); save it by id", status=422)
    if image.labels.get(CONTRACT_LABEL) != AGENT_CONTRACT:
        raise BoardError(
            f'the image has no contract label: build it with LABEL {CONTRACT_LABEL}="{AGENT_CONTRACT}"', status=422
        )


def board_name(board_id: str) -> str:
    """``board_id`` as a Docker name component: a readable slug and 8 hex of its sha256 (two ids that slug alike
    stay apart), e.g. ``example-board-1a2b3c4d``."""
    slug = re.sub(r"[^a-z0-9]+", "-", board_id.lower()).strip("-")[:40].strip("-") or "board"
    return f"{slug}-{hashlib.sha256(board_id.encode()).hexdigest()[:8]}"


def board_tag(board_id: str, submission_id: int, image_id: str) -> str:
    """The board's tag for a submission's image, naming the board, so that boards on one engine never touch
    each other's: ``ispm-board/<board name>/submission-<id>:<12 hex of the image id>``."""
    hex_id = image_id.removeprefix("sha256:")[:12]
    return f"{BOARD_IMAGES}{board_name(board_id)}/submission-{submission_id}:{hex_id}"


def load_image(image: VerifiedImage, tag: str) -> str:
    """Load the verified ``image`` from the board's own archive of it, tag it ``tag``, and return its id.

    Raises:
        BoardError: 422 when the engine refuses the archive or the load moved or made a name (put back, and logged
            as an attack); 503 when the engine cannot be reached.
    """
    try:
        loaded = load_verified(image, tag, spare_new=BOARD_IMAGES)
    except TagsMoved as exc:
        _log.error(
            "board.attack", image=image.image_id, tag=tag, moves=[m.model_dump() for m in exc.effects.moves],
            images=exc.effects.images,
        )  # fmt: skip
        raise BoardError(f"refused as an attack: {exc}", status=422) from exc
    except ImageLoadRefused as exc:
        raise BoardError(str(exc), status=422) from exc
    except SandboxError as exc:
        raise BoardError(f"the board's {exc}", status=503) from exc
    if loaded.others:
        _log.info("board.engine_changed_during_load", tag=tag, changes=[m.model_dump() for m in loaded.others])
    return loaded.image_id


def remove_image(tag: str) -> None:
    """Drop the board's tag of a submission's image (the layers go when nothing else uses them); best effort."""
    remove_tag(tag)
