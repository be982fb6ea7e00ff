"""The Google Workspace tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "gws_users",
        "Workspace users (Directory API `users.list`). Deleted users are gone; suspended ones remain.",
        (
            col("id", "Immutable Google user id (numeric string).", required=True),
            col("primary_email", "Primary email, the sign-in name.", required=True),
            col("full_name", "Full name.", required=True),
            col(
                "org_unit_path",
                "Organizational unit, e.g. `/Employees/Engineering`, `/Contractors`, `/Service Accounts`.",
                required=True,
            ),
            col("is_admin", "1 if the user is a super administrator.", "INTEGER", required=True),
            col(
                "is_delegated_admin",
                "1 if the user holds any delegated (non-super) admin role.",
                "INTEGER",
                required=True,
            ),
            col(
                "is_enrolled_in_2sv",
                "1 if the user has enrolled in 2-Step Verification.",
                "INTEGER",
                required=True,
            ),
            col(
                "is_enforced_in_2sv",
                "1 if 2-Step Verification is enforced for the user's org unit. "
                "Enrollment is what protects an account; enforcement only requires it at sign-in.",
                "INTEGER",
                required=True,
            ),
            col("suspended", "1 if the account is suspended.", "INTEGER", required=True),
            col("archived", "1 if the account is archived.", "INTEGER", required=True),
            col("creation_time", "Creation time (UTC).", required=True),
            col("last_login_time", "Last sign-in (UTC); NULL if never."),
        ),
        primary_key=("id",),
    ),
    Table(
        "gws_user_aliases",
        "Additional addresses that deliver to, and identify, a user (including addresses on secondary domains).",
        (
            col("user_id", "`gws_users.id`.", required=True),
            col("alias", "The alias address.", required=True),
        ),
        primary_key=("user_id", "alias"),
        foreign_keys=(fk("user_id", "gws_users", "id"),),
    ),
    Table(
        "gws_groups",
        "Workspace groups. Groups are also used as principals in Google Cloud IAM.",
        (
            col("id", "Group id.", required=True),
            col("email", "Group address.", required=True),
            col("name", "Group name.", required=True),
            col("description", "Description."),
            col(
                "allow_external_members",
                "1 if the group settings allow members outside the organization.",
                "INTEGER",
                required=True,
            ),
        ),
        primary_key=("id",),
    ),
    Table(
        "gws_group_members",
        "Direct members of each group. A member can be a user, another group (nesting, transitive) or an "
        "address outside the organization.",
        (
            col("group_id", "`gws_groups.id`.", required=True),
            col("member_email", "The address the member was added by (a primary address or an alias).", required=True),
            col(
                "member_id",
                "`gws_users.id` or `gws_groups.id` when the member is in this directory; NULL "
                "for addresses outside it.",
            ),
            col("role", "`OWNER`, `MANAGER` or `MEMBER`.", required=True),
            col("type", "`USER`, `GROUP` or `CUSTOMER` (everyone in the organization).", required=True),
            col("status", "`ACTIVE`, `SUSPENDED` or NULL for addresses outside the directory."),
        ),
        primary_key=("group_id", "member_email"),
        foreign_keys=(fk("group_id", "gws_groups", "id"),),
    ),
    Table(
        "gws_admin_roles",
        "Admin roles defined in the Workspace account (system roles and custom roles).",
        (
            col("role_id", "Role id.", required=True),
            col(
                "role_name",
                "Role name, e.g. `_SEED_ADMIN_ROLE` (Super Admin), `_GROUPS_ADMIN_ROLE`.",
                required=True,
            ),
            col("role_description", "What the role is for."),
            col("is_super_admin_role", "1 for the super admin role.", "INTEGER", required=True),
            col("is_system_role", "1 for Google-defined roles, 0 for custom roles.", "INTEGER", required=True),
        ),
        primary_key=("role_id",),
    ),
    Table(
        "gws_role_assignments",
        "Which users hold which admin role, and where.",
        (
            col("role_assignment_id", "Assignment id.", required=True),
            col("role_id", "`gws_admin_roles.role_id`.", required=True),
            col("assigned_to", "`gws_users.id` of the holder.", required=True),
            col("scope_type", "`CUSTOMER` (whole account) or `ORG_UNIT`.", required=True),
            col("org_unit_path", "The org unit for `ORG_UNIT` scope; NULL otherwise."),
        ),
        primary_key=("role_assignment_id",),
        foreign_keys=(fk("role_id", "gws_admin_roles", "role_id"), fk("assigned_to", "gws_users", "id")),
    ),
    Table(
        "gws_oauth_tokens",
        "OAuth grants users gave to third-party apps (Directory API `tokens.list`).",
        (
            col("user_id", "`gws_users.id` of the user who granted access.", required=True),
            col("client_id", "OAuth client id of the app.", required=True),
            col("display_text", "App name shown on the consent screen.", required=True),
            col("scopes", "Space-separated OAuth scopes granted.", required=True),
            col(
                "anonymous",
                "1 if the app is not registered with Google (unverified).",
                "INTEGER",
                required=True,
            ),
            col("native_app", "1 for installed (native) apps.", "INTEGER", required=True),
        ),
        primary_key=("user_id", "client_id"),
        foreign_keys=(fk("user_id", "gws_users", "id"),),
    ),
)


class GwsUserRow(NamedTuple):
    """A row of ``gws_users``."""

    id: str
    primary_email: str
    full_name: str
    org_unit_path: str
    is_admin: int
    is_delegated_admin: int
    is_enrolled_in_2sv: int
    is_enforced_in_2sv: int
    suspended: int
    archived: int
    creation_time: str
    last_login_time: str | None


class GwsUserAliasRow(NamedTuple):
    """A row of ``gws_user_aliases``."""

    user_id: str
    alias: str


class GwsGroupRow(NamedTuple):
    """A row of ``gws_groups``."""

    id: str
    email: str
    name: str
    description: str | None
    allow_external_members: int


class GwsGroupMemberRow(NamedTuple):
    """A row of ``gws_group_members``."""

    group_id: str
    member_email: str
    member_id: str | None
    role: str
    type: str
    status: str | None


class GwsAdminRoleRow(NamedTuple):
    """A row of ``gws_admin_roles``."""

    role_id: str
    role_name: str
    role_description: str | None
    is_super_admin_role: int
    is_system_role: int


class GwsRoleAssignmentRow(NamedTuple):
    """A row of ``gws_role_assignments``."""

    role_assignment_id: str
    role_id: str
    assigned_to: str
    scope_type: str
    org_unit_path: str | None


class GwsOauthTokenRow(NamedTuple):
    """A row of ``gws_oauth_tokens``."""

    user_id: str
    client_id: str
    display_text: str
    scopes: str
    anonymous: int
    native_app: int
