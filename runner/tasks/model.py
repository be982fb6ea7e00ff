"""Typed task definitions, exactly as the YAML files under ``tasks/v1/`` spell them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Vendor = Literal["hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas"]
VENDORS: tuple[str, ...] = ("hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas")
Category = Literal[
    "inventory",
    "offboarding",
    "mfa_authentication",
    "privileged_access",
    "external_access",
    "credential_hygiene",
    "network_exposure",
    "separation_of_duties",
    "orphaned_service_accounts",
    "group_nesting_escalation",
]
CATEGORIES: tuple[str, ...] = Category.__args__  # type: ignore[attr-defined]
Kind = Literal["verdict", "enumeration"]
Difficulty = Literal["easy", "medium", "hard", "expert"]
EntityType = Literal["person", "account", "group", "role", "resource", "policy", "credential", "configuration"]
TrapFamily = Literal[
    "nesting",
    "alias",
    "lumen_login",
    "suspended_vs_deprovisioned",
    "revoked_grant",
    "pim_eligible",
]
TRAP_FAMILIES: dict[str, str] = {
    "nesting": "Group membership is transitive: a role, grant or exclusion given to a group reaches the members of "
    "every group nested inside it, at any depth (Azure AD groups, Workspace groups, GitHub child teams). "
    "Ignoring it reads direct members only.",
    "alias": "People appear under old lumenanalytics.com addresses that Workspace keeps as aliases of their "
    "corvid.io account; the alias resolves the address to its owner. Ignoring it matches corvid.io addresses only.",
    "lumen_login": "Lumen Analytics staff may sign in with first initial + surname @lumenanalytics.com even where "
    "no alias survives (a deleted Workspace user takes its aliases with it). Ignoring it leaves those logins "
    "unresolved, or resolves them through aliases only.",
    "suspended_vs_deprovisioned": "A suspended account cannot sign in although it is not deprovisioned or "
    "deleted. Ignoring it treats only deprovisioned (or deleted) accounts as unable to sign in.",
    "revoked_grant": "An Okta admin role assignment whose status is INACTIVE (revoked) grants nothing. Ignoring "
    "it counts revoked assignments as held.",
    "pim_eligible": "An Azure AD role assignment that is only PIM-eligible is not in force until activated. "
    "Ignoring it counts eligible assignments as held.",
}


class EntityColumn(BaseModel):
    """One output column of the witness query that identifies a finding."""

    model_config = ConfigDict(extra="forbid")

    column: str = Field(description="Output column of the witness query holding the identifier.")
    vendor: Vendor = Field(description="Vendor whose identifier this is.")
    type: EntityType = Field(description="What kind of thing the identifier names.")
    label: str | None = Field(default=None, description="Output column holding a human label, if any.")


class SqlEdit(BaseModel):
    """One textual edit of the witness SQL: every occurrence of ``old`` becomes ``new``."""

    model_config = ConfigDict(extra="forbid")

    old: str = Field(min_length=1, description="Text of the witness SQL to replace; it must occur at least once.")
    new: str = Field(description="What replaces it (may be empty).")


class Trap(BaseModel):
    """A trap the task sets, and the naive variant of its witness that falls into it."""

    model_config = ConfigDict(extra="forbid")

    family: TrapFamily = Field(description="Which trap family (see ``TRAP_FAMILIES``).")
    why: str = Field(min_length=10, description="How ignoring the trap goes wrong in this task.")
    naive: list[SqlEdit] = Field(
        min_length=1, description="Edits that turn the witness SQL into the naive variant that ignores the trap."
    )

    def naive_sql(self, witness_sql: str) -> str:
        """The witness with every edit applied in order. Raises ``ValueError`` if an edit's text does not occur."""
        sql = witness_sql
        for edit in self.naive:
            if edit.old not in sql:
                raise ValueError(f"{self.family}: naive edit text does not occur in the witness: {edit.old!r}")
            sql = sql.replace(edit.old, edit.new)
        return sql


class TaskChange(BaseModel):
    """One change to a published task's answer or definition, newest last."""

    model_config = ConfigDict(extra="forbid")

    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="When the change was made (UTC date).")
    issue: int | None = Field(default=None, description="The project issue that asked for it, if any.")
    change: str = Field(min_length=10, description="What changed and why, and how the new answer was checked.")


class Task(BaseModel):
    """One investigation. Everything below ``prompt`` is host-only."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^ispm-\d{3}$")
    title: str = Field(min_length=5)
    kind: Kind
    category: Category
    vendors: list[Vendor] = Field(min_length=1)
    hops: int = Field(
        ge=1,
        le=3,
        description="1: one system; 2: one cross-system identity resolution; 3: a chain of two or more.",
    )
    difficulty: Difficulty
    prompt: str = Field(min_length=40)
    yes_when: Literal["rows", "no_rows"] | None = Field(
        default=None,
        description="Verdict tasks only: the answer is 'yes' when the witness returns rows, or when it returns none.",
    )
    witness_sql: str
    dual_sql: str = Field(description="An independent formulation that must return the same entities.")
    entity_columns: list[EntityColumn] = Field(min_length=1)
    traps: list[Trap] = Field(
        default_factory=list,
        description="The traps the task sets; each naive variant must give a different answer from the truth.",
    )
    history: list[TaskChange] = Field(default_factory=list, description="Changes since the task was first written.")

    @field_validator("vendors")
    @classmethod
    def _no_duplicate_vendors(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("vendors lists a vendor twice")
        return v

    @field_validator("traps")
    @classmethod
    def _one_trap_per_family(cls, v: list[Trap]) -> list[Trap]:
        families = [t.family for t in v]
        if len(set(families)) != len(families):
            raise ValueError("traps lists a family twice")
        return v

    @property
    def trap_families(self) -> list[str]:
        """The families of the task's traps, in the order the task lists them."""
        return [t.family for t in self.traps]

    def model_post_init(self, _context: object) -> None:
        if self.kind == "verdict" and self.yes_when is None:
            raise ValueError("verdict tasks need yes_when: rows | no_rows")
        if self.kind == "enumeration" and self.yes_when is not None:
            raise ValueError("enumeration tasks must not set yes_when")
        for trap in self.traps:
            trap.naive_sql(self.witness_sql)


class AgentTaskFile(BaseModel):
    """``/task/task.json``: what the agent may know about a task besides its prompt. No ground truth."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    kind: Kind
    answer_format: Literal["ispm.answer/v1"] = "ispm.answer/v1"
    time_limit_seconds: int = 900
    world: str = "/world/ispm-crossvendor-v1.sqlite"
    docs: str = "/docs"
