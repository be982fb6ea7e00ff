"""Judge slots for an Inspect run: an Inspect model role with our rubrics and prompt, or the offline ``ref`` judge.

A model role's judge asks exactly what :class:`~runner.grading.judge.LLMJudge` asks (``build_messages``: the six
rubrics, the fenced agent text) and tries as it does, in the one retry loop of
:meth:`~runner.grading.judge.Tries.until_graded`: a reply that does not parse, is cut short or is refused is asked
again up to ``max_attempts`` calls, then every dimension abstains with the reason, as under ``ispm run``. Inspect's
model client makes the call, with its own retries.

Grading (:func:`runner.grading.grade.grade_sample`) is synchronous and runs on a worker thread; a model judge's
``judge`` hops back to the event loop for each call.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from functools import partial

import anyio.from_thread
from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model, get_model

from runner.call import Usage
from runner.grading.grades import Dimension
from runner.grading.judge import (
    DEFAULT_MAX_TOKENS,
    DimensionGrade,
    Judge,
    JudgeCallFailed,
    JudgeInput,
    JudgeVote,
    Tries,
    build_messages,
    excerpt,
)
from runner.grading.reference_judge import ReferenceJudge
from runner.grading.rubric import RubricSet
from runner.grading.slots import is_reference

DEFAULT_JUDGES = ("judge_a", "judge_b")
"""The model roles the two judge slots come from unless the task is told otherwise."""


class RoleJudge:
    """A judge slot filled by the model an Inspect model role is bound to."""

    def __init__(self, role: str, model: Model, rubrics: RubricSet, *, max_attempts: int = 3) -> None:
        """Judge with ``model``, recorded under the alias ``<role>:<model>``."""
        self.model = model
        self.alias = f"{role}:{model}"
        self.requested_model: str | None = str(model)
        self.rubrics = rubrics
        self.max_attempts = max_attempts

    def judge(self, item: JudgeInput) -> list[JudgeVote]:
        """One vote per dimension of ``item``'s task; called on a worker thread of the event loop, never raises for
        a bad reply or a failed call."""
        tries = Tries(self, item, self.rubrics, self.max_attempts)
        messages: list[ChatMessage] = [
            ChatMessageSystem(content=m["content"]) if m["role"] == "system" else ChatMessageUser(content=m["content"])
            for m in build_messages(item, self.rubrics, secrets.token_hex(12))
        ]
        generate = partial(
            self.model.generate, messages, config=GenerateConfig(temperature=0, max_tokens=DEFAULT_MAX_TOKENS)
        )

        def ask() -> dict[Dimension, DimensionGrade] | None:
            try:
                output = anyio.from_thread.run(generate)  # Inspect's model roles live on the event loop
            except Exception as exc:  # the provider failed past Inspect's own retries: abstain, as LLMJudge does
                raise JudgeCallFailed(f"provider error: {excerpt(str(exc), 400)}") from exc
            used = output.usage
            return tries.answered(
                text=output.completion,
                stop=output.stop_reason,
                usage=Usage(input_tokens=used.input_tokens, output_tokens=used.output_tokens) if used else None,
                latency_s=output.time or 0.0,
                model=output.model or None,
            )

        return tries.until_graded(ask)


def make_judges(slots: Sequence[str], rubrics: RubricSet) -> list[Judge]:
    """A judge per slot, inside a running sample: ``ref``/``ref#N`` offline, anything else a bound model role.

    Raises:
        ValueError: a slot names a model role the eval did not bind (``--model-role judge_a=provider/model``).
    """
    judges: list[Judge] = []
    for slot in slots:
        if is_reference(slot):
            judges.append(ReferenceJudge(slot, rubrics=rubrics))
            continue
        try:
            model = get_model(role=slot, required=True)
        except Exception as exc:  # Inspect raises its own error for an unbound role
            raise ValueError(
                f"judge slot {slot!r} is a model role that is not bound: pass --model-role {slot}=provider/model, "
                f"or use the offline judge with -T judges=ref,ref#2 ({exc})"
            ) from exc
        judges.append(RoleJudge(slot, model, rubrics))
    return judges
