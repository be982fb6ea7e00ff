"""The MongoDB Atlas tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "atlas_org_users",
        "Users of the Atlas organization. `username` is the email the user signs in with.",
        (
            col("id", "Atlas user id (24 hex chars).", required=True),
            col("username", "Sign-in email.", required=True),
            col("first_name", "Given name."),
            col("last_name", "Family name."),
            col("country", "Two-letter country code."),
            col("created_at", "When the user joined Atlas (UTC).", required=True),
            col("last_auth", "Last authentication (UTC); NULL if never."),
            col(
                "mfa_enabled",
                "1 if Atlas multi-factor authentication is set up for the user. Users who sign "
                "in through the company IdP federation get MFA from the IdP instead.",
                "INTEGER",
                required=True,
            ),
            col(
                "federated",
                "1 if the user signs in through the company IdP (SAML federation), 0 for an Atlas password.",
                "INTEGER",
                required=True,
            ),
        ),
        primary_key=("id",),
    ),
    Table(
        "atlas_user_roles",
        "Roles of each user, at organization or project scope.",
        (
            col("user_id", "`atlas_org_users.id`.", required=True),
            col("scope", "`org` or `project`.", required=True),
            col("project_id", "`atlas_projects.id` for project roles; NULL for org roles."),
            col(
                "role_name",
                "Org roles: `ORG_OWNER`, `ORG_PROJECT_CREATOR`, `ORG_BILLING_ADMIN`, `ORG_READ_ONLY`, "
                "`ORG_MEMBER`. Project roles: `GROUP_OWNER`, `GROUP_CLUSTER_MANAGER`, "
                "`GROUP_DATA_ACCESS_ADMIN`, `GROUP_DATA_ACCESS_READ_WRITE`, `GROUP_DATA_ACCESS_READ_ONLY`, "
                "`GROUP_READ_ONLY`.",
                required=True,
            ),
        ),
        primary_key=("user_id", "scope", "project_id", "role_name"),
        foreign_keys=(fk("user_id", "atlas_org_users", "id"),),
    ),
    Table(
        "atlas_projects",
        "Atlas projects (called groups in the Atlas API).",
        (
            col("id", "Project id (24 hex chars).", required=True),
            col("name", "Project name.", required=True),
            col("org_id", "Organization id.", required=True),
            col("created", "Creation time (UTC).", required=True),
        ),
        primary_key=("id",),
    ),
    Table(
        "atlas_clusters",
        "Database clusters.",
        (
            col("id", "Cluster id.", required=True),
            col("project_id", "`atlas_projects.id`.", required=True),
            col("name", "Cluster name.", required=True),
            col("cluster_type", "`REPLICASET` or `SHARDED`.", required=True),
            col("mongo_db_version", "MongoDB version.", required=True),
            col("provider_name", "`AWS`, `GCP` or `AZURE`.", required=True),
            col("region_name", "Provider region.", required=True),
            col("state_name", "`IDLE`, `CREATING`, `UPDATING` or `DELETING`.", required=True),
            col("paused", "1 if paused.", "INTEGER", required=True),
        ),
        primary_key=("id",),
        foreign_keys=(fk("project_id", "atlas_projects", "id"),),
    ),
    Table(
        "atlas_database_users",
        "Database users per project (they authenticate to clusters, not to Atlas).",
        (
            col("project_id", "`atlas_projects.id`.", required=True),
            col("username", "Database username; for AWS IAM authentication this is an IAM ARN.", required=True),
            col(
                "database_name",
                "Authentication database: `admin` for SCRAM passwords, `$external` for IAM, X.509 or LDAP.",
                required=True,
            ),
            col("aws_iam_type", "`NONE`, `USER` or `ROLE`.", required=True),
            col("x509_type", "`NONE`, `MANAGED` or `CUSTOMER`.", required=True),
            col("description", "Free text."),
            col("delete_after_date", "When Atlas removes a temporary user (UTC); NULL for permanent users."),
        ),
        primary_key=("project_id", "username"),
        foreign_keys=(fk("project_id", "atlas_projects", "id"),),
    ),
    Table(
        "atlas_database_user_roles",
        "Roles granted to database users.",
        (
            col("project_id", "`atlas_database_users.project_id`.", required=True),
            col("username", "`atlas_database_users.username`.", required=True),
            col(
                "role_name",
                "`atlasAdmin`, `readWriteAnyDatabase`, `readAnyDatabase`, `dbAdmin`, `readWrite` or `read`.",
                required=True,
            ),
            col(
                "database_name",
                "Database the role applies to (`admin` for the *AnyDatabase roles).",
                required=True,
            ),
            col("collection_name", "Collection, if the role is narrowed to one; NULL otherwise."),
        ),
        primary_key=("project_id", "username", "role_name", "database_name"),
        foreign_keys=(fk("project_id,username", "atlas_database_users", "project_id,username"),),
    ),
    Table(
        "atlas_database_user_scopes",
        "Clusters a database user is limited to. A user with no scope rows can reach every cluster in the project.",
        (
            col("project_id", "`atlas_database_users.project_id`.", required=True),
            col("username", "`atlas_database_users.username`.", required=True),
            col("cluster_name", "`atlas_clusters.name`.", required=True),
        ),
        primary_key=("project_id", "username", "cluster_name"),
        foreign_keys=(fk("project_id,username", "atlas_database_users", "project_id,username"),),
    ),
    Table(
        "atlas_api_keys",
        "Programmatic API keys of the organization.",
        (
            col("id", "API key id.", required=True),
            col("public_key", "Public part of the key.", required=True),
            col("description", "Description."),
            col("created", "Creation time (UTC).", required=True),
        ),
        primary_key=("id",),
    ),
    Table(
        "atlas_api_key_roles",
        "Roles held by API keys, at organization or project scope.",
        (
            col("api_key_id", "`atlas_api_keys.id`.", required=True),
            col("scope", "`org` or `project`.", required=True),
            col("project_id", "`atlas_projects.id` for project roles; NULL for org roles."),
            col("role_name", "Same vocabulary as `atlas_user_roles.role_name`.", required=True),
        ),
        primary_key=("api_key_id", "scope", "project_id", "role_name"),
        foreign_keys=(fk("api_key_id", "atlas_api_keys", "id"),),
    ),
    Table(
        "atlas_api_key_access_list",
        "Source addresses each API key may be used from. A key with no entries can be used from anywhere.",
        (
            col("api_key_id", "`atlas_api_keys.id`.", required=True),
            col("cidr_block", "Allowed CIDR.", required=True),
        ),
        primary_key=("api_key_id", "cidr_block"),
        foreign_keys=(fk("api_key_id", "atlas_api_keys", "id"),),
    ),
    Table(
        "atlas_ip_access_list",
        "Project IP access lists: the network sources allowed to connect to the project's clusters. "
        "`0.0.0.0/0` allows the whole internet.",
        (
            col("project_id", "`atlas_projects.id`.", required=True),
            col("cidr_block", "Allowed CIDR block.", required=True),
            col("comment", "Free-text comment."),
            col("delete_after_date", "When Atlas removes a temporary entry (UTC); NULL for permanent entries."),
        ),
        primary_key=("project_id", "cidr_block"),
        foreign_keys=(fk("project_id", "atlas_projects", "id"),),
    ),
)


class AtlasOrgUserRow(NamedTuple):
    """A row of ``atlas_org_users``."""

    id: str
    username: str
    first_name: str | None
    last_name: str | None
    country: str | None
    created_at: str
    last_auth: str | None
    mfa_enabled: int
    federated: int


class AtlasUserRoleRow(NamedTuple):
    """A row of ``atlas_user_roles``."""

    user_id: str
    scope: str
    project_id: str | None
    role_name: str


class AtlasProjectRow(NamedTuple):
    """A row of ``atlas_projects``."""

    id: str
    name: str
    org_id: str
    created: str


class AtlasClusterRow(NamedTuple):
    """A row of ``atlas_clusters``."""

    id: str
    project_id: str
    name: str
    cluster_type: str
    mongo_db_version: str
    provider_name: str
    region_name: str
    state_name: str
    paused: int


class AtlasDatabaseUserRow(NamedTuple):
    """A row of ``atlas_database_users``."""

    project_id: str
    username: str
    database_name: str
    aws_iam_type: str
    x509_type: str
    description: str | None
    delete_after_date: str | None


class AtlasDatabaseUserRoleRow(NamedTuple):
    """A row of ``atlas_database_user_roles``."""

    project_id: str
    username: str
    role_name: str
    database_name: str
    collection_name: str | None


class AtlasDatabaseUserScopeRow(NamedTuple):
    """A row of ``atlas_database_user_scopes``."""

    project_id: str
    username: str
    cluster_name: str


class AtlasApiKeyRow(NamedTuple):
    """A row of ``atlas_api_keys``."""

    id: str
    public_key: str
    description: str | None
    created: str


class AtlasApiKeyRoleRow(NamedTuple):
    """A row of ``atlas_api_key_roles``."""

    api_key_id: str
    scope: str
    project_id: str | None
    role_name: str


class AtlasApiKeyAccessListRow(NamedTuple):
    """A row of ``atlas_api_key_access_list``."""

    api_key_id: str
    cidr_block: str


class AtlasIpAccessListRow(NamedTuple):
    """A row of ``atlas_ip_access_list``."""

    project_id: str
    cidr_block: str
    comment: str | None
    delete_after_date: str | None
