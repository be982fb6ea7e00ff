"""The GCP tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "gcp_projects",
        "Google Cloud projects in the organization.",
        (
            col("project_id", "Project id, e.g. `corvid-prod-api`.", required=True),
            col("project_number", "Project number.", required=True),
            col("name", "Display name.", required=True),
            col("parent", "`organizations/<id>` or `folders/<id>`.", required=True),
            col(
                "folder_name",
                "Display name of the parent folder (`prod`, `nonprod`, `sandbox`, `legacy`); "
                "NULL when the parent is the organization.",
            ),
            col("lifecycle_state", "`ACTIVE` or `DELETE_REQUESTED`.", required=True),
            col("create_time", "Creation time (UTC).", required=True),
        ),
        primary_key=("project_id",),
    ),
    Table(
        "gcp_iam_bindings",
        "IAM policy bindings, one row per (resource, role, member). Members are strings: `user:<email>`, "
        "`group:<email>` (a Workspace group; its transitive members hold the role), `serviceAccount:<email>`, "
        "`domain:<domain>` (everyone with an account on that domain), `allUsers` (anyone on the internet) "
        "or `allAuthenticatedUsers` (anyone with any Google account).",
        (
            col(
                "resource",
                "`organizations/<id>`, `folders/<id>` or `projects/<project_id>`. Bindings are inherited downward.",
                required=True,
            ),
            col(
                "role",
                "Role, e.g. `roles/owner`, `roles/editor`, `roles/viewer`, `roles/resourcemanager.organizationAdmin`.",
                required=True,
            ),
            col("member", "Member string, as described above.", required=True),
            col(
                "condition_title",
                "Title of the IAM condition, if the binding is conditional; NULL otherwise.",
            ),
        ),
        primary_key=("resource", "role", "member"),
    ),
    Table(
        "gcp_service_accounts",
        "Service accounts per project.",
        (
            col("email", "Service account email, `<name>@<project>.iam.gserviceaccount.com`.", required=True),
            col("project_id", "`gcp_projects.project_id`.", required=True),
            col("unique_id", "Numeric unique id.", required=True),
            col("display_name", "Display name."),
            col("description", "Free text. Teams record an owner here by convention as `owner: <email>`."),
            col("disabled", "1 if disabled.", "INTEGER", required=True),
        ),
        primary_key=("email",),
        foreign_keys=(fk("project_id", "gcp_projects", "project_id"),),
    ),
    Table(
        "gcp_service_account_keys",
        "Keys of service accounts. `USER_MANAGED` keys are downloadable secrets that never expire unless "
        "deleted; `SYSTEM_MANAGED` keys are rotated by Google.",
        (
            col("key_id", "Key id (40 hex chars).", required=True),
            col("service_account_email", "`gcp_service_accounts.email`.", required=True),
            col("key_type", "`USER_MANAGED` or `SYSTEM_MANAGED`.", required=True),
            col("key_algorithm", "`KEY_ALG_RSA_2048` or `KEY_ALG_RSA_1024`.", required=True),
            col(
                "valid_after_time",
                "Created / valid from (UTC). Key age is measured from here.",
                required=True,
            ),
            col(
                "valid_before_time",
                "Expiry (UTC); `9999-12-31T23:59:59Z` for keys that never expire.",
                required=True,
            ),
            col("disabled", "1 if the key is disabled.", "INTEGER", required=True),
        ),
        primary_key=("key_id",),
        foreign_keys=(fk("service_account_email", "gcp_service_accounts", "email"),),
    ),
)


class GcpProjectRow(NamedTuple):
    """A row of ``gcp_projects``."""

    project_id: str
    project_number: str
    name: str
    parent: str
    folder_name: str | None
    lifecycle_state: str
    create_time: str


class GcpIamBindingRow(NamedTuple):
    """A row of ``gcp_iam_bindings``."""

    resource: str
    role: str
    member: str
    condition_title: str | None


class GcpServiceAccountRow(NamedTuple):
    """A row of ``gcp_service_accounts``."""

    email: str
    project_id: str
    unique_id: str
    display_name: str | None
    description: str | None
    disabled: int


class GcpServiceAccountKeyRow(NamedTuple):
    """A row of ``gcp_service_account_keys``."""

    key_id: str
    service_account_email: str
    key_type: str
    key_algorithm: str
    valid_after_time: str
    valid_before_time: str
    disabled: int
