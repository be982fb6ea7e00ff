"""What a judge hands the rest of the pipeline: its votes.

Models only, so the run and record stages can read votes without loading the judges' HTTP clients.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from runner.grading.grades import Dimension, Grade, Vote
from runner.grading.rubric import RubricSet

JudgeFailure = Literal["malformed", "refused", "error"]
"""Why a judge could not grade: a reply that did not parse (or was empty or truncated), a refusal, or a
provider error."""


class JudgeSlot(Protocol):
    """The judge slot a vote is cast in: its alias, and the model it asks (``None`` for the reference judge)."""

    alias: str
    requested_model: str | None


class JudgeVote(BaseModel):
    """One judge's grade for one dimension, with what it cost. ``to_vote`` gives the consensus input."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    task_id: str
    """The graded task."""
    epoch: int
    """The graded epoch (1-based)."""
    judge: str
    """The judge alias, e.g. ``openai/gpt-4.1`` or ``ref``."""
    dimension: Dimension
    """The dimension this vote grades."""
    grade: Grade
    """``correct``, ``partial``, ``incorrect`` or ``abstain``."""
    rationale: str
    """The judge's reason; for an abstention, why it could not grade."""
    requested_model: str | None = None
    """The model name sent to the provider; ``None`` for the reference judge."""
    returned_model: str | None = None
    """The model id the provider returned on the wire, from the last reply."""
    input_tokens: int = 0
    """Prompt tokens over every call for this (task, epoch, judge)."""
    output_tokens: int = 0
    """Completion tokens over every call for this (task, epoch, judge)."""
    cached_tokens: int = 0
    """Of ``input_tokens``, those read from the provider's prompt cache (the rubrics' shared prefix). Written only
    when not 0, so a vote of an earlier run reads and writes as it always did."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``, those written to the provider's prompt cache, where it says so. Written only when
    not 0."""
    latency_s: float = 0.0
    """Wall time of those calls, provider retries included."""
    attempts: int = 0
    """Judge calls made (each may hide provider-level retries)."""
    rubric_sha256: str | None = None
    """sha256 of the rubric file this dimension was graded with."""
    failure: JudgeFailure | None = None
    """Set on an abstention the judge did not choose: its reply did not parse, it refused, or the provider
    failed. ``None`` for a grade and for a deliberate ``abstain``."""

    @classmethod
    def cast(
        cls,
        slot: JudgeSlot,
        task_id: str,
        epoch: int,
        dimension: Dimension,
        grade: Grade,
        rationale: str,
        *,
        rubrics: RubricSet | None,
        returned_model: str | None = None,
        failure: JudgeFailure | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        latency_s: float = 0.0,
        attempts: int = 0,
        cached_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> JudgeVote:
        """The vote ``slot`` casts on one dimension of one sample, stamped with the slot's alias and model and,
        when ``rubrics`` is given, with the hash of the rubric that dimension was graded with."""
        return cls(
            task_id=task_id,
            epoch=epoch,
            judge=slot.alias,
            dimension=dimension,
            grade=grade,
            rationale=rationale,
            requested_model=slot.requested_model,
            returned_model=returned_model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached_tokens,
            cache_write_tokens=cache_write_tokens,
            latency_s=latency_s,
            attempts=attempts,
            rubric_sha256=rubrics.rubrics[dimension].sha256 if rubrics is not None else None,
            failure=failure,
        )

    @model_serializer(mode="wrap")
    def _without_zero_cache(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The vote as earlier runs wrote it when no prompt cache was used: the cache counts only when not 0."""
        dumped = handler(self)
        if isinstance(dumped, dict):
            for name in ("cached_tokens", "cache_write_tokens"):
                if dumped.get(name, 1) == 0:
                    del dumped[name]
        return dumped

    def to_vote(self) -> Vote:
        """The plain consensus vote."""
        return Vote(
            task_id=self.task_id,
            epoch=self.epoch,
            judge=self.judge,
            dimension=self.dimension,
            grade=self.grade,
            rationale=self.rationale,
        )
