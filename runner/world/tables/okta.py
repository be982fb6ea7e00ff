"""The Okta tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "okta_users",
        "Okta users (`/api/v1/users`), including deactivated ones. Okta keeps a deprovisioned user "
        "until an admin deletes it.",
        (
            col("id", "Okta user id, e.g. `00u1a2b3c4D5e6F7g8h9`.", required=True),
            col(
                "status",
                "`STAGED`, `PROVISIONED`, `ACTIVE`, `RECOVERY`, `PASSWORD_EXPIRED`, `LOCKED_OUT`, "
                "`SUSPENDED` or `DEPROVISIONED` (deactivated). Only `DEPROVISIONED` users cannot sign in "
                "at all; `SUSPENDED` users are blocked until unsuspended.",
                required=True,
            ),
            col(
                "login",
                "Okta username. Usually the work email, but it keeps whatever form it was "
                "created with (older domains, mixed case).",
                required=True,
            ),
            col("email", "Primary email on the profile.", required=True),
            col("first_name", "Profile given name."),
            col("last_name", "Profile family name."),
            col("user_type", "Okta user type: `employee`, `contractor` or `service`."),
            col("created", "When the user was created (UTC)."),
            col("activated", "When the user was first activated (UTC); NULL if never activated."),
            col("status_changed", "When `status` last changed (UTC)."),
            col("last_login", "Last successful sign-in (UTC); NULL if never signed in."),
            col("password_changed", "When the password was last changed (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "okta_groups",
        "Okta groups (`/api/v1/groups`). Several are pushed to downstream apps (AWS IAM Identity Center, "
        "GitHub) under the same name.",
        (
            col("id", "Okta group id, e.g. `00g...`.", required=True),
            col("name", "Group name.", required=True),
            col("description", "Free-text description."),
            col(
                "type",
                "`OKTA_GROUP` (managed in Okta), `APP_GROUP` (imported from an app) or `BUILT_IN` (`Everyone`).",
                required=True,
            ),
            col("created", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "okta_group_memberships",
        "Direct members of each Okta group. Okta groups do not nest.",
        (
            col("group_id", "`okta_groups.id`.", required=True),
            col("user_id", "`okta_users.id`.", required=True),
        ),
        primary_key=("group_id", "user_id"),
        foreign_keys=(fk("group_id", "okta_groups", "id"), fk("user_id", "okta_users", "id")),
    ),
    Table(
        "okta_apps",
        "Applications integrated with Okta for single sign-on or provisioning.",
        (
            col("id", "Okta app id, e.g. `0oa...`.", required=True),
            col(
                "name",
                "Okta integration name, e.g. `amazon_aws_sso`, `github_enterprise_cloud`.",
                required=True,
            ),
            col("label", "Display label shown to users.", required=True),
            col("status", "`ACTIVE` or `INACTIVE`.", required=True),
            col("sign_on_mode", "`SAML_2_0`, `OPENID_CONNECT`, `BOOKMARK` or `BROWSER_PLUGIN`."),
            col(
                "provisioning",
                "Lifecycle provisioning to the app: `SCIM` (pushes users and groups) or `NONE`.",
            ),
            col("created", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "okta_app_user_assignments",
        "Which users are assigned to each app. `scope` says whether the assignment is direct (`USER`) or "
        "inherited from a group assignment (`GROUP`).",
        (
            col("app_id", "`okta_apps.id`.", required=True),
            col("user_id", "`okta_users.id`.", required=True),
            col("scope", "`USER` (assigned directly) or `GROUP` (through a group assignment).", required=True),
            col("app_username", "The username Okta sends to the app for this user."),
            col("created", "When the assignment was made (UTC)."),
        ),
        primary_key=("app_id", "user_id"),
        foreign_keys=(fk("app_id", "okta_apps", "id"), fk("user_id", "okta_users", "id")),
    ),
    Table(
        "okta_app_group_assignments",
        "Groups assigned to each app. For SCIM apps the group is also pushed to the app.",
        (
            col("app_id", "`okta_apps.id`.", required=True),
            col("group_id", "`okta_groups.id`.", required=True),
            col("priority", "Assignment priority (0 is highest).", "INTEGER"),
        ),
        primary_key=("app_id", "group_id"),
        foreign_keys=(fk("app_id", "okta_apps", "id"), fk("group_id", "okta_groups", "id")),
    ),
    Table(
        "okta_factors",
        "Enrolled MFA factors per user (`/api/v1/users/{id}/factors`).",
        (
            col("id", "Factor id.", required=True),
            col("user_id", "`okta_users.id`.", required=True),
            col(
                "factor_type",
                "`push` (Okta Verify push), `token:software:totp`, `signed_nonce` (Okta FastPass), "
                "`webauthn` (security key or biometric), `sms`, `call`, `email` or `question`. `sms`, `call`, "
                "`email` and `question` are not phishing-resistant and are treated as weak by policy.",
                required=True,
            ),
            col("provider", "`OKTA`, `GOOGLE` or `FIDO`.", required=True),
            col(
                "status",
                "`ACTIVE`, `PENDING_ACTIVATION` (enrollment started, never finished) or `INACTIVE`.",
                required=True,
            ),
            col("created", "Enrollment time (UTC)."),
            col("last_updated", "Last change (UTC)."),
        ),
        primary_key=("id",),
        foreign_keys=(fk("user_id", "okta_users", "id"),),
    ),
    Table(
        "okta_admin_role_assignments",
        "Okta administrator roles, granted to a user directly or to a group (every member holds it).",
        (
            col("id", "Role assignment id.", required=True),
            col(
                "role_type",
                "`SUPER_ADMIN`, `ORG_ADMIN`, `APP_ADMIN`, `USER_ADMIN`, `HELP_DESK_ADMIN`, "
                "`GROUP_MEMBERSHIP_ADMIN`, `READ_ONLY_ADMIN` or `REPORT_ADMIN`.",
                required=True,
            ),
            col("assignee_type", "`USER` or `GROUP`.", required=True),
            col(
                "assignee_id",
                "`okta_users.id` or `okta_groups.id`, depending on `assignee_type`.",
                required=True,
            ),
            col(
                "status",
                "`ACTIVE`, or `INACTIVE` for an assignment that was revoked (it grants nothing).",
                required=True,
            ),
            col("created", "When the role was granted (UTC)."),
        ),
        primary_key=("id",),
    ),
)


class OktaUserRow(NamedTuple):
    """A row of ``okta_users``."""

    id: str
    status: str
    login: str
    email: str
    first_name: str | None
    last_name: str | None
    user_type: str | None
    created: str | None
    activated: str | None
    status_changed: str | None
    last_login: str | None
    password_changed: str | None


class OktaGroupRow(NamedTuple):
    """A row of ``okta_groups``."""

    id: str
    name: str
    description: str | None
    type: str
    created: str | None


class OktaGroupMembershipRow(NamedTuple):
    """A row of ``okta_group_memberships``."""

    group_id: str
    user_id: str


class OktaAppRow(NamedTuple):
    """A row of ``okta_apps``."""

    id: str
    name: str
    label: str
    status: str
    sign_on_mode: str | None
    provisioning: str | None
    created: str | None


class OktaAppUserAssignmentRow(NamedTuple):
    """A row of ``okta_app_user_assignments``."""

    app_id: str
    user_id: str
    scope: str
    app_username: str | None
    created: str | None


class OktaAppGroupAssignmentRow(NamedTuple):
    """A row of ``okta_app_group_assignments``."""

    app_id: str
    group_id: str
    priority: int | None


class OktaFactorRow(NamedTuple):
    """A row of ``okta_factors``."""

    id: str
    user_id: str
    factor_type: str
    provider: str
    status: str
    created: str | None
    last_updated: str | None


class OktaAdminRoleAssignmentRow(NamedTuple):
    """A row of ``okta_admin_role_assignments``."""

    id: str
    role_type: str
    assignee_type: str
    assignee_id: str
    status: str
    created: str | None
