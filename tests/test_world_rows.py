"""Typed rows: each table's row type matches its declaration, and generation refuses rows that do not."""

from __future__ import annotations

import pytest

from runner.world.generate import all_tables, generate
from runner.world.schema import Table, col
from runner.world.tables import ROW_TYPES, checked, declaration_problems, rows_of
from runner.world.tables.okta import OktaAdminRoleAssignmentRow, OktaGroupRow, OktaUserRow


def test_every_table_has_a_row_type_that_matches_its_declaration() -> None:
    tables = all_tables()
    assert sorted(ROW_TYPES) == sorted(t.name for t in tables)
    assert [p for t in tables for p in declaration_problems(t)] == []


def test_a_declaration_that_drifts_from_its_row_type_is_named() -> None:
    okta_groups = next(t for t in all_tables() if t.name == "okta_groups")
    renamed = Table("okta_groups", "", (*okta_groups.columns[:-1], col("created_at", "")))
    assert declaration_problems(renamed) == [
        "okta_groups: row type OktaGroupRow has fields ('id', 'name', 'description', 'type', 'created'), "
        "the table ('id', 'name', 'description', 'type', 'created_at')"
    ]
    made_required = Table("okta_groups", "", (*okta_groups.columns[:-1], col("created", "", required=True)))
    assert declaration_problems(made_required) == ["okta_groups.created: row type says str | None, the column str"]
    assert declaration_problems(Table("okta_widgets", "", ())) == ["okta_widgets: no row type"]


def _okta_groups() -> Table:
    return next(t for t in all_tables() if t.name == "okta_groups")


def test_checked_refuses_a_positional_tuple() -> None:
    row = ("00g1", "Everyone", None, "BUILT_IN", None)
    with pytest.raises(RuntimeError) as caught:
        checked(_okta_groups(), [row])
    assert str(caught.value) == f"okta_groups: row is a tuple, not a OktaGroupRow: {row!r}"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            OktaGroupRow._make(("00g1", "Everyone", None, "BUILT_IN", 7)),
            "okta_groups.created: 7 does not fit TEXT",
        ),
        (
            OktaGroupRow._make(("00g1", None, None, "BUILT_IN", None)),
            "okta_groups.name: None does not fit TEXT",
        ),
    ],
)
def test_checked_refuses_a_value_that_does_not_fit_its_column(row: OktaGroupRow, message: str) -> None:
    with pytest.raises(RuntimeError) as caught:
        checked(_okta_groups(), [row])
    assert str(caught.value) == f"{message}: {row!r}"


def test_checked_keeps_good_rows_in_order() -> None:
    rows = [OktaGroupRow("00g2", "b", None, "OKTA_GROUP", None), OktaGroupRow("00g1", "a", "d", "BUILT_IN", "t")]
    assert checked(_okta_groups(), rows) == rows


def test_every_generated_row_is_of_its_table_type() -> None:
    rows = generate()
    for name, row_type in ROW_TYPES.items():
        assert all(type(r) is row_type for r in rows[name]), name
    # The planted patches are made by name: the dormant Okta super admin's last sign-in.
    dormant = [u for u in rows_of(rows, OktaUserRow) if u.last_login == "2025-10-17T08:12:00Z"]
    assert len(dormant) == 1
    grants = [
        r for r in rows_of(rows, OktaAdminRoleAssignmentRow) if r.assignee_id == dormant[0].id and r.status == "ACTIVE"
    ]
    assert [(g.role_type, g.created) for g in grants] == [("SUPER_ADMIN", "2020-03-02T10:00:00Z")]


def test_rows_of_refuses_rows_that_were_never_checked() -> None:
    with pytest.raises(RuntimeError) as caught:
        rows_of({"okta_groups": [("00g1", "Everyone", None, "BUILT_IN", None)]}, OktaGroupRow)
    assert str(caught.value) == "okta_groups: 1 row(s) are not OktaGroupRow"
