"""The v1 consensus: vote-file fixtures, malformed lines, and property tests of the rules."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import GradingError
from runner.grading.consensus import (
    ConsensusError,
    consensus,
    consensus_from_jsonl,
    epoch_consensus,
    parse_votes,
    read_votes,
    task_consensus,
)
from runner.grading.grades import ABSTAIN, DIMENSIONS, GRADES, SCALE, Grade, Vote, rank, score

FIXTURES = Path(__file__).parent / "fixtures" / "consensus"
VOTE_FILES = sorted(FIXTURES.glob("*.votes.jsonl"))


# ---------------------------------------------------------------- fixtures


def test_there_are_vote_fixtures() -> None:
    assert len(VOTE_FILES) >= 4


@pytest.mark.parametrize("votes_file", VOTE_FILES, ids=[p.name.split(".")[0] for p in VOTE_FILES])
def test_consensus_fixture(votes_file: Path) -> None:
    expected_file = votes_file.with_name(votes_file.name.replace(".votes.", ".expected."))
    expected = [json.loads(line) for line in expected_file.read_text().splitlines() if line.strip()]
    # Compare the JSON lines that `ispm consensus --json` prints, field order included.
    got = [json.loads(c.model_dump_json()) for c in consensus_from_jsonl(votes_file)]
    assert got == expected
    assert all(list(obj) == ["task_id", "dimension", "grade", "epochs"] for obj in got)


def test_output_follows_the_contract_order_of_dimensions() -> None:
    got = consensus_from_jsonl(FIXTURES / "official_run_shuffled.votes.jsonl")
    keys = [(c.task_id, DIMENSIONS.index(c.dimension)) for c in got]
    assert keys == sorted(keys)
    # evidence_completeness precedes contextual_evidence_relevancy in the contract, not the alphabet
    assert [c.dimension for c in got if c.task_id == "t010"] == [
        "evidence_completeness",
        "contextual_evidence_relevancy",
    ]


# ---------------------------------------------------------------- malformed input


def _line(**fields: object) -> str:
    vote: dict[str, object] = {
        "task_id": "t1",
        "epoch": 1,
        "judge": "a",
        "dimension": "answer_correctness",
        "grade": "correct",
    }
    vote.update(fields)
    return json.dumps({k: v for k, v in vote.items() if v is not None})


GOOD = _line()

MALFORMED = [
    ("bad_json", [GOOD, '{"task_id": "t1", "epoch": 1,'], 2, "not a valid JSON vote"),
    ("unknown_grade", [GOOD, _line(epoch=2, grade="great")], 2, "grade: Input should be"),
    ("grade_wrong_case", [_line(grade="Correct")], 1, "got 'Correct'"),
    ("numeric_grade", [_line(grade=1.0)], 1, "grade:"),
    ("missing_grade", [GOOD, _line(epoch=2), _line(epoch=3, grade=None)], 3, "grade: Field required"),
    ("missing_judge", [_line(judge=None)], 1, "judge: Field required"),
    ("empty_task_id", [_line(task_id="")], 1, "task_id:"),
    ("unknown_dimension", [_line(dimension="fluency")], 1, "dimension:"),
    ("epoch_zero", [_line(epoch=0)], 1, "epoch:"),
    ("epoch_as_string", [_line(epoch="1")], 1, "epoch:"),
    ("epoch_as_float", [_line(epoch=1.0)], 1, "epoch:"),
    ("epoch_as_bool", [_line(epoch=True)], 1, "epoch:"),
    ("array_not_object", [GOOD, "[1, 2]"], 2, "expected a JSON object, got list"),
    ("repeated_key", ['{"task_id": "t1", "epoch": 1, "judge": "a", "dimension": "answer_correctness", '
                      '"grade": "correct", "grade": "incorrect"}'], 1, "key 'grade' appears twice"),
    ("blank_lines_still_count", ["", GOOD, "   ", "nope"], 4, "not a valid JSON vote"),
]  # fmt: skip


@pytest.mark.parametrize(("lines", "line", "message"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_line_is_rejected_with_its_number(lines: list[str], line: int, message: str) -> None:
    with pytest.raises(ConsensusError) as info:
        parse_votes(lines, source="VOTES.jsonl")
    assert info.value.lines == (line,)
    assert str(info.value).startswith(f"VOTES.jsonl, line {line}: ")
    assert message in str(info.value)
    assert isinstance(info.value, GradingError)


def test_duplicate_vote_names_both_lines() -> None:
    lines = [GOOD, _line(judge="b"), _line(judge="b", epoch=2), _line(judge="b", grade="incorrect")]
    with pytest.raises(ConsensusError, match=r"line 4: duplicate vote .* the first is on line 2") as info:
        parse_votes(lines)
    assert info.value.lines == (4, 2)


def test_duplicate_vote_is_rejected_by_consensus_too() -> None:
    vote = Vote(task_id="t1", epoch=1, judge="a", dimension="answer_correctness", grade="correct")
    with pytest.raises(ConsensusError, match="duplicate vote"):
        consensus([vote, vote.model_copy(update={"grade": "partial"})])


def test_read_votes_from_file(tmp_path: Path) -> None:
    path = tmp_path / "VOTES.jsonl"
    path.write_text(GOOD + "\r\n" + _line(judge="b", grade="abstain") + "\n")
    assert [v.grade for v in read_votes(path)] == ["correct", "abstain"]
    path.write_bytes(GOOD.encode() + b"\n" + b'{"task_id": "t\xe9"}\n')
    with pytest.raises(ConsensusError, match=r"line 2: not UTF-8") as info:
        read_votes(path)
    assert info.value.path == str(path)
    with pytest.raises(ConsensusError, match="cannot read the vote file"):
        read_votes(tmp_path / "missing.jsonl")


def test_empty_vote_file_has_no_consensus(tmp_path: Path) -> None:
    path = tmp_path / "VOTES.jsonl"
    path.write_text("\n")
    assert consensus_from_jsonl(path) == []


# ---------------------------------------------------------------- the scale


def test_scale_order_and_scores() -> None:
    assert [score(g) for g in SCALE] == [0.0, 0.5, 1.0]
    assert rank("incorrect") < rank("partial") < rank("correct")
    assert score(ABSTAIN) is None
    with pytest.raises(ValueError, match="abstain"):
        rank(ABSTAIN)


@pytest.mark.parametrize(
    ("grades", "expected"),
    [
        ([], "abstain"),
        (["abstain", "abstain"], "abstain"),
        (["correct", "abstain"], "correct"),
        (["abstain", "partial", "correct"], "partial"),
        (["correct", "incorrect"], "incorrect"),
    ],
)
def test_epoch_consensus_table(grades: list[Grade], expected: Grade) -> None:
    assert epoch_consensus(grades) == expected


@pytest.mark.parametrize(
    ("grades", "expected"),
    [
        ([], "abstain"),
        (["abstain"] * 5, "abstain"),
        (["correct", "abstain", "abstain", "abstain", "abstain"], "correct"),
        (["correct", "correct", "partial", "correct", "incorrect"], "correct"),
        (["correct", "partial", "partial", "correct", "abstain"], "partial"),
        (["correct", "partial", "incorrect"], "incorrect"),
        (["abstain", "abstain", "correct", "incorrect", "abstain"], "incorrect"),
    ],
)
def test_task_consensus_table(grades: list[Grade], expected: Grade) -> None:
    assert task_consensus(grades) == expected


# ---------------------------------------------------------------- properties

grade_st = st.sampled_from(GRADES)
real_grade_st = st.sampled_from(SCALE)

votes_st = st.dictionaries(
    keys=st.tuples(
        st.sampled_from(["t1", "t2"]),
        st.integers(min_value=1, max_value=5),
        st.sampled_from(["a", "b", "ref"]),
        st.sampled_from(DIMENSIONS[:2]),
    ),
    values=grade_st,
    max_size=40,
).map(lambda d: [Vote(task_id=t, epoch=e, judge=j, dimension=dim, grade=g) for (t, e, j, dim), g in sorted(d.items())])


@given(votes_st.flatmap(lambda vs: st.tuples(st.just(vs), st.permutations(vs))))
def test_result_does_not_depend_on_vote_order(pair: tuple[list[Vote], list[Vote]]) -> None:
    votes, shuffled = pair
    assert consensus(shuffled) == consensus(votes)


@given(votes_st)
def test_consensus_never_exceeds_the_highest_vote_and_abstain_never_wins(votes: list[Vote]) -> None:
    results = consensus(votes)
    assert {(c.task_id, c.dimension) for c in results} == {(v.task_id, v.dimension) for v in votes}
    for c in results:
        mine = [v for v in votes if (v.task_id, v.dimension) == (c.task_id, c.dimension)]
        real = [v.grade for v in mine if v.grade != ABSTAIN]
        assert set(c.epochs) == {v.epoch for v in mine}
        if not real:
            assert c.grade == ABSTAIN
            continue
        assert c.grade != ABSTAIN
        assert rank(c.grade) <= max(rank(g) for g in real)
        for epoch, grade in c.epochs.items():
            judged = [v.grade for v in mine if v.epoch == epoch and v.grade != ABSTAIN]
            if judged:
                # the epoch's grade is one of its judges' grades, and the lowest of them
                assert grade in judged
                assert all(rank(grade) <= rank(g) for g in judged)
            else:
                assert grade == ABSTAIN


@given(st.lists(grade_st, max_size=9))
def test_task_consensus_is_a_mode_and_ties_go_down(grades: list[Grade]) -> None:
    result = task_consensus(grades)
    counts = Counter(g for g in grades if g != ABSTAIN)
    if not counts:
        assert result == ABSTAIN
        return
    top = max(counts.values())
    assert counts[result] == top
    assert all(rank(result) < rank(g) for g, n in counts.items() if n == top and g != result)


@given(
    st.lists(real_grade_st, min_size=2, max_size=3, unique=True),
    st.integers(min_value=1, max_value=3),
    st.integers(min_value=0, max_value=4),
    st.randoms(use_true_random=False),
)
def test_an_exact_tie_resolves_to_the_lowest_tied_grade(
    tied: list[Grade], n: int, abstains: int, rng: random.Random
) -> None:
    grades: list[Grade] = [g for g in tied for _ in range(n)] + [ABSTAIN] * abstains
    rng.shuffle(grades)
    assert task_consensus(grades) == min(tied, key=rank)


@given(st.lists(real_grade_st, min_size=1, max_size=4), st.integers(min_value=0, max_value=4))
def test_abstentions_never_win_an_epoch(grades: list[Grade], abstains: int) -> None:
    result = epoch_consensus([*grades, *[ABSTAIN] * abstains])
    assert result == min(grades, key=rank)
