"""The HiBob tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "hibob_people",
        "Every person HR has ever employed or contracted, one row each, as the HiBob people "
        "export presents them. Leavers stay in the table with status `terminated`.",
        (
            col("id", "HiBob employee id (numeric string). Unique per person and never reused.", required=True),
            col("display_name", "Full name as shown in HiBob, `First Last`.", required=True),
            col("first_name", "Given name.", required=True),
            col("surname", "Family name.", required=True),
            col(
                "email",
                "Current work email. Always lower case, on the current company domain.",
                required=True,
            ),
            col("personal_email", "Private email the person gave HR, if any. Not a company account."),
            col("department", "Department name, e.g. `Engineering`, `Sales`, `IT`, `Security`.", required=True),
            col("title", "Job title.", required=True),
            col("site", "Work location, e.g. `San Francisco`, `London`, `Remote - US`.", required=True),
            col("manager_id", "HiBob `id` of the direct manager; NULL for the CEO."),
            col("employment_type", "`Permanent`, `Contractor` or `Intern`.", required=True),
            col(
                "legal_entity",
                "Employing entity: `Corvid Systems Inc.`, `Corvid Systems Ltd.` (UK), "
                "`Corvid Systems GmbH` or `Lumen Analytics Ltd.` (staff who joined through the "
                "2023-03-01 acquisition of Lumen Analytics).",
                required=True,
            ),
            col("status", "`active`, `leave` (on leave, still employed) or `terminated`.", required=True),
            col("start_date", "First working day (ISO date).", required=True),
            col("termination_date", "Last working day (ISO date) for `terminated` people; NULL otherwise."),
            col(
                "contract_end_date",
                "Contract end (ISO date) for contractors and interns; NULL for permanent "
                "staff. HR does not always update `status` when a contract lapses.",
            ),
        ),
        primary_key=("id",),
        foreign_keys=(fk("manager_id", "hibob_people", "id"),),
    ),
)


class HibobPersonRow(NamedTuple):
    """A row of ``hibob_people``."""

    id: str
    display_name: str
    first_name: str
    surname: str
    email: str
    personal_email: str | None
    department: str
    title: str
    site: str
    manager_id: str | None
    employment_type: str
    legal_entity: str
    status: str
    start_date: str
    termination_date: str | None
    contract_end_date: str | None
