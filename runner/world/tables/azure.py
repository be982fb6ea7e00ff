"""The Azure AD tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "azure_users",
        "Entra ID users (`/users`), members and guests. Deleted users are gone from this table; disabled "
        "ones remain with `account_enabled = 0`.",
        (
            col("id", "Object id (GUID).", required=True),
            col(
                "user_principal_name",
                "UPN, the sign-in name. Members use `<initial><surname>@corvid.io`; "
                "guests use `<mail with @ as _>#EXT#@corvid.onmicrosoft.com`.",
                required=True,
            ),
            col("mail", "Primary SMTP address; for members usually `first.last@corvid.io`."),
            col("display_name", "Display name.", required=True),
            col("given_name", "Given name."),
            col("surname", "Surname."),
            col("job_title", "Job title as synced to the directory (may lag HR)."),
            col("department", "Department as synced to the directory (may lag HR)."),
            col("user_type", "`Member` or `Guest`.", required=True),
            col("account_enabled", "1 if the account can sign in, 0 if disabled.", "INTEGER", required=True),
            col("external_user_state", "For guests: `Accepted` or `PendingAcceptance`; NULL for members."),
            col("created_date_time", "Creation time (UTC).", required=True),
            col(
                "last_sign_in_date_time",
                "Last interactive sign-in (UTC), from `signInActivity`; NULL if never.",
            ),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_groups",
        "Entra ID groups. Security groups can be nested; role-assignable groups can hold directory roles.",
        (
            col("id", "Object id (GUID).", required=True),
            col("display_name", "Group name.", required=True),
            col("description", "Free-text description."),
            col("mail_nickname", "Mail nickname."),
            col("security_enabled", "1 for security groups.", "INTEGER", required=True),
            col("mail_enabled", "1 for mail-enabled groups.", "INTEGER", required=True),
            col(
                "group_types",
                "`Unified` for Microsoft 365 groups, `DynamicMembership` for rule-based groups, "
                "empty for plain security groups.",
            ),
            col(
                "is_assignable_to_role",
                "1 if directory roles can be assigned to the group.",
                "INTEGER",
                required=True,
            ),
            col("created_date_time", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_group_members",
        "Direct members of each group. A member may itself be a group (nesting): membership is transitive.",
        (
            col("group_id", "`azure_groups.id`.", required=True),
            col(
                "member_id",
                "Object id of the member: an `azure_users.id`, an `azure_groups.id` or an "
                "`azure_service_principals.id`.",
                required=True,
            ),
            col("member_type", "`user`, `group` or `servicePrincipal`.", required=True),
        ),
        primary_key=("group_id", "member_id"),
        foreign_keys=(fk("group_id", "azure_groups", "id"),),
    ),
    Table(
        "azure_directory_roles",
        "Built-in directory role definitions in use in the tenant.",
        (
            col("id", "Role template id (GUID), the same in every tenant.", required=True),
            col("display_name", "Role name, e.g. `Global Administrator`.", required=True),
            col("is_privileged", "1 if Microsoft marks the role as privileged.", "INTEGER", required=True),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_role_assignments",
        "Directory role assignments (`/roleManagement/directory/roleAssignments` plus PIM eligibility). "
        "A role assigned to a group applies to every (transitive) member.",
        (
            col("id", "Assignment id.", required=True),
            col("role_definition_id", "`azure_directory_roles.id`.", required=True),
            col(
                "principal_id",
                "Object id of the user, group or service principal holding the role.",
                required=True,
            ),
            col("principal_type", "`User`, `Group` or `ServicePrincipal`.", required=True),
            col("directory_scope_id", "`/` for the whole tenant, or an administrative unit path."),
            col(
                "assignment_type",
                "`Active` (holds the role now) or `Eligible` (PIM: must activate first).",
                required=True,
            ),
            col("created_date_time", "When the assignment was made (UTC)."),
        ),
        primary_key=("id",),
        foreign_keys=(fk("role_definition_id", "azure_directory_roles", "id"),),
    ),
    Table(
        "azure_conditional_access_policies",
        "Conditional access policies. Who each policy targets is in `azure_conditional_access_targets`.",
        (
            col("id", "Policy id (GUID).", required=True),
            col("display_name", "Policy name.", required=True),
            col(
                "state",
                "`enabled`, `disabled` or `enabledForReportingButNotEnforced` (report-only: "
                "evaluated and logged, never enforced).",
                required=True,
            ),
            col(
                "grant_controls",
                "Comma-separated built-in controls: `mfa`, `compliantDevice`, "
                "`domainJoinedDevice`, `passwordChange` or `block`.",
            ),
            col("grant_operator", "`OR` (any control satisfies) or `AND` (all are required)."),
            col(
                "client_app_types",
                "Comma-separated client app types the policy applies to, e.g. `all`, "
                "`exchangeActiveSync,other` (legacy authentication).",
            ),
            col("created_date_time", "Creation time (UTC)."),
            col("modified_date_time", "Last modification (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_conditional_access_targets",
        "The users, groups and roles each policy includes or excludes. An exclusion beats an inclusion. "
        "A group target covers the group's transitive members.",
        (
            col("policy_id", "`azure_conditional_access_policies.id`.", required=True),
            col("scope", "`include` or `exclude`.", required=True),
            col("target_type", "`user`, `group`, `role` or `special`.", required=True),
            col(
                "target_id",
                "An `azure_users.id`, `azure_groups.id` or `azure_directory_roles.id`; for "
                "`special`: `All` or `GuestsOrExternalUsers`.",
                required=True,
            ),
        ),
        primary_key=("policy_id", "scope", "target_type", "target_id"),
        foreign_keys=(fk("policy_id", "azure_conditional_access_policies", "id"),),
    ),
    Table(
        "azure_user_registration_details",
        "Authentication methods registration per user (`/reports/authenticationMethods/userRegistrationDetails`).",
        (
            col("id", "`azure_users.id`.", required=True),
            col("user_principal_name", "UPN at the time of the report.", required=True),
            col("is_mfa_registered", "1 if the user registered any MFA method.", "INTEGER", required=True),
            col(
                "is_mfa_capable",
                "1 if a registered method is usable for MFA under current policy.",
                "INTEGER",
                required=True,
            ),
            col(
                "is_passwordless_capable",
                "1 if a passwordless method is registered.",
                "INTEGER",
                required=True,
            ),
            col(
                "methods_registered",
                "Comma-separated: `microsoftAuthenticatorPush`, `softwareOneTimePasscode`, "
                "`fido2`, `windowsHelloForBusiness`, `mobilePhone`, `email`. Empty if none.",
            ),
            col(
                "default_mfa_method",
                "`microsoftAuthenticatorPush`, `softwareOneTimePasscode`, `fido2`, `sms`, `voiceMobile` or `none`.",
            ),
            col("last_updated_date_time", "When the details were computed (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_service_principals",
        "Service principals: the tenant's own app registrations, Microsoft first-party apps, managed "
        "identities and multi-tenant third-party apps consented into the tenant.",
        (
            col("id", "Object id (GUID).", required=True),
            col("app_id", "Application (client) id (GUID).", required=True),
            col("display_name", "App name.", required=True),
            col("service_principal_type", "`Application` or `ManagedIdentity`.", required=True),
            col("account_enabled", "1 if sign-in is enabled.", "INTEGER", required=True),
            col(
                "app_owner_organization_id",
                "Tenant id of the publisher. The company's own tenant is "
                "`7c1d9e02-45b3-4f7a-9a61-2e8c4b5d0f13`; Microsoft's is `f8cdef31-a31e-4b4a-93e4-5f571e91255a`.",
            ),
            col("created_date_time", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_service_principal_credentials",
        "Client secrets and certificates on service principals and their app registrations.",
        (
            col("key_id", "Credential id (GUID).", required=True),
            col("service_principal_id", "`azure_service_principals.id`.", required=True),
            col("type", "`Password` (client secret) or `AsymmetricX509Cert`.", required=True),
            col("display_name", "Credential description."),
            col("start_date_time", "Valid from (UTC).", required=True),
            col(
                "end_date_time",
                "Expires (UTC). Secrets valid for more than two years violate policy.",
                required=True,
            ),
        ),
        primary_key=("key_id",),
        foreign_keys=(fk("service_principal_id", "azure_service_principals", "id"),),
    ),
    Table(
        "azure_service_principal_owners",
        "Users who own each service principal and can manage its credentials.",
        (
            col("service_principal_id", "`azure_service_principals.id`.", required=True),
            col("owner_id", "`azure_users.id`.", required=True),
        ),
        primary_key=("service_principal_id", "owner_id"),
        foreign_keys=(
            fk("service_principal_id", "azure_service_principals", "id"),
            fk("owner_id", "azure_users", "id"),
        ),
    ),
)


class AzureUserRow(NamedTuple):
    """A row of ``azure_users``."""

    id: str
    user_principal_name: str
    mail: str | None
    display_name: str
    given_name: str | None
    surname: str | None
    job_title: str | None
    department: str | None
    user_type: str
    account_enabled: int
    external_user_state: str | None
    created_date_time: str
    last_sign_in_date_time: str | None


class AzureGroupRow(NamedTuple):
    """A row of ``azure_groups``."""

    id: str
    display_name: str
    description: str | None
    mail_nickname: str | None
    security_enabled: int
    mail_enabled: int
    group_types: str | None
    is_assignable_to_role: int
    created_date_time: str | None


class AzureGroupMemberRow(NamedTuple):
    """A row of ``azure_group_members``."""

    group_id: str
    member_id: str
    member_type: str


class AzureDirectoryRoleRow(NamedTuple):
    """A row of ``azure_directory_roles``."""

    id: str
    display_name: str
    is_privileged: int


class AzureRoleAssignmentRow(NamedTuple):
    """A row of ``azure_role_assignments``."""

    id: str
    role_definition_id: str
    principal_id: str
    principal_type: str
    directory_scope_id: str | None
    assignment_type: str
    created_date_time: str | None


class AzureConditionalAccessPolicyRow(NamedTuple):
    """A row of ``azure_conditional_access_policies``."""

    id: str
    display_name: str
    state: str
    grant_controls: str | None
    grant_operator: str | None
    client_app_types: str | None
    created_date_time: str | None
    modified_date_time: str | None


class AzureConditionalAccessTargetRow(NamedTuple):
    """A row of ``azure_conditional_access_targets``."""

    policy_id: str
    scope: str
    target_type: str
    target_id: str


class AzureUserRegistrationDetailRow(NamedTuple):
    """A row of ``azure_user_registration_details``."""

    id: str
    user_principal_name: str
    is_mfa_registered: int
    is_mfa_capable: int
    is_passwordless_capable: int
    methods_registered: str | None
    default_mfa_method: str | None
    last_updated_date_time: str | None


class AzureServicePrincipalRow(NamedTuple):
    """A row of ``azure_service_principals``."""

    id: str
    app_id: str
    display_name: str
    service_principal_type: str
    account_enabled: int
    app_owner_organization_id: str | None
    created_date_time: str | None


class AzureServicePrincipalCredentialRow(NamedTuple):
    """A row of ``azure_service_principal_credentials``."""

    key_id: str
    service_principal_id: str
    type: str
    display_name: str | None
    start_date_time: str
    end_date_time: str


class AzureServicePrincipalOwnerRow(NamedTuple):
    """A row of ``azure_service_principal_owners``."""

    service_principal_id: str
    owner_id: str
