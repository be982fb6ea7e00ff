"""``ispm export``: a run's samples written in the field's formats, ATIF trajectories or an Inspect eval log.

The edge of the exports: it reads the run folder (journal, transcripts, ``record.json``, the task set) and writes
files; :mod:`runner.trace.atif` and :mod:`runner.trace.inspect_log` build the documents from timelines, purely.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from runner.errors import IspmError
from runner.grading.grades import Grade
from runner.record.build import load_record
from runner.record.model import RunRecord
from runner.sample_key import SampleKey
from runner.tasks.catalog import catalog
from runner.tasks.model import Task
from runner.trace.atif import trajectory
from runner.trace.inspect_log import eval_log, eval_sample
from runner.trace.timeline import RunSamples, read_run, sample_timeline

ExportFormat = Literal["atif", "inspect"]
"""The formats ``ispm export`` writes."""
TRAJECTORY_SUFFIX = ".trajectory.json"
"""Each ATIF file is ``<task>.e<epoch>.trajectory.json``."""


class ExportError(IspmError):
    """A run cannot be exported: its folder, journal or record is missing or damaged, or the target cannot be
    written."""


def default_out(run_dir: Path, fmt: ExportFormat) -> Path:
    """Where ``ispm export`` writes without ``--out``: ``<run-id>.<format>/`` beside the run folder (never inside it,
    where it would join the run's bundle)."""
    return run_dir.resolve().parent / f"{run_dir.resolve().name}.{fmt}"


def epoch_consensus(record: RunRecord | None) -> dict[SampleKey, dict[str, Grade]]:
    """Each sample's per-dimension epoch consensus; empty for a run without a score."""
    found: dict[SampleKey, dict[str, Grade]] = {}
    for task in record.scores.tasks if record is not None and record.scores else []:
        for dimension, by_epoch in task.epochs.items():
            for epoch, grade in by_epoch.items():
                found.setdefault(SampleKey(task_id=task.task_id, epoch=epoch), {})[dimension] = grade
    return found


def _outside(run_dir: Path, out_dir: Path) -> None:
    """Refuse a target inside the run folder: every file there joins the run's bundle and its signature."""
    if out_dir.resolve().is_relative_to(run_dir.resolve()):
        raise ExportError(f"the export {out_dir} must not be written inside the run folder {run_dir}")


def _read(run_dir: Path) -> tuple[RunSamples, RunRecord]:
    try:
        return read_run(run_dir), load_record(run_dir)
    except IspmError as exc:
        raise ExportError(str(exc)) from exc


def _write_json(target: Path, value: Any, *, indent: int | None) -> Path:
    scratch = target.with_name(target.name + ".tmp")
    scratch.write_text(json.dumps(value, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(scratch, target)  # a reader never sees half a file
    return target


def _prompts(tasks: Sequence[Task] | None) -> dict[str, str]:
    return {t.id: t.prompt for t in (tasks if tasks is not None else catalog().tasks)}


def write_atif(run_dir: Path, out_dir: Path, tasks: Sequence[Task] | None = None) -> list[Path]:
    """Write one ATIF trajectory per sample of the run in ``run_dir`` into ``out_dir``; return the files.
    ``tasks`` (for each sample's prompt) saves reading the task set when the caller has it.

    Raises:
        ExportError: the run cannot be read, or ``out_dir`` is inside the run folder or cannot be written.
    """
    _outside(run_dir, out_dir)
    run, record = _read(run_dir)
    prompts = _prompts(tasks)
    image = record.spec.agent_image
    consensus = epoch_consensus(record)
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for key in run.order:
            doc = trajectory(
                sample_timeline(run_dir, run, key),
                agent_image=image,
                image_id=record.images.get(image),
                prompt=prompts.get(key.task_id),
                consensus=consensus.get(key),
            )
            target = out_dir / f"{key.label()}{TRAJECTORY_SUFFIX}"
            written.append(_write_json(target, doc.model_dump(mode="json", exclude_none=True), indent=2))
    except OSError as exc:
        raise ExportError(f"cannot write the trajectories into {out_dir}: {exc}") from exc
    return written


def inspect_log_name(record: RunRecord) -> str:
    """The log's file name: Inspect lists a JSON log only under a name that begins with its time."""
    started = datetime.fromisoformat(record.started_at)
    return f"{started.strftime('%Y-%m-%dT%H-%M-%S')}_ispm-enterprise-sql_{record.run_id}.json"


def write_inspect(run_dir: Path, out_dir: Path, tasks: Sequence[Task] | None = None) -> Path:
    """Write the Inspect eval log of the run in ``run_dir`` into ``out_dir``; return the file. ``tasks`` as for
    :func:`write_atif`.

    Raises:
        ExportError: the run or its record cannot be read, or ``out_dir`` is inside the run folder or cannot be
            written.
    """
    _outside(run_dir, out_dir)
    run, record = _read(run_dir)
    prompts = _prompts(tasks)
    consensus = epoch_consensus(record)
    model = record.candidate_model or f"none/{record.calibration or 'no-candidate'}"
    samples = [
        eval_sample(
            sample_timeline(run_dir, run, key),
            prompts.get(key.task_id, ""),
            consensus.get(key, {}),
            model,
        )
        for key in run.order
    ]
    log = eval_log(record, samples)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        return _write_json(
            out_dir / inspect_log_name(record), log.model_dump(mode="json", exclude_none=True), indent=None
        )
    except OSError as exc:
        raise ExportError(f"cannot write the Inspect log into {out_dir}: {exc}") from exc
