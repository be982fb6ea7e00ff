"""The world's tables: per vendor, the ``Table`` declarations and one typed row per table.

The declarations are the one source of the DDL and of the agent-visible docs. A vendor builds each
row as its table's row type (a ``NamedTuple``), so mypy checks every value where the row is made,
and a planted change to a row is ``row._replace(column=value)``, by column name. Row types are
still tuples, so rows sort, deduplicate and insert exactly as positional tuples do. ``checked``
holds every generated row to its declaration: the row type's fields are the table's columns, in
order, and each value has the column's SQL type (``None`` only where the column is nullable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, get_type_hints

from runner.world.org import Row
from runner.world.schema import Column, Table
from runner.world.tables import atlas, aws, azure, gcp, github, gws, hibob, okta

# Each vendor's table declarations, by vendor prefix.
VENDOR_TABLES: dict[str, tuple[Table, ...]] = {
    "hibob": hibob.TABLES,
    "okta": okta.TABLES,
    "azure": azure.TABLES,
    "gws": gws.TABLES,
    "aws": aws.TABLES,
    "gcp": gcp.TABLES,
    "github": github.TABLES,
    "atlas": atlas.TABLES,
}
# The row type of every table, by table name.
ROW_TYPES: dict[str, type[Any]] = {
    "hibob_people": hibob.HibobPersonRow,
    "okta_users": okta.OktaUserRow,
    "okta_groups": okta.OktaGroupRow,
    "okta_group_memberships": okta.OktaGroupMembershipRow,
    "okta_apps": okta.OktaAppRow,
    "okta_app_user_assignments": okta.OktaAppUserAssignmentRow,
    "okta_app_group_assignments": okta.OktaAppGroupAssignmentRow,
    "okta_factors": okta.OktaFactorRow,
    "okta_admin_role_assignments": okta.OktaAdminRoleAssignmentRow,
    "azure_users": azure.AzureUserRow,
    "azure_groups": azure.AzureGroupRow,
    "azure_group_members": azure.AzureGroupMemberRow,
    "azure_directory_roles": azure.AzureDirectoryRoleRow,
    "azure_role_assignments": azure.AzureRoleAssignmentRow,
    "azure_conditional_access_policies": azure.AzureConditionalAccessPolicyRow,
    "azure_conditional_access_targets": azure.AzureConditionalAccessTargetRow,
    "azure_user_registration_details": azure.AzureUserRegistrationDetailRow,
    "azure_service_principals": azure.AzureServicePrincipalRow,
    "azure_service_principal_credentials": azure.AzureServicePrincipalCredentialRow,
    "azure_service_principal_owners": azure.AzureServicePrincipalOwnerRow,
    "gws_users": gws.GwsUserRow,
    "gws_user_aliases": gws.GwsUserAliasRow,
    "gws_groups": gws.GwsGroupRow,
    "gws_group_members": gws.GwsGroupMemberRow,
    "gws_admin_roles": gws.GwsAdminRoleRow,
    "gws_role_assignments": gws.GwsRoleAssignmentRow,
    "gws_oauth_tokens": gws.GwsOauthTokenRow,
    "aws_accounts": aws.AwsAccountRow,
    "aws_iam_users": aws.AwsIamUserRow,
    "aws_iam_mfa_devices": aws.AwsIamMfaDeviceRow,
    "aws_iam_access_keys": aws.AwsIamAccessKeyRow,
    "aws_iam_groups": aws.AwsIamGroupRow,
    "aws_iam_group_memberships": aws.AwsIamGroupMembershipRow,
    "aws_iam_roles": aws.AwsIamRoleRow,
    "aws_iam_policies": aws.AwsIamPolicyRow,
    "aws_iam_policy_attachments": aws.AwsIamPolicyAttachmentRow,
    "aws_iam_inline_policies": aws.AwsIamInlinePolicyRow,
    "aws_sso_permission_sets": aws.AwsSsoPermissionSetRow,
    "aws_sso_permission_set_policies": aws.AwsSsoPermissionSetPolicyRow,
    "aws_sso_account_assignments": aws.AwsSsoAccountAssignmentRow,
    "aws_identitystore_users": aws.AwsIdentitystoreUserRow,
    "aws_identitystore_groups": aws.AwsIdentitystoreGroupRow,
    "aws_identitystore_group_memberships": aws.AwsIdentitystoreGroupMembershipRow,
    "gcp_projects": gcp.GcpProjectRow,
    "gcp_iam_bindings": gcp.GcpIamBindingRow,
    "gcp_service_accounts": gcp.GcpServiceAccountRow,
    "gcp_service_account_keys": gcp.GcpServiceAccountKeyRow,
    "github_org_members": github.GithubOrgMemberRow,
    "github_outside_collaborators": github.GithubOutsideCollaboratorRow,
    "github_saml_identities": github.GithubSamlIdentityRow,
    "github_teams": github.GithubTeamRow,
    "github_team_members": github.GithubTeamMemberRow,
    "github_repos": github.GithubRepoRow,
    "github_team_repos": github.GithubTeamRepoRow,
    "github_repo_collaborators": github.GithubRepoCollaboratorRow,
    "github_deploy_keys": github.GithubDeployKeyRow,
    "atlas_org_users": atlas.AtlasOrgUserRow,
    "atlas_user_roles": atlas.AtlasUserRoleRow,
    "atlas_projects": atlas.AtlasProjectRow,
    "atlas_clusters": atlas.AtlasClusterRow,
    "atlas_database_users": atlas.AtlasDatabaseUserRow,
    "atlas_database_user_roles": atlas.AtlasDatabaseUserRoleRow,
    "atlas_database_user_scopes": atlas.AtlasDatabaseUserScopeRow,
    "atlas_api_keys": atlas.AtlasApiKeyRow,
    "atlas_api_key_roles": atlas.AtlasApiKeyRoleRow,
    "atlas_api_key_access_list": atlas.AtlasApiKeyAccessListRow,
    "atlas_ip_access_list": atlas.AtlasIpAccessListRow,
}
_TABLE_OF = {row_type: name for name, row_type in ROW_TYPES.items()}
_PYTHON_TYPE = {"TEXT": str, "INTEGER": int}
TableRow = TypeVar("TableRow")


def _annotation(column: Column) -> object:
    python_type = _PYTHON_TYPE[column.type]
    return python_type | None if column.nullable else python_type


def declaration_problems(table: Table) -> list[str]:
    """Where the row type of ``table`` disagrees with its columns: names, order, types or nullability."""
    row_type = ROW_TYPES.get(table.name)
    if row_type is None:
        return [f"{table.name}: no row type"]
    fields: tuple[str, ...] = row_type._fields
    if fields != table.column_names:
        return [f"{table.name}: row type {row_type.__name__} has fields {fields}, the table {table.column_names}"]
    hints = get_type_hints(row_type)
    return [
        f"{table.name}.{c.name}: row type says {_shown(hints[c.name])}, the column {_shown(_annotation(c))}"
        for c in table.columns
        if hints[c.name] != _annotation(c)
    ]


def _shown(annotation: object) -> str:
    # A class shows as its name (``str``), a union as written (``str | None``).
    return getattr(annotation, "__name__", str(annotation))


def _value_ok(column: Column, value: object) -> bool:
    if value is None:
        return column.nullable
    return isinstance(value, _PYTHON_TYPE[column.type])


def checked(table: Table, rows: Sequence[Row]) -> list[Row]:
    """``rows`` as a list, after checking each against ``table``'s declaration.

    Raises:
        RuntimeError: a row is not of the table's row type, or a value does not fit its column.
    """
    row_type = ROW_TYPES[table.name]
    for row in rows:
        if not isinstance(row, row_type):
            raise RuntimeError(f"{table.name}: row is a {type(row).__name__}, not a {row_type.__name__}: {row!r}")
        for column, value in zip(table.columns, row, strict=True):
            if not _value_ok(column, value):
                raise RuntimeError(f"{table.name}.{column.name}: {value!r} does not fit {column.type}: {row!r}")
    return list(rows)


def rows_of(rows: Mapping[str, Sequence[Row]], row_type: type[TableRow]) -> list[TableRow]:
    """The rows in ``rows`` of the table whose row type is ``row_type``, typed as such.

    Raises:
        RuntimeError: one of them is not of that type (it was never ``checked``).
    """
    table = _TABLE_OF[row_type]
    typed: list[TableRow] = [r for r in rows[table] if isinstance(r, row_type)]
    if len(typed) != len(rows[table]):
        raise RuntimeError(f"{table}: {len(rows[table]) - len(typed)} row(s) are not {row_type.__name__}")
    return typed
