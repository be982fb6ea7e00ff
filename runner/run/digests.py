"""The digests a run is pinned to, as the world, the task set, the ground truth and the rubrics are now."""

from __future__ import annotations

from runner.grading.rubric import RubricSet, load_rubrics
from runner.paths import cache_dir, world_dir
from runner.run.spec import Digests
from runner.tasks.catalog import catalog
from runner.tasks.truth import task_set_digest
from runner.world.verify import verify


def current_digests(rubrics: RubricSet | None = None) -> Digests:
    """The digests of the world, task set, ground truth and rubrics as they are now, with the pinned ones.

    The world is verified against its manifest, its tables' digests only once for the same bytes on this machine
    (``verify``'s ``passes``).

    Raises:
        WorldError: the snapshot does not match its own manifest.
    """
    manifest = verify(world_dir(), passes=cache_dir() / "world-checks").manifest
    truth = catalog().truth
    return Digests(
        world_logical=manifest.logical_digest,
        world_pinned=truth.world_logical_digest,
        task_set=task_set_digest(catalog().tasks),
        task_set_pinned=truth.task_set_digest,
        ground_truth=truth.ground_truth_digest,
        rubric_set=(rubrics or load_rubrics()).digest,
    )
