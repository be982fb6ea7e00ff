"""An agent on the official Anthropic SDK, in-process, for the transcript tests' runs.

:class:`SdkAgentBackend` answers each sample as an agent in a container would, through the sample's own gateway
socket and per-sample token: two streamed Messages turns with the ``anthropic`` SDK (a tool call, then its result
and a final text), then the gold answer. :func:`agent_responder` plays the candidate on the fake provider and
``breaker_runs.grading_responder`` the two judges, so one :class:`FakeProvider` serves the whole run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2  # the transport the anthropic SDK is built on
from breaker_runs import BY_ID, TRUTH, JudgeState, grading_responder
from fake_provider import Scripted, Seen, ToolCall, Turn, Usage
from inprocess_backend import InProcessBackend

from runner.contract import SampleOutput
from runner.grading.reference_judge import gold_answer
from runner.run.spec import RunSpec
from runner.sandbox.backend import GATEWAY_SOCKET_NAME, SampleSpec

SQL = "SELECT status, count(*) AS n FROM okta_users GROUP BY status ORDER BY status"
SYSTEM = "You investigate an enterprise's identities with SQL."
TOOLS: list[Any] = [
    {"name": "run_sql", "description": "Run one read-only SQL query.", "input_schema": {"type": "object"}}
]
CANDIDATE_KEY = "sk-ant-transcript-candidate-3f9e1d"
JUDGE_KEY = "sk-transcript-judge-8a7b6c5d4e"


def prompt_of(task_id: str) -> str:
    """What the agent sends as its first message."""
    return BY_ID[task_id].prompt.strip()


class SdkAgentBackend(InProcessBackend):
    """Two streamed turns through the gateway with the official Anthropic SDK, then the gold answer."""

    name = "anthropic-sdk-agent"
    isolates = True

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        assert spec.gateway_socket_dir is not None and spec.gateway_token is not None
        transport = httpx2.HTTPTransport(uds=str(spec.gateway_socket_dir / GATEWAY_SOCKET_NAME))
        with anthropic.Anthropic(
            api_key=spec.gateway_token.get_secret_value(),
            base_url="http://localhost",
            http_client=httpx2.Client(transport=transport),
            max_retries=0,
        ) as client:
            messages: list[Any] = [{"role": "user", "content": prompt_of(spec.task_id)}]
            for _ in range(2):
                with client.messages.stream(
                    model="claude-sonnet-whatever", max_tokens=1024, system=SYSTEM, messages=messages, tools=TOOLS
                ) as stream:
                    reply = stream.get_final_message()
                messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
                calls = [b for b in reply.content if b.type == "tool_use"]
                if not calls:
                    break
                result = {"type": "tool_result", "tool_use_id": calls[0].id, "content": "ACTIVE|412\nSUSPENDED|9"}
                messages.append({"role": "user", "content": [result]})
        time.sleep(self.delay_s)
        task = BY_ID[spec.task_id]
        return SampleOutput(
            task_id=spec.task_id, epoch=spec.epoch, status="ok", answer=gold_answer(task, TRUTH[task.id])
        )


def agent_responder(state: JudgeState) -> Callable[[Seen], Scripted | None]:
    """The candidate's turns (a tool call, then after its result a text) and the judges' gradings."""
    judges = grading_responder(state)

    def respond(seen: Seen) -> Scripted | None:
        body = seen.body if isinstance(seen.body, dict) else {}
        if not seen.path.startswith("/v1/messages") or "tools" not in body:
            return judges(seen)
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(part.get("type") == "tool_result" for part in last):
            return Turn(text="Two statuses: 412 active, 9 suspended.", usage=Usage(input_tokens=320, output_tokens=14))
        return Turn(
            text="Counting Okta users by status.",
            tool_calls=[ToolCall("run_sql", {"sql": SQL}, id="toolu_sql")],
            usage=Usage(input_tokens=210, output_tokens=25, cached_tokens=100),
        )

    return respond


def sdk_spec(tasks: list[str], judges: tuple[str, str] = ("openai/judge-a", "openai/judge-b")) -> RunSpec:
    """An Anthropic candidate, two OpenAI judges (or ``judges``), the in-process backend's ``local`` name."""
    return RunSpec(
        agent_image="example/anthropic-sdk-agent:1",
        candidate="anthropic/claude-scripted-1",
        judges=judges,
        epochs=1,
        concurrency=1,
        tasks=tasks,
        backend="local",
    )
