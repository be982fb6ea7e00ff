"""Models of the run stage that other stages read: what a judge's dry run at preflight cost.

Models only: importing this module loads no judge, no grading and no HTTP client.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class JudgeDryRun(BaseModel):
    """What one judge's dry run cost, and what the whole run is projected to cost in judge tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    judge: str
    """The judge alias."""
    samples: int
    """Calibration samples graded."""
    calls: int
    """Judge calls made (each may hide provider-level retries)."""
    input_tokens: int
    """Prompt tokens over those calls."""
    output_tokens: int
    """Completion tokens over those calls."""
    latency_s: float
    """Wall time of those calls."""
    projected_samples: int
    """Samples the run will grade with this judge."""
    projected_input_tokens: int
    """Mean input tokens per dry-run sample times ``projected_samples``."""
    projected_output_tokens: int
    """Mean output tokens per dry-run sample times ``projected_samples``."""
    sample_input_tokens: tuple[int, int] | None = None
    """The fewest and the most input tokens one dry-run sample took (the range a run's cost is projected over);
    ``None`` for a dry run recorded before it was kept, and then not written."""
    sample_output_tokens: tuple[int, int] | None = None
    """The same for output tokens."""

    @model_serializer(mode="wrap")
    def _without_unknown_ranges(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The dry run as earlier runs wrote it when it has no ranges: they appear only when known."""
        dumped = handler(self)
        if isinstance(dumped, dict):
            for name in ("sample_input_tokens", "sample_output_tokens"):
                if dumped.get(name, 0) is None:
                    del dumped[name]
        return dumped

    def summary_line(self) -> str:
        """What preflight prints for this judge."""
        return (
            f"judge dry run  {self.judge}: {self.samples} calibration samples in {self.calls} call(s), "
            f"{self.input_tokens:,} in / {self.output_tokens:,} out tokens, {self.latency_s:.1f} s; "
            f"projected for {self.projected_samples:,} samples: ~{self.projected_input_tokens:,} in / "
            f"~{self.projected_output_tokens:,} out tokens"
        )
