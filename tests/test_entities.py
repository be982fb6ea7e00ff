"""Entity checks and verdict parsing, table-driven from tests/fixtures/entities/*.yaml."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.contract import Answer, EvidenceItem
from runner.grading.entities import IdentityIndex, check_entities, check_verdict, normalise, parse_verdict
from runner.tasks.truth import Entity, TaskTruth

FIXTURES = Path(__file__).parent / "fixtures" / "entities"
CASES: dict[str, Any] = yaml.safe_load((FIXTURES / "cases.yaml").read_text(encoding="utf-8"))
VERDICTS: list[dict[str, Any]] = yaml.safe_load((FIXTURES / "verdicts.yaml").read_text(encoding="utf-8"))
INDEX = IdentityIndex(CASES["index"]["aliases"], [tuple(p) for p in CASES["index"]["people"]])


def _truth(rows: list[list[str]]) -> list[Entity]:
    return [Entity(vendor=r[0], type=r[1], identifier=r[2], label=r[3] if len(r) > 3 else None) for r in rows]


def _evidence(rows: list[list[str]]) -> list[EvidenceItem]:
    return [EvidenceItem.model_validate({"vendor": r[0], "kind": r[1], "identifier": r[2]}) for r in rows]


@pytest.mark.parametrize("case", CASES["cases"], ids=[c["name"] for c in CASES["cases"]])
def test_entity_case(case: dict[str, Any]) -> None:
    check = check_entities(_truth(case["truth"]), _evidence(case["evidence"]), INDEX)
    expect = case["expect"]
    assert check.precision == expect["precision"]
    assert check.recall == expect["recall"]
    assert [m.truth.identifier for m in check.matched] == expect["matched"]
    assert [e.identifier for e in check.missed] == expect["missed"]
    assert [e.identifier for e in check.extra] == expect["extra"]
    assert check.duplicates == expect.get("duplicates", 0)
    assert check.truth_count == len(case["truth"])
    assert check.evidence_count + check.duplicates == len(case["evidence"])


@pytest.mark.parametrize("case", VERDICTS, ids=[repr(c["response"])[:40] for c in VERDICTS])
def test_verdict_case(case: dict[str, Any]) -> None:
    answer = Answer(response=case["response"], verdict=case["field"])
    assert parse_verdict(answer) == (case["expect"], case["source"])


def test_no_answer_has_no_verdict() -> None:
    assert parse_verdict(None) == (None, None)


@pytest.mark.parametrize(
    ("kind", "truth_verdict", "answer_verdict", "correct"),
    [
        ("verdict", "yes", "yes", True),
        ("verdict", "yes", "no", False),
        ("verdict", "no", None, False),
        ("enumeration", None, "yes", None),
    ],
)
def test_check_verdict(kind: str, truth_verdict: str | None, answer_verdict: str | None, correct: bool | None) -> None:
    truth = TaskTruth.model_validate(
        {
            "task_id": "ispm-001",
            "kind": kind,
            "verdict": truth_verdict,
            "row_count": 0,
            "entities": [],
            "columns": [],
            "facts": [],
        }
    )
    check = check_verdict(Answer(response="", verdict=answer_verdict), truth)  # type: ignore[arg-type]
    assert check.correct is correct
    assert check.expected == truth_verdict


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        ("user:Ann@Corp.example", ("user", "ann@corp.example")),
        ("deleted:serviceAccount:x@y.iam", ("deleted:serviceaccount", "x@y.iam")),
        ("arn:aws:iam::1:role/x", (None, "arn:aws:iam::1:role/x")),
        ("  'Quoted'  ", (None, "quoted")),
    ],
)
def test_normalise(identifier: str, expected: tuple[str | None, str]) -> None:
    assert normalise(identifier) == expected


def test_the_world_index_knows_aliases_and_people(world_db: sqlite3.Connection) -> None:
    index = IdentityIndex.from_connection(world_db)
    alias, primary = world_db.execute(
        "SELECT a.alias, u.primary_email FROM gws_user_aliases AS a JOIN gws_users AS u ON u.id = a.user_id "
        "WHERE a.alias LIKE '%@lumenanalytics.com' ORDER BY a.alias LIMIT 1"
    ).fetchone()
    assert index.canonical_email(alias.upper()) == primary.lower()
    pid, name, email = world_db.execute(
        "SELECT id, display_name, email FROM hibob_people WHERE lower(email) = ?", (primary.lower(),)
    ).fetchone()
    assert index.persons(alias.lower(), allow_id=False) == {pid}
    assert pid in index.persons(name.lower(), allow_id=False)
    assert index.persons(pid, allow_id=True) >= {pid}
    assert index.persons(pid, allow_id=False) == set()
    # The person is found from an old-domain login cited from Okta.
    truth = [Entity(vendor="hibob", type="person", identifier=pid, label=name)]
    evidence = [EvidenceItem(vendor="okta", kind="account", identifier=alias)]
    assert check_entities(truth, evidence, index).recall == 1.0
    assert email.lower() == primary.lower()
