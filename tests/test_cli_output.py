"""The ``ispm`` command's exact output, through ``CliRunner``: text, the two ``--json`` shapes, errors and exit codes.

The shapes are documented in the README's command table; these tests hold the commands to them.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import docker
import pytest
from click.testing import CliRunner

from runner.cli import COMMANDS, main
from runner.sandbox.backend import LABEL_RUN, LABEL_SANDBOX

VOTES = [
    {"task_id": "ispm-001", "epoch": 1, "judge": "a", "dimension": "answer_correctness", "grade": "correct"},
    {"task_id": "ispm-001", "epoch": 1, "judge": "b", "dimension": "answer_correctness", "grade": "correct"},
    {"task_id": "ispm-001", "epoch": 1, "judge": "a", "dimension": "reasoning_utility", "grade": "partial"},
    {"task_id": "ispm-001", "epoch": 1, "judge": "b", "dimension": "reasoning_utility", "grade": "abstain"},
    {"task_id": "ispm-002", "epoch": 1, "judge": "a", "dimension": "answer_correctness", "grade": "incorrect"},
    {"task_id": "ispm-002", "epoch": 1, "judge": "b", "dimension": "answer_correctness", "grade": "correct"},
]


@pytest.fixture
def votes(tmp_path: Path) -> Path:
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in VOTES))
    return path


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_consensus_prints_a_table(votes: Path) -> None:
    assert invoke("consensus", str(votes)) == (
        0,
        "TASK         DIMENSION                        GRADE      EPOCHS\n"
        "ispm-001     answer_correctness               correct    1:correct\n"
        "ispm-001     reasoning_utility                partial    1:partial\n"
        "ispm-002     answer_correctness               incorrect  1:incorrect\n"
        "1 correct, 1 partial, 1 incorrect, 0 abstain\n",
        "",
    )


def test_consensus_json_is_lines(votes: Path) -> None:
    assert invoke("consensus", str(votes), "--json") == (
        0,
        '{"task_id": "ispm-001", "dimension": "answer_correctness", "grade": "correct", "epochs": {"1": "correct"}}\n'
        '{"task_id": "ispm-001", "dimension": "reasoning_utility", "grade": "partial", "epochs": {"1": "partial"}}\n'
        '{"task_id": "ispm-002", "dimension": "answer_correctness", "grade": "incorrect", '
        '"epochs": {"1": "incorrect"}}\n',
        "",
    )


RUBRICS = (
    "answer_correctness               v1  4d6a150e2463c63c61a5f031c267d4acb74eb51984ec51c0c66627979d5fa023\n"
    "answer_verdict                   v1  c43f590b3ada3a375dd3b77b83adce1d3de41cc69da877907153ff3021a3606a\n"
    "evidence_completeness            v1  1209316c923ea1d0b7bd8f4c65429e1c8451235abf4a1e0910d46da239b8a975\n"
    "contextual_evidence_relevancy    v1  71d3a89ba1f164dc8cab2ede66ff3c9d660edbf46f1fdc09487b75fdbed6bf7f\n"
    "reasoning_utility                v1  c2e1a2e1725fe82776ccc88d5f5eeee00e5107ccfdf741427a5a0bf68d102b9c\n"
    "sql_semantic_appropriateness     v1  537a8db6f4facd7132b914cea4bcc38175a905852a11d681f87adc9d8232c4f0\n"
    "rubric set 8a1c9f58bf4545f49c28a5c72deea403bace426f6a880736a6fce2fcff209bd6\n"
)


def test_rubrics_prints_each_dimension_and_the_set_digest() -> None:
    assert invoke("rubrics") == (0, RUBRICS, "")


def test_rubrics_json_is_one_sorted_indented_object() -> None:
    code, out, err = invoke("rubrics", "--json")
    assert (code, err) == (0, "")
    payload = json.loads(out)
    assert out == json.dumps(payload, indent=2, sort_keys=True) + "\n"
    lines = RUBRICS.splitlines()
    assert payload["digest"] == lines[-1].removeprefix("rubric set ")
    assert {d: f"v{r['version']}  {r['sha256']}" for d, r in payload["rubrics"].items()} == {
        line.split()[0]: line.split(maxsplit=1)[1] for line in lines[:-1]
    }


def test_a_library_error_is_one_message_and_exit_1() -> None:
    assert invoke("tasks", "show", "ispm-999") == (1, "", "Error: no such task: ispm-999\n")


def test_a_value_a_model_refuses_is_named_by_field(tmp_path: Path) -> None:
    args = ("run", "--agent-image", "null", "--judge", "ref", "--judge", "ref", "--run-dir", str(tmp_path / "run"))
    assert invoke(*args) == (
        1,
        "",
        "Error: judges: the two judge slots need distinct aliases (use ref#1 and ref#2), got ['ref', 'ref']\n",
    )
    assert not (tmp_path / "run").exists()


def test_a_bad_world_prints_the_documented_json_and_exits_1(world_copy: Path) -> None:
    (world_copy / "manifest.json").write_text("{}")
    code, out, err = invoke("world", "verify", "--dir", str(world_copy), "--json")
    assert (code, err) == (1, "")
    payload = json.loads(out)
    assert out == json.dumps(payload, indent=2, sort_keys=True) + "\n"
    assert sorted(payload) == ["ok", "problems"] and payload["ok"] is False and payload["problems"]


def test_every_command_is_registered_once_by_noun() -> None:
    names = [command.name for command in COMMANDS]
    assert len(names) == len(set(names)) and set(names) == set(main.commands)
    assert {"images", "sandbox", "world", "tasks", "run", "analytics", "audit", "schema"} <= set(names)


@pytest.mark.docker
def test_sandbox_sweep_prints_what_it_removed() -> None:
    run = f"test-cli-output-{uuid.uuid4().hex[:8]}"
    engine = docker.from_env()
    try:
        labels = {LABEL_SANDBOX: "1", LABEL_RUN: run}
        volumes = [engine.api.create_volume(name=f"ispm-planted-{run}-{i}", labels=labels)["Name"] for i in (1, 2)]
        assert invoke("sandbox", "sweep", "--run", run) == (
            0,
            "removed 0 containers, 2 volumes, 0 networks, 0 scratch folders\n",
            "",
        )
        volumes.append(engine.api.create_volume(name=f"ispm-planted-{run}-3", labels=labels)["Name"])
        assert invoke("sandbox", "sweep", "--run", run, "--json") == (
            0,
            json.dumps(
                {"containers": [], "directories": [], "failures": [], "networks": [], "volumes": [volumes[2]]},
                indent=2,
            )
            + "\n",
            "",
        )
    finally:
        engine.close()
