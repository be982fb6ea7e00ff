"""The judges' rubrics: one versioned Markdown file per dimension, hashed into the record.

Each file in ``runner/grading/rubrics/`` is named after its dimension and opens with a header::

    ---
    rubric: answer_correctness
    version: 1
    ---

The body below the header is what the judge reads. ``sha256`` is taken over the file's bytes,
header included, so a version bump and a silent edit both change it. The rubric-set digest
combines the six (dimension, version, sha256) triples in the contract's order of dimensions.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runner.errors import GradingError
from runner.grading.grades import DIMENSIONS, Dimension

RUBRIC_DIR = Path(__file__).resolve().parent / "rubrics"
_HEADER = re.compile(r"\A---\nrubric: ([a-z_]+)\nversion: ([1-9][0-9]*)\n---\n")


class RubricError(GradingError):
    """A rubric file is missing, unreadable, or its header is malformed or names the wrong dimension."""


class Rubric(BaseModel):
    """One dimension's rubric."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    dimension: Dimension
    """The dimension it grades."""
    version: int
    """The version from the file's header."""
    sha256: str
    """sha256 of the file's bytes."""
    text: str
    """The body the judge reads (the header stripped)."""


class RubricSet(BaseModel):
    """All six rubrics and one digest over them."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    rubrics: dict[Dimension, Rubric]
    """Keyed by dimension, in the contract's order."""
    digest: str
    """sha256 over ``dimension\\tversion\\tsha256\\n`` lines, in the contract's order."""

    def versions(self) -> dict[Dimension, int]:
        """Each dimension's rubric version."""
        return {d: r.version for d, r in self.rubrics.items()}


def load_rubric(path: Path) -> Rubric:
    """Read and check one rubric file.

    Raises:
        RubricError: the file cannot be read, is not UTF-8, or its header is malformed or names a
            dimension other than the file's name.
    """
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RubricError(f"{path}: cannot read rubric: {exc}") from exc
    header = _HEADER.match(text)
    if header is None:
        raise RubricError(f"{path}: the rubric must open with ---, rubric: <dimension>, version: <n>, ---")
    name, version = header.group(1), int(header.group(2))
    if name != path.stem or name not in DIMENSIONS:
        raise RubricError(f"{path}: header names {name!r}; expected one of the six dimensions, as the file name")
    return Rubric(
        dimension=name,
        version=version,
        sha256=hashlib.sha256(raw).hexdigest(),
        text=text[header.end() :].strip() + "\n",
    )


def load_rubrics(directory: Path = RUBRIC_DIR) -> RubricSet:
    """Load the six rubrics from ``directory`` and digest them.

    Raises:
        RubricError: a dimension has no file, or a file is malformed (see ``load_rubric``).
    """
    rubrics: dict[Dimension, Rubric] = {}
    for dimension in DIMENSIONS:
        path = directory / f"{dimension}.md"
        if not path.is_file():
            raise RubricError(f"{path}: no rubric for dimension {dimension}")
        rubrics[dimension] = load_rubric(path)
    lines = "".join(f"{d}\t{r.version}\t{r.sha256}\n" for d, r in rubrics.items())
    return RubricSet(rubrics=rubrics, digest=hashlib.sha256(lines.encode()).hexdigest())
