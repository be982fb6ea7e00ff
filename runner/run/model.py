"""Models of the run stage that other stages read: what a judge's dry run at preflight cost.

Models only: importing this module loads no judge, no grading and no HTTP client.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


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

    def summary_line(self) -> str:
        """What preflight prints for this judge."""
        return (
            f"judge dry run  {self.judge}: {self.samples} calibration samples in {self.calls} call(s), "
            f"{self.input_tokens:,} in / {self.output_tokens:,} out tokens, {self.latency_s:.1f} s; "
            f"projected for {self.projected_samples:,} samples: ~{self.projected_input_tokens:,} in / "
            f"~{self.projected_output_tokens:,} out tokens"
        )
