"""The GitHub tables: their declarations (``TABLES``, from which the DDL and the docs are rendered),
and one typed row per table, whose fields are that table's columns in order (held to them by
``runner.world.tables.declaration_problems``)."""

from __future__ import annotations

from typing import NamedTuple

from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "github_org_members",
        "Members of the `corvid-systems` organization.",
        (
            col("login", "GitHub login (chosen by the user).", required=True),
            col("id", "Numeric GitHub user id.", "INTEGER", required=True),
            col("role", "`admin` (organization owner) or `member`.", required=True),
            col("two_factor_enabled", "1 if the account has 2FA enabled.", "INTEGER", required=True),
            col("name", "Public profile name, if the user set one."),
            col("created_at", "When the GitHub account was created (UTC)."),
        ),
        primary_key=("login",),
    ),
    Table(
        "github_outside_collaborators",
        "People who are not members but have been added to one or more repositories.",
        (
            col("login", "GitHub login.", required=True),
            col("id", "Numeric GitHub user id.", "INTEGER", required=True),
            col("two_factor_enabled", "1 if the account has 2FA enabled.", "INTEGER", required=True),
            col("name", "Public profile name, if any."),
        ),
        primary_key=("login",),
    ),
    Table(
        "github_saml_identities",
        "SAML SSO identities linked to organization members (GraphQL `samlIdentityProvider.externalIdentities`). "
        "`name_id` is what the IdP sent at the member's last SSO sign-in.",
        (
            col("login", "`github_org_members.login`.", required=True),
            col("name_id", "SAML NameID from the IdP (the IdP login).", required=True),
            col("linked_at", "When the identity was linked (UTC)."),
        ),
        primary_key=("login",),
        foreign_keys=(fk("login", "github_org_members", "login"),),
    ),
    Table(
        "github_teams",
        "Teams. A child team inherits the repository access of its parent team.",
        (
            col("id", "Team id.", "INTEGER", required=True),
            col("slug", "Team slug.", required=True),
            col("name", "Team name.", required=True),
            col("privacy", "`closed` (visible) or `secret`.", required=True),
            col("parent_team_id", "`github_teams.id` of the parent team; NULL for top-level teams.", "INTEGER"),
        ),
        primary_key=("id",),
        foreign_keys=(fk("parent_team_id", "github_teams", "id"),),
    ),
    Table(
        "github_team_members",
        "Direct members of each team (membership in a child team does not appear on the parent).",
        (
            col("team_id", "`github_teams.id`.", "INTEGER", required=True),
            col("login", "Member login.", required=True),
            col("role", "`maintainer` or `member`.", required=True),
        ),
        primary_key=("team_id", "login"),
        foreign_keys=(fk("team_id", "github_teams", "id"),),
    ),
    Table(
        "github_repos",
        "Repositories owned by the organization.",
        (
            col("id", "Repository id.", "INTEGER", required=True),
            col("name", "Repository name.", required=True),
            col("full_name", "`corvid-systems/<name>`.", required=True),
            col("visibility", "`public`, `private` or `internal`.", required=True),
            col("archived", "1 if archived (read-only).", "INTEGER", required=True),
            col("default_branch", "Default branch name.", required=True),
            col("created_at", "Creation time (UTC).", required=True),
            col("pushed_at", "Last push (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "github_team_repos",
        "Repository permissions granted to teams (inherited by child teams).",
        (
            col("team_id", "`github_teams.id`.", "INTEGER", required=True),
            col("repo_id", "`github_repos.id`.", "INTEGER", required=True),
            col("permission", "`pull`, `triage`, `push`, `maintain` or `admin`.", required=True),
        ),
        primary_key=("team_id", "repo_id"),
        foreign_keys=(fk("team_id", "github_teams", "id"), fk("repo_id", "github_repos", "id")),
    ),
    Table(
        "github_repo_collaborators",
        "Users granted access to a repository directly (members or outside collaborators).",
        (
            col("repo_id", "`github_repos.id`.", "INTEGER", required=True),
            col("login", "User login.", required=True),
            col("permission", "`pull`, `triage`, `push`, `maintain` or `admin`.", required=True),
            col(
                "affiliation",
                "`direct` (an organization member) or `outside` (an outside collaborator).",
                required=True,
            ),
        ),
        primary_key=("repo_id", "login"),
        foreign_keys=(fk("repo_id", "github_repos", "id"),),
    ),
    Table(
        "github_deploy_keys",
        "SSH deploy keys on repositories.",
        (
            col("id", "Key id.", "INTEGER", required=True),
            col("repo_id", "`github_repos.id`.", "INTEGER", required=True),
            col("title", "Key title.", required=True),
            col("read_only", "1 for read-only keys, 0 for keys that can push.", "INTEGER", required=True),
            col("added_by", "Login of the user who added the key."),
            col("created_at", "Creation time (UTC).", required=True),
            col("last_used", "Last use (UTC); NULL if never used."),
        ),
        primary_key=("id",),
        foreign_keys=(fk("repo_id", "github_repos", "id"),),
    ),
)


class GithubOrgMemberRow(NamedTuple):
    """A row of ``github_org_members``."""

    login: str
    id: int
    role: str
    two_factor_enabled: int
    name: str | None
    created_at: str | None


class GithubOutsideCollaboratorRow(NamedTuple):
    """A row of ``github_outside_collaborators``."""

    login: str
    id: int
    two_factor_enabled: int
    name: str | None


class GithubSamlIdentityRow(NamedTuple):
    """A row of ``github_saml_identities``."""

    login: str
    name_id: str
    linked_at: str | None


class GithubTeamRow(NamedTuple):
    """A row of ``github_teams``."""

    id: int
    slug: str
    name: str
    privacy: str
    parent_team_id: int | None


class GithubTeamMemberRow(NamedTuple):
    """A row of ``github_team_members``."""

    team_id: int
    login: str
    role: str


class GithubRepoRow(NamedTuple):
    """A row of ``github_repos``."""

    id: int
    name: str
    full_name: str
    visibility: str
    archived: int
    default_branch: str
    created_at: str
    pushed_at: str | None


class GithubTeamRepoRow(NamedTuple):
    """A row of ``github_team_repos``."""

    team_id: int
    repo_id: int
    permission: str


class GithubRepoCollaboratorRow(NamedTuple):
    """A row of ``github_repo_collaborators``."""

    repo_id: int
    login: str
    permission: str
    affiliation: str


class GithubDeployKeyRow(NamedTuple):
    """A row of ``github_deploy_keys``."""

    id: int
    repo_id: int
    title: str
    read_only: int
    added_by: str | None
    created_at: str
    last_used: str | None
