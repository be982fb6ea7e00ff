"""Runs with model judges and a model candidate on loopback fakes, for the dry-run, breaker and health tests.

- :func:`grading_responder`: a judge provider that grades like a sound judge (an answer with no evidence
  ``incorrect``, any other ``correct``), or, while ``state.broken``, answers plain text.
- :class:`GoldBackend`: answers every sample in-process with the gold answer, counting samples and calling a hook
  before each (to break or heal a fake judge at a chosen sample).
- :class:`GatewayAgentBackend`: an in-process agent that sends one chat request through the sample's real gateway
  socket with its per-sample token, as an agent in a container would.
- :func:`judged_spec`: a non-official, non-calibration spec with two model judges and no candidate.

The ``unhealthy`` fixture is a completed run whose judge failed on 4 of its 12 samples (the breaker never
reaching K): it completes, unhealthy and unranked.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, Seen, openai_completion, point_clients_at
from inprocess_backend import InProcessBackend

from runner.contract import SampleOutput
from runner.grading.grades import DIMENSIONS
from runner.grading.reference_judge import gold_answer
from runner.paths import tasks_dir
from runner.pipeline import start_run
from runner.run.spec import RunSpec
from runner.sample_key import SampleKey
from runner.sandbox.backend import GATEWAY_SOCKET_NAME, SampleSpec
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth

TRUTH = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
BY_ID = {t.id: t for t in load_tasks(tasks_dir())}
JUDGE_KEY = "sk-breaker-judge-0d9c8b7a6f5e"
JUDGE_A = "openai/judge-a"
JUDGE_B = "openai/judge-b"
GRADING_TOKENS = (1200, 80)
"""(prompt, completion) tokens of every grading reply."""
BROKEN_TEXT = "The grades are fine, trust me. sk-leaked-0123456789abcdef"
RUN_TASKS = ["ispm-001", "ispm-004", "ispm-006", "ispm-007", "ispm-008", "ispm-009", "ispm-010", "ispm-011"]


@dataclass
class JudgeState:
    """What the fake judge provider does now; a test flips it between samples."""

    broken: set[str] = field(default_factory=set)
    """Requested model names answered with plain text."""
    wrong: set[str] = field(default_factory=set)
    """Requested model names that grade every answer ``incorrect``."""
    gradings: dict[str, int] = field(default_factory=dict)
    """Grading requests seen, by requested model name."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def is_grading(seen: Seen) -> bool:
    """Whether ``seen`` is a judge's grading call (its system message holds the rubrics), not a probe."""
    body = seen.body if isinstance(seen.body, dict) else {}
    return any("# Rubrics" in str(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))


def grading_responder(state: JudgeState) -> Callable[[Seen], Reply | None]:
    """A responder for :class:`FakeProvider` that plays the judges; probes get the canned reply."""

    def respond(seen: Seen) -> Reply | None:
        if not is_grading(seen):
            return None
        model = str(seen.body.get("model"))
        with state.lock:
            state.gradings[model] = state.gradings.get(model, 0) + 1
        if model in state.broken:
            return Reply(body=openai_completion(BROKEN_TEXT, prompt_tokens=GRADING_TOKENS[0], completion_tokens=9))
        user = str(seen.body["messages"][-1]["content"])
        grade = "incorrect" if model in state.wrong or "Evidence (0 items" in user else "correct"
        text = json.dumps({"grades": {d: {"rationale": f"{model} says {grade}", "grade": grade} for d in DIMENSIONS}})
        return Reply(body=openai_completion(text, prompt_tokens=GRADING_TOKENS[0], completion_tokens=GRADING_TOKENS[1]))

    return respond


@pytest.fixture
def judges(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeProvider, JudgeState]]:
    """A judge provider on loopback that the OpenAI client reaches, with its state."""
    state = JudgeState()
    with FakeProvider(responder=grading_responder(state)) as fake:
        point_clients_at(monkeypatch, fake, JUDGE_KEY, JUDGE_KEY)
        yield fake, state


def judged_spec(tasks: list[str], *, epochs: int = 1, **update: Any) -> RunSpec:
    """Two model judges, no candidate, the in-process backend's ``local`` name; not official."""
    spec = RunSpec(
        agent_image="example/gold-agent:1",
        candidate=None,
        judges=(JUDGE_A, JUDGE_B),
        epochs=epochs,
        concurrency=1,
        tasks=tasks,
        backend="local",
    )
    return spec.model_copy(update=update)


class GoldBackend(InProcessBackend):
    """Answers every sample with its gold answer; ``before(n)`` runs before the n-th sample (1-based)."""

    name = "gold"
    isolates = True

    def __init__(self, before: Callable[[int], None] = lambda n: None) -> None:
        self.before = before
        self.ran: list[SampleKey] = []
        self._lock = threading.Lock()

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        with self._lock:
            self.ran.append(spec.key)
            number = len(self.ran)
        self.before(number)
        task = BY_ID[spec.task_id]
        answer = gold_answer(task, TRUTH[task.id])
        return SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="ok", answer=answer)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("localhost", timeout=30)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(self.unix_path))


class GatewayAgentBackend(InProcessBackend):
    """An agent that asks its model once through the sample's gateway socket, then gives up on an error."""

    name = "gateway-agent"
    isolates = True

    def __init__(self) -> None:
        self.ran: list[SampleKey] = []
        self.statuses: list[int] = []

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        self.ran.append(spec.key)
        assert spec.gateway_socket_dir is not None and spec.gateway_token is not None
        conn = _UnixConnection(spec.gateway_socket_dir / GATEWAY_SOCKET_NAME)
        try:
            body = json.dumps({"model": "any", "messages": [{"role": "user", "content": "Investigate."}]})
            token = spec.gateway_token.get_secret_value()
            headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
            conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
            reply = conn.getresponse()
            reply.read()
            self.statuses.append(reply.status)
        finally:
            conn.close()
        return SampleOutput(
            task_id=spec.task_id, epoch=spec.epoch, status="agent_error", error=f"the model answered {reply.status}"
        )


@pytest.fixture
def unhealthy(judges: tuple[FakeProvider, JudgeState], tmp_path: Path) -> Path:
    """A completed run in which judge A answered plain text on samples 3 to 6 of 12: unhealthy, unranked."""
    _, state = judges

    def before(n: int) -> None:
        if n == 3:
            state.broken.add("judge-a")
        elif n == 7:
            state.broken.discard("judge-a")

    run_dir = tmp_path / "unhealthy"
    start_run(judged_spec(RUN_TASKS[:6], epochs=2), run_dir, backend=GoldBackend(before), images={})
    return run_dir


def first_line_with(text: str, needle: str) -> str:
    """The first line of ``text`` containing ``needle`` (a test's failure then shows what was printed)."""
    return next((line for line in text.splitlines() if needle in line), f"<no line with {needle!r} in: {text!r}>")


@pytest.fixture
def stopped(judges: tuple[FakeProvider, JudgeState], tmp_path: Path) -> Path:
    """A run stopped by the judge breaker (K = 2): judge B answers plain text from the first sample on."""
    _, state = judges
    run_dir = tmp_path / "stopped"
    spec = judged_spec(RUN_TASKS[:4], breaker_after=2)
    start_run(spec, run_dir, backend=GoldBackend(lambda n: state.broken.add("judge-b")), images={})
    state.broken.clear()  # healed, for the next run on the same provider
    return run_dir
