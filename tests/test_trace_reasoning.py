"""Reasoning in ``ispm trace``: a Responses reasoning item that carries ``encrypted_content`` and a summary shows its
summary; only the encrypted part is marked as withheld (issue 31). The reply is read by the gateway's own Responses
reader from a body built with the openai package's types, as the gateway captures it; the run is written with fixed
times (``trace_runs``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner
from inspect_ai.log import read_eval_log
from inspect_ai.model import ContentReasoning
from openai.types.responses import Response
from trace_runs import KEY, PROMPT, SQL, at, task_set, write_run

from runner.call import Body, ModelCall, ReasoningBlock, Usage
from runner.cli import main
from runner.gateway.protocols.responses import ResponsesReader
from runner.trace.export import write_inspect
from runner.trace.sample_page import SAMPLES_DIR, write_report_and_pages
from runner.trace.text import WITHHELD

SUMMARY = "Count the Okta users by status first."
ENCRYPTED = "gAAAAABpZ2VuY3J5cHRlZC1yZWFzb25pbmc="
REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": SUMMARY}],
    "encrypted_content": ENCRYPTED,
}


def responses_body(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole Responses reply as the API sends it (validated by the SDK's own type)."""
    body = {
        "id": "resp_1", "object": "response", "created_at": 1764579600, "status": "completed", "model": "gpt-x-2026",
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0}, "output_tokens": 30,
                  "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 150},
    }  # fmt: skip
    return Response.model_validate(body).model_dump(mode="json", exclude_unset=True)


def responses_calls() -> list[ModelCall]:
    """Two Responses calls (store=false): the first's reply holds the reasoning item; the second sends it back."""
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "run_sql",
            "arguments": f'{{"sql": "{SQL}"}}', "status": "completed"}  # fmt: skip
    reader = ResponsesReader()
    reader.read_body(responses_body([REASONING_ITEM, call]))
    first_reply = reader.reply(complete=True)
    first = {"model": "gpt-x", "store": False, "include": ["reasoning.encrypted_content"], "input": PROMPT,
             "tools": [{"type": "function", "name": "run_sql", "parameters": {"type": "object"}}]}  # fmt: skip
    second = {**first, "input": [{"role": "user", "content": PROMPT}, REASONING_ITEM, call,
                                 {"type": "function_call_output", "call_id": "call_1", "output": "status | n"}]}  # fmt: skip
    reader = ResponsesReader()
    done = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}  # fmt: skip
    reader.read_body(responses_body([done]))
    common: dict[str, Any] = {"caller": "candidate", "api": "responses", "provider_api": "responses", "requested_model": "gpt-x",
              "returned_model": "gpt-x-2026", "stream": False, "status": 200, "outcome": "ok"}  # fmt: skip
    return [
        ModelCall(seq=0, started_at=at(1), latency_s=0.5, usage=Usage(input_tokens=120, output_tokens=30),
                  request=Body(encoding="json", content=first, size=300), response=first_reply, **common),
        ModelCall(seq=1, started_at=at(3), latency_s=0.25, usage=Usage(input_tokens=200, output_tokens=5),
                  request=Body(encoding="json", content=second, size=600), response=reader.reply(complete=True),
                  **common),
    ]  # fmt: skip


def test_the_reader_keeps_the_summary_and_marks_the_encrypted_part() -> None:
    reply = responses_calls()[0].response
    assert reply is not None
    assert reply.blocks[0] == ReasoningBlock(text=SUMMARY, redacted=True)


def test_trace_shows_a_kept_summary_and_marks_only_the_encrypted_content(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", agent_calls=responses_calls())
    done = CliRunner().invoke(main, ["trace", str(run), "--task", "ispm-001", "--text"])
    assert done.exit_code == 0, done.output
    shown = [line.strip() for line in done.stdout.splitlines() if "reasoning:" in line]
    # Once in the first call's reply, and not again when the second call sends the same item back (already shown).
    assert shown == [f"assistant reasoning: {SUMMARY} {WITHHELD}"]
    assert ENCRYPTED not in done.stdout and "[redacted]" not in done.stdout


def test_reasoning_sent_back_with_a_summary_reads_as_its_summary() -> None:
    from runner.trace.conversation import read_request

    body = {"input": [{"role": "user", "content": PROMPT}, REASONING_ITEM, {**REASONING_ITEM, "summary": []},
                      {"type": "reasoning", "id": "rs_3", "summary": [{"type": "summary_text", "text": "plain"}]}]}  # fmt: skip
    parts = read_request("responses", body).messages[1].parts
    assert parts == [
        ReasoningBlock(text=SUMMARY, redacted=True),  # the summary kept, the encrypted part withheld
        ReasoningBlock(text="", redacted=True),  # nothing readable at all
        ReasoningBlock(text="plain", redacted=False),  # a summary without encrypted content
    ]


def test_the_inspect_export_shows_the_summary_of_encrypted_reasoning(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", agent_calls=responses_calls())
    log = read_eval_log(str(write_inspect(run, tmp_path / "out", task_set())))
    assert log.samples is not None
    (sample,) = log.samples
    found = [c for m in sample.messages if m.role == "assistant" and not isinstance(m.content, str)
             for c in m.content if isinstance(c, ContentReasoning)]  # fmt: skip
    assert [(c.summary, c.redacted, c.reasoning) for c in found] == [(SUMMARY, True, "")]
    assert found[0].text == f"<think>{SUMMARY}</think>"  # what Inspect itself shows and replays


def test_the_sample_page_shows_the_summary_and_says_what_is_withheld(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", agent_calls=responses_calls())
    write_report_and_pages(run, tasks=task_set())
    page = (run / SAMPLES_DIR / f"{KEY.label()}.html").read_text(encoding="utf-8")
    assert "<summary>reasoning (its summary; the encrypted part is withheld)</summary>" in page
    assert SUMMARY in page and ENCRYPTED not in page
