"""Judges that pay for their rubric once: the judge prompt opens with a part every call of a run shares (the
instructions and the six rubrics, no nonce, nothing per task or sample), which Anthropic judges mark with
``cache_control``; the cached tokens the provider reports are counted on the votes and in the record, and priced as
cached. The injection-defence tests of tests/test_judge.py run unchanged against this layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_provider import FakeProvider, Reply, anthropic_message, fake_provider
from fake_provider import openai_completion as completion
from test_judge import NONCE, RUBRICS, env, grades_json, make_item, make_judge

from runner.call import Usage
from runner.grading.judge import CACHE_CONTROL, build_messages, judge_instructions
from runner.grading.model import JudgeVote
from runner.paths import tasks_dir
from runner.prices import price
from runner.record.build import build_record
from runner.run.journal import JOURNAL_NAME, read_entries
from runner.tasks.load import load_tasks

__all__ = ["env", "fake_provider"]  # fixtures used by name


def test_every_call_of_a_run_opens_with_the_same_instructions_and_rubrics() -> None:
    prefix = judge_instructions(RUBRICS)
    systems = [
        build_messages(make_item(kind, response), RUBRICS, nonce)[0]["content"]
        for kind, response, nonce in [
            ("verdict", "Yes.", "a" * 24),
            ("enumeration", "Ann and Bob.", "b" * 24),
            ("verdict", "No, nobody.", "c" * 24),
        ]
    ]
    assert all(s.startswith(prefix) for s in systems)
    assert all(d in prefix for d in ("answer_correctness", "answer_verdict", "sql_semantic_appropriateness"))
    # Nothing of the call is in the prefix: no nonce, no task, no answer.
    assert not any(n * 24 in prefix for n in "abc") and "ispm-042" not in prefix and "Ann and Bob" not in prefix
    # The call's own part comes after it: its nonce and its dimensions.
    tails = [s[len(prefix) :] for s in systems]
    assert "a" * 24 in tails[0] and "answer_verdict" not in tails[1].split("Grade each")[1].split("\n")[0]


def test_an_anthropic_judge_marks_the_shared_prefix_for_the_cache(env: FakeProvider) -> None:
    env.push(Reply(body=anthropic_message([{"type": "text", "text": grades_json()}], input_tokens=40, cache_read=1600)))
    votes = make_judge("anthropic/claude-sonnet-4-6").judge(make_item())
    sent = env.seen[0].body
    assert env.seen[0].path == "/v1/messages"
    first, second = sent["system"]
    assert first == {"type": "text", "text": judge_instructions(RUBRICS), "cache_control": CACHE_CONTROL}
    assert "cache_control" not in second and NONCE in second["text"] and NONCE not in first["text"]
    # The cache reads are counted as such, a part of the input.
    assert {(v.input_tokens, v.cached_tokens) for v in votes} == {(1640, 1600)}


def test_an_openai_judge_sends_one_system_text_which_openai_caches_on_its_own(env: FakeProvider) -> None:
    env.push(Reply(body=completion(grades_json(), prompt_tokens=2000, cached_tokens=1536)))
    votes = make_judge().judge(make_item())
    system = env.seen[0].body["messages"][0]["content"]
    assert isinstance(system, str) and system.startswith(judge_instructions(RUBRICS))
    assert {(v.input_tokens, v.cached_tokens) for v in votes} == {(2000, 1536)}


def test_a_vote_without_cache_reads_is_written_as_before_and_one_with_them_keeps_them() -> None:
    plain = JudgeVote(task_id="t", epoch=1, judge="j", dimension="answer_correctness", grade="correct", rationale="r")
    assert "cached_tokens" not in plain.model_dump_json() and "cache_write_tokens" not in plain.model_dump_json()
    cached = plain.model_copy(update={"input_tokens": 2000, "cached_tokens": 1500})
    assert JudgeVote.model_validate_json(cached.model_dump_json()).cached_tokens == 1500


def test_cached_judge_tokens_are_priced_at_the_cached_rate() -> None:
    # Claude Sonnet 4: $3 per million input tokens, $0.30 per million read from the cache.
    uncached = price("anthropic/claude-sonnet-4-0", Usage(input_tokens=2000))
    cached = price("anthropic/claude-sonnet-4-0", Usage(input_tokens=2000, cached_tokens=1600))
    assert uncached.usd == pytest.approx(2000 * 3 / 1e6)
    assert cached.usd == pytest.approx((400 * 3 + 1600 * 0.3) / 1e6)


def test_the_record_counts_the_judges_cache_reads(tmp_path: Path) -> None:
    """A judge's cache reads on its votes reach the record's judge tokens (once per sample, as its input does)."""
    lines = []
    for line in (Path(__file__).parent / "fixtures" / "v1_runs" / "openai" / JOURNAL_NAME).read_text().splitlines():
        entry = json.loads(line)
        if entry.get("kind") == "sample_graded":
            for vote in entry["votes"]:
                if vote["judge"] == "openai/judge-a":
                    vote["cached_tokens"] = 1000
        lines.append(json.dumps(entry))
    (tmp_path / JOURNAL_NAME).write_text("\n".join(lines) + "\n")
    record = build_record(read_entries(tmp_path / JOURNAL_NAME), load_tasks(tasks_dir()))
    assert record.judge_tokens["openai/judge-a"].cached_tokens == 2000  # two samples
    assert record.judge_tokens["openai/judge-b"].cached_tokens == 0
    assert [s.judges["openai/judge-a"].cached_tokens for s in record.samples] == [1000, 1000]
