"""The board's errors: each carries the HTTP status the API answers with."""

from __future__ import annotations

from runner.errors import IspmError


class BoardError(IspmError):
    """A board request or step was refused; ``status`` is the HTTP status the API answers with.

    Attributes:
        status: 4xx for the submitter's input, 5xx for the board's own faults.
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        self.status = status
        super().__init__(message)
