"""The timeline's parts, without Docker: requests read as conversations in each wire API, what a call added, time
order, a changed transcript, and the bounds on what is analysed and shown."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from trace_runs import BAD_SQL, KEY, SQL, at, calls, write_run

from runner.call import CallApi, OtherBlock, ReasoningBlock, TextBlock, ToolCallBlock
from runner.trace.conversation import Message, ToolResultBlock, new_messages, read_request
from runner.trace.reader import load_transcript
from runner.trace.sql_text import MAX_FORMAT_CHARS, SqlLayout, format_sql, sql_of_call
from runner.trace.text import cut, inert
from runner.trace.timeline import AgentStep, CallStep, QueryStep, call_steps, in_time_order, read_timeline

MESSAGES = {
    "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "Bash", "input_schema": {}}],
    "messages": [
        {"role": "user", "content": "count them"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "use SQL", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ispm-sql 'SELECT 1'"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": [{"type": "text", "text": "boom"}, {"type": "image"}]}]},
    ],
}  # fmt: skip
CHAT = {
    "tools": [{"type": "function", "function": {"name": "run_sql"}}],
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "count them"}]},
        {"role": "assistant", "content": None, "reasoning_content": "use SQL",
         "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "run_sql", "arguments": "{\"sql\": \"SELECT 1\"}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "boom"},
    ],
}  # fmt: skip
RESPONSES = {
    "instructions": "be brief",
    "tools": [{"type": "function", "name": "run_sql"}],
    "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "count them"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "use SQL"}]},
        {"type": "function_call", "call_id": "t1", "name": "run_sql", "arguments": "{\"sql\": \"SELECT 1\"}"},
        {"type": "function_call_output", "call_id": "t1", "output": "boom"},
    ],
}  # fmt: skip


def _shape(messages: list[Message]) -> list[tuple[str, list[str]]]:
    return [(m.role, [p.type for p in m.parts]) for m in messages]


@pytest.mark.parametrize(
    ("api", "body", "tool_role", "tools"),
    [("messages", MESSAGES, "user", ["Bash"]), ("chat", CHAT, "tool", ["run_sql"]),
     ("responses", RESPONSES, "tool", ["run_sql"])],
)  # fmt: skip
def test_each_wire_api_reads_as_the_same_conversation(
    api: CallApi, body: dict[str, Any], tool_role: str, tools: list[str]
) -> None:
    request = read_request(api, body)
    assert request.system == "be brief" and request.tools == tools
    assert _shape(request.messages) == [
        ("user", ["text"]),
        ("assistant", ["reasoning", "tool_call"]),
        (tool_role, ["tool_result"]),
    ]
    thought, call = request.messages[1].parts
    assert isinstance(thought, ReasoningBlock) and thought.text == "use SQL"
    assert isinstance(call, ToolCallBlock) and call.id == "t1"
    result = request.messages[2].parts[0]
    assert isinstance(result, ToolResultBlock) and result.call_id == "t1" and result.text.startswith("boom")


def test_a_body_of_an_unknown_shape_reads_without_failing() -> None:
    request = read_request("messages", {"system": 7, "messages": [3, {"role": "user", "content": [{"type": "doc"}]}]})
    assert request.system == "7"
    assert [type(p) for m in request.messages for p in m.parts] == [OtherBlock, OtherBlock]
    assert read_request("chat", "not a body").messages == []


def test_a_call_shows_only_what_it_added_and_flags_a_rewritten_history() -> None:
    first = read_request("messages", {"messages": MESSAGES["messages"][:1]}).messages
    reply = Message(role="assistant", parts=[TextBlock(text="ok")])
    second = read_request("messages", MESSAGES).messages
    assert new_messages(None, None, first) == (first, False)
    assert new_messages(first, reply, second) == (second[2:], False)
    assert new_messages(second, reply, first) == (first, True)


def test_steps_without_a_time_keep_their_place_in_their_own_source() -> None:
    def query(second: float | None) -> QueryStep:
        when = at(second) if second is not None else None
        return QueryStep(at=when, sql=str(second), row_count=0, truncated=False, duration_ms=None, error=None)

    untimed = AgentStep(at=None, entry={"n": 1})
    timed = AgentStep(at=at(1.5), entry={"n": 2})
    ordered = in_time_order([query(2), untimed, query(None), query(1), timed], start=at(0), end=at(9))
    labels = [s.sql if isinstance(s, QueryStep) else s.entry["n"] for s in ordered]  # type: ignore[union-attr]
    # The untimed query follows the one before it in the log (2.0); the untimed agent entry waits for the answer.
    assert labels == ["1", 2, "2", "None", 1]


def test_a_changed_transcript_is_noted_and_the_rest_of_the_timeline_stays(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    stored = sorted((run / "transcripts").iterdir())[0]  # the candidate part
    data = bytearray(stored.read_bytes())
    data[-5] ^= 1
    stored.write_bytes(bytes(data))
    timeline = read_timeline(run, KEY.task_id, KEY.epoch)
    assert timeline.transcript == "unreadable"
    assert timeline.notes[0].startswith(f"transcript unreadable: sample {KEY.label()}: transcripts/")
    assert "changed" in timeline.notes[0]
    # The gateway's figures stand in for the calls; the SQL, the answer and the votes are all there.
    calls = [e for e in timeline.events if isinstance(e, CallStep)]
    assert [c.content for c in calls] == ["none", "none"]
    assert [e.sql for e in timeline.events if isinstance(e, QueryStep)] == [SQL, BAD_SQL]
    assert [e.kind for e in timeline.events][-5:] == ["answer", "vote", "vote", "vote", "vote"]


def test_a_missing_transcript_file_is_noted_too(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    shutil.rmtree(run / "transcripts")
    timeline = read_timeline(run, KEY.task_id)
    assert timeline.transcript == "unreadable" and "cannot read" in timeline.notes[0]


@pytest.mark.parametrize(
    ("arguments", "sql"),
    [
        ({"sql": "SELECT 1"}, "SELECT 1"),
        ({"query": "SELECT 2"}, "SELECT 2"),
        ({"command": 'ispm-sql --json "SELECT 3 AS x"'}, "SELECT 3 AS x"),
        ({"command": "cd /tmp && /usr/local/bin/ispm-sql 'SELECT 4'"}, "SELECT 4"),
        ({"command": "ispm-sql 'SELECT unbalanced"}, None),
        ({"command": "ls /docs"}, None),
        ({"command": "ispm-sql " + "x" * 100_001}, None),
        ("not an object", None),
    ],
)
def test_the_sql_of_a_tool_call_is_found_in_its_arguments(arguments: Any, sql: str | None) -> None:
    assert sql_of_call(arguments) == sql


def test_sql_is_laid_out_within_its_bounds() -> None:
    assert format_sql("select a,b from t where x=1") == "select a,b\nfrom t\nwhere x=1"
    assert format_sql("SELEKT nonsense (") == "SELEKT nonsense ("
    too_long = "SELECT " + ", ".join(f"c{i}" for i in range(2000)) + " FROM t"
    assert len(too_long) > MAX_FORMAT_CHARS and format_sql(too_long) == too_long
    deep = "SELECT " + "(" * 1500 + "1" + ")" * 1500
    assert len(deep) < MAX_FORMAT_CHARS and format_sql(deep) == deep  # too deep to lay out: shown as written


def test_a_pages_sql_budget_once_spent_leaves_the_rest_as_written() -> None:
    layout = SqlLayout(budget_chars=40)
    assert layout("select a from t") == "select a\nfrom t"
    assert layout("select b from t where x = 1") == "select b from t where x = 1"  # 15 + 27 > 40
    assert layout("select c from t") == "select c from t" and layout.remaining == 0


def test_terminal_text_is_inert_and_cut() -> None:
    assert inert("a\x1b[2Jb\x07\tc\nd\x9b") == "a\\x1b[2Jb\\x07\tc\nd\\x9b"
    assert cut("x" * 410, 400) == "x" * 400 + "… (10 more characters)"


def test_a_history_read_back_from_the_store_reads_as_the_same_calls_as_one_sent_fresh(tmp_path: Path) -> None:
    # The store hands back a resent message as one shared object, which the reader reads once; copies must not differ.
    run = write_run(tmp_path / "run")
    stored = load_transcript(run, KEY).calls("candidate")
    assert stored[0].request.content["messages"][0] is stored[1].request.content["messages"][0]
    assert call_steps(stored) == call_steps(calls())


HOSTILE_SQL = [
    "select substr(b.member, 7), group_concat(x) from t b",  # a pretty printer would say SUBSTRING, GROUP_CONCAT
    "SeLeCt \"Weird Name\" , 'it''s  two  spaces' from t -- a comment\n where x = 1 /* and\n this */ or y",
    "with recursive r(i) as (select 1 union all select i + 1 from r) select count(*) from r",
    "select a from t left outer join u using (k) natural join v cross join w order by 1 desc limit 5 offset 2",
    "select 1;select 2 ;  select x'00ff', 1.5e3, -2, ?1, :name, @v, $x from t",
    "select (select max(a) from (select a from t where b in (select b from u))) as m",
    "select case when a>b then 'x' else \"y\" end, cast(a as text) collate nocase from t",
    "SELEKT nonsense (",
    "select 'unterminated",
    "select [bracketed name], `ticked` from t window w as (partition by a)",
]


@pytest.mark.parametrize("source", ["witness", "hostile"])
def test_laying_out_sql_never_changes_a_token(source: str) -> None:
    # Every witness of the task set and a few agent-shaped texts: the page may re-indent, never rewrite.
    from sqlglot.dialects.sqlite import SQLite
    from sqlglot.errors import SqlglotError

    from runner.paths import tasks_dir
    from runner.tasks.load import load_tasks

    texts = [t.witness_sql for t in load_tasks(tasks_dir())] if source == "witness" else HOSTILE_SQL
    changed = 0
    for sql in texts:
        laid_out = format_sql(sql)
        assert "".join(laid_out.split()) == "".join(sql.split()), sql  # only whitespace moved
        try:
            before = [(t.token_type, sql[t.start : t.end + 1]) for t in SQLite().tokenize(sql)]
        except SqlglotError:
            assert laid_out == sql
            continue
        after = [(t.token_type, laid_out[t.start : t.end + 1]) for t in SQLite().tokenize(laid_out)]
        assert after == before, sql
        changed += laid_out != sql
    assert changed >= len(texts) // 2  # it does lay out, not only hand texts back
    assert "substr(b.member, 7), group_concat(x)" in format_sql(HOSTILE_SQL[0])
