"""The AWS tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "aws_accounts",
        "Accounts in the AWS Organization. An account id that is not in this table is outside the organization.",
        (
            col("id", "12-digit account id.", required=True),
            col("name", "Account name.", required=True),
            col("email", "Root user email of the account.", required=True),
            col("status", "`ACTIVE` or `SUSPENDED`.", required=True),
            col("ou_path", "Organizational unit path, e.g. `Root/Workloads/Prod`.", required=True),
            col("joined_timestamp", "When the account joined the organization (UTC).", required=True),
        ),
        primary_key=("id",),
    ),
    Table(
        "aws_iam_users",
        "IAM users in each account (long-lived credentials; people normally use Identity Center instead).",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col(
                "user_name",
                "IAM user name as typed by whoever created it, e.g. `JDoe-Dev`, `jdoe`, `svc-ci-deployer`.",
                required=True,
            ),
            col("user_id", "Stable IAM id, `AIDA...`.", required=True),
            col("arn", "User ARN.", required=True),
            col("create_date", "Creation time (UTC).", required=True),
            col(
                "password_enabled",
                "1 if the user has a console password (console access).",
                "INTEGER",
                required=True,
            ),
            col("password_last_used", "Last console sign-in (UTC); NULL if never."),
            col("tags", 'JSON object of IAM tags, e.g. `{"owner": "jdoe@corvid.io"}`; `{}` if none.'),
        ),
        primary_key=("account_id", "user_name"),
    ),
    Table(
        "aws_iam_mfa_devices",
        "MFA devices enabled for IAM users.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col("user_name", "`aws_iam_users.user_name`.", required=True),
            col("serial_number", "Device ARN or hardware serial.", required=True),
            col("device_type", "`virtual`, `hardware` or `u2f`.", required=True),
            col("enable_date", "When it was enabled (UTC).", required=True),
        ),
        primary_key=("account_id", "serial_number"),
        foreign_keys=(fk("account_id,user_name", "aws_iam_users", "account_id,user_name"),),
    ),
    Table(
        "aws_iam_access_keys",
        "Access keys of IAM users, from the credential report.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col("user_name", "`aws_iam_users.user_name`.", required=True),
            col("access_key_id", "Key id, `AKIA...`.", required=True),
            col("status", "`Active` or `Inactive`.", required=True),
            col(
                "create_date",
                "When the key was created (UTC). Keys are expected to rotate yearly.",
                required=True,
            ),
            col("last_used_date", "Last use (UTC); NULL if never used."),
            col("last_used_service", "Service of the last use, e.g. `s3`, `sts`; NULL if never used."),
        ),
        primary_key=("access_key_id",),
        foreign_keys=(fk("account_id,user_name", "aws_iam_users", "account_id,user_name"),),
    ),
    Table(
        "aws_iam_groups",
        "IAM groups per account.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col("group_name", "Group name.", required=True),
            col("arn", "Group ARN.", required=True),
        ),
        primary_key=("account_id", "group_name"),
    ),
    Table(
        "aws_iam_group_memberships",
        "IAM users in each IAM group.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col("group_name", "`aws_iam_groups.group_name`.", required=True),
            col("user_name", "`aws_iam_users.user_name`.", required=True),
        ),
        primary_key=("account_id", "group_name", "user_name"),
        foreign_keys=(
            fk("account_id,group_name", "aws_iam_groups", "account_id,group_name"),
            fk("account_id,user_name", "aws_iam_users", "account_id,user_name"),
        ),
    ),
    Table(
        "aws_iam_roles",
        "IAM roles per account, with their trust (assume-role) policy.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col(
                "role_name",
                "Role name. Identity Center creates `AWSReservedSSO_<permission set>_<hex>`.",
                required=True,
            ),
            col("role_id", "Stable id, `AROA...`.", required=True),
            col("arn", "Role ARN.", required=True),
            col(
                "path",
                "Role path, e.g. `/`, `/aws-reserved/sso.amazonaws.com/`, `/service-role/`.",
                required=True,
            ),
            col("description", "Description."),
            col(
                "trust_policy",
                "The assume-role policy document (JSON). `Principal.AWS` names accounts "
                "(`arn:aws:iam::<id>:root`) or roles allowed to assume it; `*` is anyone.",
                required=True,
            ),
            col("create_date", "Creation time (UTC).", required=True),
            col("role_last_used", "Last time the role was assumed (UTC); NULL if never."),
            col("max_session_duration", "Seconds.", "INTEGER", required=True),
        ),
        primary_key=("account_id", "role_name"),
    ),
    Table(
        "aws_iam_policies",
        "Managed policies: AWS managed (`account_id` NULL) and customer managed.",
        (
            col("arn", "Policy ARN.", required=True),
            col("policy_name", "Policy name.", required=True),
            col("policy_type", "`AWS managed` or `Customer managed`.", required=True),
            col("account_id", "Owning `aws_accounts.id` for customer-managed policies; NULL for AWS managed."),
            col("description", "Description."),
            col(
                "document",
                "Default version's policy document (JSON) for customer-managed policies; NULL for AWS "
                "managed ones, whose documents AWS publishes (e.g. `AdministratorAccess` allows `*` on `*`).",
            ),
        ),
        primary_key=("arn",),
    ),
    Table(
        "aws_iam_policy_attachments",
        "Managed policies attached to users, groups and roles.",
        (
            col("account_id", "`aws_accounts.id` where the principal lives.", required=True),
            col("principal_type", "`user`, `group` or `role`.", required=True),
            col("principal_name", "`user_name`, `group_name` or `role_name`.", required=True),
            col("policy_arn", "`aws_iam_policies.arn`.", required=True),
        ),
        primary_key=("account_id", "principal_type", "principal_name", "policy_arn"),
        foreign_keys=(fk("policy_arn", "aws_iam_policies", "arn"),),
    ),
    Table(
        "aws_iam_inline_policies",
        "Inline policies embedded in users, groups and roles.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col("principal_type", "`user`, `group` or `role`.", required=True),
            col("principal_name", "`user_name`, `group_name` or `role_name`.", required=True),
            col("policy_name", "Inline policy name.", required=True),
            col("document", "Policy document (JSON).", required=True),
        ),
        primary_key=("account_id", "principal_type", "principal_name", "policy_name"),
    ),
    Table(
        "aws_sso_permission_sets",
        "IAM Identity Center permission sets.",
        (
            col("arn", "Permission set ARN.", required=True),
            col("name", "Name, e.g. `AdministratorAccess`.", required=True),
            col("description", "Description."),
            col("session_duration", "ISO-8601 duration, e.g. `PT8H`.", required=True),
            col("created_date", "Creation time (UTC)."),
        ),
        primary_key=("arn",),
    ),
    Table(
        "aws_sso_permission_set_policies",
        "Managed policies attached to each permission set.",
        (
            col("permission_set_arn", "`aws_sso_permission_sets.arn`.", required=True),
            col("policy_arn", "`aws_iam_policies.arn`.", required=True),
        ),
        primary_key=("permission_set_arn", "policy_arn"),
        foreign_keys=(fk("permission_set_arn", "aws_sso_permission_sets", "arn"),),
    ),
    Table(
        "aws_sso_account_assignments",
        "Who gets which permission set in which account. A `GROUP` assignment applies to every member.",
        (
            col("account_id", "`aws_accounts.id`.", required=True),
            col("permission_set_arn", "`aws_sso_permission_sets.arn`.", required=True),
            col("principal_type", "`USER` or `GROUP`.", required=True),
            col(
                "principal_id",
                "`aws_identitystore_users.user_id` or `aws_identitystore_groups.group_id`.",
                required=True,
            ),
        ),
        primary_key=("account_id", "permission_set_arn", "principal_type", "principal_id"),
        foreign_keys=(fk("permission_set_arn", "aws_sso_permission_sets", "arn"),),
    ),
    Table(
        "aws_identitystore_users",
        "Users in the Identity Center identity store, provisioned from the IdP over SCIM (or created by hand).",
        (
            col("user_id", "Identity store user id.", required=True),
            col("user_name", "User name as the IdP sent it (the IdP login).", required=True),
            col("display_name", "Display name."),
            col("email", "Primary email."),
            col(
                "external_id",
                "The IdP's id for this user (for SCIM users, the IdP user id); NULL for users created by hand.",
            ),
        ),
        primary_key=("user_id",),
    ),
    Table(
        "aws_identitystore_groups",
        "Groups in the identity store, pushed from the IdP under the IdP group's name.",
        (
            col("group_id", "Identity store group id.", required=True),
            col("display_name", "Group name.", required=True),
            col("external_id", "The IdP's id for this group; NULL if created by hand."),
        ),
        primary_key=("group_id",),
    ),
    Table(
        "aws_identitystore_group_memberships",
        "Members of identity store groups.",
        (
            col("group_id", "`aws_identitystore_groups.group_id`.", required=True),
            col("user_id", "`aws_identitystore_users.user_id`.", required=True),
        ),
        primary_key=("group_id", "user_id"),
        foreign_keys=(
            fk("group_id", "aws_identitystore_groups", "group_id"),
            fk("user_id", "aws_identitystore_users", "user_id"),
        ),
    ),
)


class AwsAccountRow(NamedTuple):
    """A row of ``aws_accounts``."""

    id: str
    name: str
    email: str
    status: str
    ou_path: str
    joined_timestamp: str


class AwsIamUserRow(NamedTuple):
    """A row of ``aws_iam_users``."""

    account_id: str
    user_name: str
    user_id: str
    arn: str
    create_date: str
    password_enabled: int
    password_last_used: str | None
    tags: str | None


class AwsIamMfaDeviceRow(NamedTuple):
    """A row of ``aws_iam_mfa_devices``."""

    account_id: str
    user_name: str
    serial_number: str
    device_type: str
    enable_date: str


class AwsIamAccessKeyRow(NamedTuple):
    """A row of ``aws_iam_access_keys``."""

    account_id: str
    user_name: str
    access_key_id: str
    status: str
    create_date: str
    last_used_date: str | None
    last_used_service: str | None


class AwsIamGroupRow(NamedTuple):
    """A row of ``aws_iam_groups``."""

    account_id: str
    group_name: str
    arn: str


class AwsIamGroupMembershipRow(NamedTuple):
    """A row of ``aws_iam_group_memberships``."""

    account_id: str
    group_name: str
    user_name: str


class AwsIamRoleRow(NamedTuple):
    """A row of ``aws_iam_roles``."""

    account_id: str
    role_name: str
    role_id: str
    arn: str
    path: str
    description: str | None
    trust_policy: str
    create_date: str
    role_last_used: str | None
    max_session_duration: int


class AwsIamPolicyRow(NamedTuple):
    """A row of ``aws_iam_policies``."""

    arn: str
    policy_name: str
    policy_type: str
    account_id: str | None
    description: str | None
    document: str | None


class AwsIamPolicyAttachmentRow(NamedTuple):
    """A row of ``aws_iam_policy_attachments``."""

    account_id: str
    principal_type: str
    principal_name: str
    policy_arn: str


class AwsIamInlinePolicyRow(NamedTuple):
    """A row of ``aws_iam_inline_policies``."""

    account_id: str
    principal_type: str
    principal_name: str
    policy_name: str
    document: str


class AwsSsoPermissionSetRow(NamedTuple):
    """A row of ``aws_sso_permission_sets``."""

    arn: str
    name: str
    description: str | None
    session_duration: str
    created_date: str | None


class AwsSsoPermissionSetPolicyRow(NamedTuple):
    """A row of ``aws_sso_permission_set_policies``."""

    permission_set_arn: str
    policy_arn: str


class AwsSsoAccountAssignmentRow(NamedTuple):
    """A row of ``aws_sso_account_assignments``."""

    account_id: str
    permission_set_arn: str
    principal_type: str
    principal_id: str


class AwsIdentitystoreUserRow(NamedTuple):
    """A row of ``aws_identitystore_users``."""

    user_id: str
    user_name: str
    display_name: str | None
    email: str | None
    external_id: str | None


class AwsIdentitystoreGroupRow(NamedTuple):
    """A row of ``aws_identitystore_groups``."""

    group_id: str
    display_name: str
    external_id: str | None


class AwsIdentitystoreGroupMembershipRow(NamedTuple):
    """A row of ``aws_identitystore_group_memberships``."""

    group_id: str
    user_id: str
