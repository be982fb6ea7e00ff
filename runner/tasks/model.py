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


class EntityColumn(BaseModel):
    """One output column of the witness query that identifies a finding."""

    model_config = ConfigDict(extra="forbid")

    column: str = Field(description="Output column of the witness query holding the identifier.")
    vendor: Vendor = Field(description="Vendor whose identifier this is.")
    type: EntityType = Field(description="What kind of thing the identifier names.")
    label: str | None = Field(default=None, description="Output column holding a human label, if any.")


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

    @field_validator("vendors")
    @classmethod
    def _no_duplicate_vendors(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("vendors lists a vendor twice")
        return v

    def model_post_init(self, _context: object) -> None:
        if self.kind == "verdict" and self.yes_when is None:
            raise ValueError("verdict tasks need yes_when: rows | no_rows")
        if self.kind == "enumeration" and self.yes_when is not None:
            raise ValueError("enumeration tasks must not set yes_when")


class AgentTaskFile(BaseModel):
    """``/task/task.json``: what the agent may know about a task besides its prompt. No ground truth."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    kind: Kind
    answer_format: Literal["ispm.answer/v1"] = "ispm.answer/v1"
    time_limit_seconds: int = 900
    world: str = "/world/ispm-crossvendor-v1.sqlite"
    docs: str = "/docs"
