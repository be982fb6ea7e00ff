"""Limits for local runs: ``--sample-token-limit N`` and ``--run-cost-limit USD``.

The gateway enforces them: past the limit the agent's next call gets a 403 in its API's own shape, which the real
SDKs raise at once (they retry 408, 409, 429 and 5xx, never 403), saying why. End to end, the reference agent
in Docker loops on a provider that never lets it finish, the token limit stops it, and the record says
``token_limit`` for the sample, which keeps the answer the agent wrote. Official runs refuse both limits; bad values
are a clear error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from click.testing import CliRunner
from fake_provider import FakeProvider, Reply, openai_completion
from gateway_stage import staged

from runner.cli import main
from runner.gateway.model import Caps
from runner.prices import price
from runner.record.model import RunRecord
from runner.run.digests import current_digests
from runner.run.spec import RunError, RunSpec, official
from runner.trace.timeline import CallStep, read_timeline

ISPM = Path(sys.executable).with_name("ispm")
ASK = [{"role": "user", "content": "Who lacks MFA?"}]


def _clients(stage: Any, token: str) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    host, port = stage.gateway.listen_tcp()
    root = f"http://{host}:{port}"
    # The SDKs' own retry policy (two retries), as an agent would have it.
    return openai.OpenAI(base_url=root + "/v1", api_key=token), anthropic.Anthropic(base_url=root, api_key=token)


def test_past_the_token_limit_the_openai_sdks_get_a_403_they_do_not_retry() -> None:
    with staged(caps=Caps(max_tokens=30)) as stage:
        token = stage.gateway.issue_token("s")
        client, _ = _clients(stage, token)
        client.chat.completions.create(model="m", messages=ASK)  # 18 tokens
        client.chat.completions.create(model="m", messages=ASK)  # 36: over, but the call was let in under it
        with pytest.raises(openai.PermissionDeniedError) as chat:
            client.chat.completions.create(model="m", messages=ASK)
        with pytest.raises(openai.PermissionDeniedError) as responses:
            client.responses.create(model="m", input="Who lacks MFA?")
        usage = stage.gateway.usage("s")
        sent = len(stage.fake.seen)
    for refused in (chat.value, responses.value):
        assert refused.status_code == 403
        assert refused.code == "ispm_token_limit"
        assert "token limit is reached: 36 of 30" in refused.message
    assert (usage.refused, sent, usage.stopped_by) == (2, 2, "token_limit")  # one try each: no SDK retry


def test_past_the_token_limit_the_anthropic_sdk_gets_a_permission_error_it_does_not_retry() -> None:
    with staged("anthropic/claude-sonnet-4-0", caps=Caps(max_tokens=1)) as stage:
        token = stage.gateway.issue_token("s")
        _, client = _clients(stage, token)
        client.messages.create(model="m", max_tokens=5, messages=ASK)  # type: ignore[arg-type]
        with pytest.raises(anthropic.PermissionDeniedError) as refused:
            client.messages.create(model="m", max_tokens=5, messages=ASK)  # type: ignore[arg-type]
        # Counting tokens costs none: the limit does not refuse it.
        counted = client.messages.count_tokens(model="m", messages=ASK)  # type: ignore[arg-type]
        usage = stage.gateway.usage("s")
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "permission_error" and "token limit" in body["error"]["message"]
    assert counted.input_tokens > 0
    assert (usage.refused, usage.stopped_by) == (1, "token_limit")


def test_the_token_limit_is_per_sample() -> None:
    with staged(caps=Caps(max_tokens=10)) as stage:
        first, second = stage.gateway.issue_token("a"), stage.gateway.issue_token("b")
        client_a, _ = _clients(stage, first)
        client_b, _ = _clients(stage, second)
        client_a.chat.completions.create(model="m", messages=ASK)
        with pytest.raises(openai.PermissionDeniedError):
            client_a.chat.completions.create(model="m", messages=ASK)
        client_b.chat.completions.create(model="m", messages=ASK)  # another sample starts afresh
        assert stage.gateway.usage("b").stopped_by is None


def test_past_the_run_cost_limit_every_sample_is_refused() -> None:
    one_call = price("openai/gpt-4o", openai_usage(18)).usd
    assert one_call is not None
    with staged("openai/gpt-4o", caps=Caps(max_usd=one_call * 1.5)) as stage:
        client_a, _ = _clients(stage, stage.gateway.issue_token("a"))
        client_b, _ = _clients(stage, stage.gateway.issue_token("b"))
        client_a.chat.completions.create(model="m", messages=ASK)
        client_b.chat.completions.create(model="m", messages=ASK)  # 2 calls: over the limit, let in under it
        with pytest.raises(openai.PermissionDeniedError) as refused:
            client_a.chat.completions.create(model="m", messages=ASK)
        assert stage.gateway.usage("a").stopped_by == "cost_limit"
    assert refused.value.code == "ispm_cost_limit" and "cost limit is reached" in refused.value.message


def openai_usage(total: int) -> Any:
    from runner.call import Usage

    # The fake's canned chat answer: 18 tokens, split as it reports them.
    seen = openai_completion("x")["usage"]
    assert seen["prompt_tokens"] + seen["completion_tokens"] == total
    return Usage(input_tokens=seen["prompt_tokens"], output_tokens=seen["completion_tokens"])


# --- the spec and the command line ----------------------------------------------------------------------------


def test_official_refuses_both_limits() -> None:
    spec = RunSpec(
        agent_image="me/agent:1",
        candidate="openai/gpt-4o",
        judges=("openai/gpt-4o-mini", "anthropic/claude-sonnet-4-0"),
        sample_token_limit=1000,
        run_cost_limit_usd=5.0,
    )
    with pytest.raises(RunError) as refused:
        official(spec, current_digests())
    assert any("token limit" in p for p in refused.value.problems)
    assert any("cost limit" in p for p in refused.value.problems)


def test_a_spec_without_limits_is_written_as_before_and_with_them_keeps_them() -> None:
    plain = RunSpec(agent_image="a", judges=("ref#1", "ref#2"))
    assert 'limit"' not in plain.model_dump_json().replace('limit_s"', "")
    limited = plain.model_copy(update={"sample_token_limit": 500})
    assert RunSpec.model_validate_json(limited.model_dump_json()).sample_token_limit == 500


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sample-token-limit", "0"], "'--sample-token-limit': 0 is not in the range 1<=x<=100000000"),
        (["--sample-token-limit", "-5"], "'--sample-token-limit': -5 is not in the range"),
        (["--sample-token-limit", "1000000000000"], "'--sample-token-limit': 1000000000000 is not in the range"),
        (["--run-cost-limit", "-1"], "'--run-cost-limit': -1.0 is not in the range 0<x<=100000.0"),
        (["--run-cost-limit", "1e400"], "'--run-cost-limit': inf is not in the range"),
        (["--run-cost-limit", "nan"], "'--run-cost-limit': nan is not a number of dollars"),
        (["--run-cost-limit", "5", "--backend", "ray"], "not with --backend ray"),
        (["--run-cost-limit", "5", "--official"], "a run cost limit; v1 runs every sample"),
        (["--sample-token-limit", "5", "--official"], "a per-sample token limit"),
    ],
)
def test_bad_limits_are_a_clear_error(args: list[str], message: str) -> None:
    base = ["run", "--agent-image", "reference", "--candidate", "openai/gpt-4o"]
    base += ["--judge", "openai/gpt-4o-mini", "--judge", "anthropic/claude-sonnet-4-0"]
    done = CliRunner().invoke(main, [*base, *args])
    assert done.exit_code != 0 and message in done.output


def test_a_cost_limit_on_a_model_without_a_price_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        main,
        ["run", "--agent-image", "reference", "--candidate", "openai/gpt-scripted-1", "--judge", "ref#1",
         "--judge", "ref#2", "--run-cost-limit", "5", "--run-dir", str(tmp_path / "run")],
    )  # fmt: skip
    assert done.exit_code == 1 and "--run-cost-limit needs every model priced" in done.output
    assert "openai/gpt-scripted-1: not in" in done.output and not (tmp_path / "run").exists()


# --- end to end: the reference agent in Docker, looping ---------------------------------------------------------

LOOP_TASK = "ispm-001"
LIMIT = 700  # each step: 200 in / 10 out; the fourth call is let in at 630 and the fifth refused at 840


def _looping(_seen: Any) -> Reply:
    """Never the answer: always one more table listing."""
    call = {"id": "c", "type": "function", "function": {"name": "list_tables", "arguments": "{}"}}
    return Reply(body=openai_completion(None, prompt_tokens=200, completion_tokens=10, tool_calls=[call]))


@pytest.mark.docker
def test_a_looping_agent_is_stopped_by_its_token_limit_and_the_record_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    with FakeProvider(responder=_looping) as provider:
        env = {**os.environ, "OPENAI_API_KEY": "sk-loop", "OPENAI_BASE_URL": provider.openai_base}
        args = ["run", "--agent-image", "reference", "--candidate", "openai/loop", "--task", LOOP_TASK]
        args += ["--judge", "ref#1", "--judge", "ref#2", "--epochs", "1", "--concurrency", "1"]
        args += ["--sample-token-limit", str(LIMIT), "--run-dir", str(folder)]
        done = subprocess.run([str(ISPM), *args], capture_output=True, text=True, env=env, timeout=600, check=False)
        generation_calls = sum(s.path.endswith("/chat/completions") for s in provider.seen)
    assert done.returncode == 0, done.stdout + done.stderr
    record = RunRecord.model_validate_json((folder / "record.json").read_bytes())
    (sample,) = record.samples
    assert sample.status == "token_limit"
    assert sample.error is not None and f"token limit of {LIMIT} tokens was reached (840 used)" in sample.error
    assert record.failures.get("token_limit") == 1
    assert record.spec.sample_token_limit == LIMIT
    # Four calls reached the provider (plus preflight's probe); the fifth was refused, once: the agent did not retry.
    assert sample.agent is not None and sample.agent.requests == 4
    assert generation_calls == 5
    # The refusal is in the sample's transcript, as the agent got it: a 403 saying why.
    calls = [e.call for e in read_timeline(folder, LOOP_TASK, 1).events if isinstance(e, CallStep)]
    refused = calls[-1]
    assert (len(calls), refused.outcome, refused.status) == (5, "refused", 403)
    assert refused.error is not None and "token limit is reached: 840 of 700" in refused.error
    # The agent wrote its answer when refused; the sample is graded on it (the reference judge's recall, not a
    # failure vote saying "status token_limit").
    assert sample.graded and all("status token_limit" not in v.rationale for v in sample.votes)


def test_the_cost_breaker_trips_once_the_samples_reach_the_limit() -> None:
    from runner.call import Usage
    from runner.gateway.model import SampleUsage
    from runner.run.breaker import Breakers

    sample = SampleUsage(sample_id="s", tokens=Usage(input_tokens=1000, output_tokens=100))
    usd = price("openai/gpt-4o", sample.tokens).usd
    assert usd is not None
    breakers = Breakers(10, "openai/gpt-4o", cost_limit_usd=usd * 2.5)
    assert [breakers.spent(sample, []), breakers.spent(sample, []), breakers.over_budget()] == [None, None, None]
    trip = breakers.spent(sample, [])
    assert trip is not None and trip.breaker == "cost" and "cost limit is reached" in trip.reason
    assert breakers.over_budget() == trip  # no sample starts after it
    assert Breakers(10, "openai/gpt-4o").spent(sample, []) is None  # no limit, no breaker


def test_a_resume_counts_what_the_journal_already_spent_against_the_cost_limit(tmp_path: Path) -> None:
    from runner.run.breaker import spent_usd
    from runner.run.journal import JOURNAL_NAME, read_entries

    # The fake-provider run of tests/fixtures/v1_runs, its models renamed to priced ones (as tests/test_cost.py does).
    journal = (Path(__file__).parent / "fixtures" / "v1_runs" / "openai" / JOURNAL_NAME).read_text()
    renamed = {"openai/gpt-scripted-1": "openai/gpt-4o", "openai/judge-a": "openai/gpt-4o-mini"}
    for old, new in renamed.items():
        journal = journal.replace(old, new)
    (tmp_path / JOURNAL_NAME).write_text(journal)
    entries = read_entries(tmp_path / JOURNAL_NAME)
    # gpt-4o: 1527 in (496 cached) / 232 out; gpt-4o-mini: 2400 in / 160 out; judge-b has no price (counts nothing).
    agent = ((1527 - 496) * 2.5 + 496 * 1.25 + 232 * 10) / 1e6
    judge = (2400 * 0.15 + 160 * 0.6) / 1e6
    assert spent_usd(entries, "openai/gpt-4o") == pytest.approx(agent + judge)
