"""MongoDB Atlas: organization users and roles, projects and clusters, database users, API keys and
IP access lists."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Org, Row, Rows, at, ts
from runner.world.schema import Table, col, fk

ORG_ID = "5f1e2d3c4b5a69788796a5b4"

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

PROJECTS = ("prod-core", "prod-analytics", "staging", "dev", "sandbox", "lumen-legacy", "internal-tools")


def generate(org: Org) -> Rows:
    """Users, projects, clusters, database users, keys and access lists."""
    rng = org.rng
    pid = {name: org.hexid(24) for name in PROJECTS}
    projects = [
        (pid[n], n, ORG_ID, ts(datetime(2020, 2, 1, tzinfo=AS_OF.tzinfo) + timedelta(days=120 * i)))
        for i, n in enumerate(PROJECTS)
    ]
    clusters = []
    for n in PROJECTS:
        for j in range(1 if n in ("sandbox", "internal-tools") else rng.randint(2, 4)):
            clusters.append(
                (
                    org.hexid(24),
                    pid[n],
                    f"{n}-cluster{j}",
                    "SHARDED" if n == "prod-core" and j == 0 else "REPLICASET",
                    rng.choice(("6.0", "7.0", "7.0", "8.0")),
                    rng.choice(("AWS", "GCP")),
                    rng.choice(("US_EAST_1", "EU_WEST_1", "us-central1")),
                    "IDLE",
                    int(n == "sandbox"),
                )
            )
    users, roles = _users(org, pid)
    db_users, db_roles, db_scopes = _db_users(org, pid, clusters)
    keys, key_roles, key_acl = _api_keys(org, pid)
    acl = [
        (pid["prod-core"], "10.20.0.0/16", "Prod VPC peering", None),
        (pid["prod-core"], "203.0.113.10/32", "SF office egress", None),
        (pid["prod-analytics"], "0.0.0.0/0", "temporary: BI vendor onboarding", None),  # family 9
        (pid["prod-analytics"], "10.30.0.0/16", "Data VPC", None),
        (pid["staging"], "10.40.0.0/16", "Staging VPC", None),
        (pid["staging"], "198.51.100.0/24", "CI runners", None),
        (pid["dev"], "0.0.0.0/0", "dev convenience", None),  # family 9
        (pid["sandbox"], "0.0.0.0/0", "workshop", "2026-07-02T00:00:00Z"),  # temporary, still open
        (pid["lumen-legacy"], "0.0.0.0/1", "legacy app servers", None),  # half the internet
        (pid["lumen-legacy"], "128.0.0.0/1", "legacy app servers", None),
        (pid["internal-tools"], "192.0.2.44/32", "London office", None),
    ]
    return {
        "atlas_org_users": users,
        "atlas_user_roles": roles,
        "atlas_projects": projects,
        "atlas_clusters": clusters,
        "atlas_database_users": db_users,
        "atlas_database_user_roles": db_roles,
        "atlas_database_user_scopes": db_scopes,
        "atlas_api_keys": keys,
        "atlas_api_key_roles": key_roles,
        "atlas_api_key_access_list": key_acl,
        "atlas_ip_access_list": acl,
    }


def _users(org: Org, pid: dict[str, str]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    rng = org.rng
    users: list[tuple[object, ...]] = []
    roles: set[tuple[object, ...]] = set()
    pool = [p for p in org.people if ({"eng", "data", "sre"} & p.tags) and not p.left]
    chosen = rng.sample(pool, 95)
    leavers = org.pick(
        [
            p
            for p in org.people
            if p.left and ({"eng", "data"} & p.tags) and p.termination and p.termination > date(2025, 1, 1)
        ],
        4,
    )
    lapsed = [p for p in org.people if "lapsed_contract" in p.tags and "eng" in p.tags]
    for p in chosen + leavers + lapsed[:2]:
        uid = org.hexid(24)
        username = p.old_email if p.acquired and p.old_email and rng.random() < 0.5 else p.email
        federated = int(rng.random() < 0.7)
        last = (
            org.when(at(p.termination) + timedelta(days=1), AS_OF)
            if p in leavers[:2] and p.termination
            else org.when(AS_OF - timedelta(days=60), AS_OF)
        )
        if p in leavers:
            p.tags.add("atlas_leaver")
        users.append(
            (
                uid,
                username,
                p.first,
                p.last,
                rng.choice(("US", "GB", "DE", "CA", "IN")),
                ts(at(max(p.start, date(2020, 3, 1)))),
                ts(last),
                int(not federated and rng.random() < 0.8),
                federated,
            )
        )
        roles.add((uid, "org", None, "ORG_MEMBER"))
        for proj in rng.sample(PROJECTS, rng.randint(1, 3)):
            roles.add(
                (
                    uid,
                    "project",
                    pid[proj],
                    rng.choice(
                        (
                            "GROUP_READ_ONLY",
                            "GROUP_DATA_ACCESS_READ_WRITE",
                            "GROUP_DATA_ACCESS_READ_ONLY",
                            "GROUP_CLUSTER_MANAGER",
                        )
                    ),
                )
            )
    # Owners: a few platform people; one without MFA on a password login (family 3); one leaver.
    owners = [u for u in users if u[8] == 1][:3]
    for u in owners:
        roles.add((u[0], "org", None, "ORG_OWNER"))
    weak = next(u for u in users if u[8] == 0 and u[7] == 0)
    roles.add((weak[0], "org", None, "ORG_OWNER"))
    leaver_row = next(u for u in users if u[1] in {p.email for p in leavers} | {p.old_email for p in leavers})
    roles.add((leaver_row[0], "project", pid["prod-core"], "GROUP_OWNER"))
    # An account matching nobody, with project owner on production.
    orphan = org.hexid(24)
    users.append(
        (
            orphan,
            "dba-contractor@corvid.io",
            None,
            None,
            "US",
            "2023-08-01T10:00:00Z",
            "2026-06-20T11:00:00Z",
            0,
            0,
        )
    )
    roles.add((orphan, "org", None, "ORG_MEMBER"))
    roles.add((orphan, "project", pid["prod-core"], "GROUP_OWNER"))
    return users, sorted(roles, key=lambda r: (str(r[0]), str(r[1]), str(r[2]), str(r[3])))


def _db_users(
    org: Org, pid: dict[str, str], clusters: Sequence[Row]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    rng = org.rng
    users: list[tuple[object, ...]] = []
    roles: list[tuple[object, ...]] = []
    scopes: list[tuple[object, ...]] = []
    prod = "539182746021"

    def dbu(
        project: str,
        name: str,
        role: str,
        db: str = "admin",
        *,
        iam: str = "NONE",
        scope: list[str] | None = None,
        desc: str | None = None,
        temp: str | None = None,
    ) -> None:
        users.append((pid[project], name, "$external" if iam != "NONE" else db, iam, "NONE", desc, temp))
        roles.append(
            (
                pid[project],
                name,
                role,
                "admin" if role.endswith("AnyDatabase") or role == "atlasAdmin" else db,
                None,
            )
        )
        for c in scope or []:
            scopes.append((pid[project], name, c))

    names = {str(c[2]) for c in clusters}
    for proj in PROJECTS:
        for k in range(rng.randint(3, 8)):
            svc = rng.choice(("api", "worker", "etl", "reporting", "search", "billing"))
            db = f"{svc}db"
            cl = sorted(n for n in names if n.startswith(proj))
            dbu(
                proj,
                f"{svc}-{proj}-{k}",
                rng.choice(("readWrite", "read")),
                db,
                scope=[cl[0]] if cl and k % 2 == 0 else None,
            )
    dbu("prod-core", "admin", "atlasAdmin", desc="initial admin, shared password")
    dbu(
        "prod-core",
        f"arn:aws:iam::{prod}:role/service-role/ec2-app-instance",
        "readWrite",
        "core",
        iam="ROLE",
        scope=["prod-core-cluster0"],
    )
    dbu("prod-core", f"arn:aws:iam::{prod}:role/vendor-audit-readonly", "readAnyDatabase", iam="ROLE")
    dbu("prod-analytics", "bi-vendor", "readAnyDatabase", desc="BI vendor connector")
    dbu(
        "prod-analytics",
        "migration-tmp",
        "readWriteAnyDatabase",
        desc="one-off migration",
        temp="2025-12-31T00:00:00Z",
    )
    dbu("lumen-legacy", "lumen_root", "atlasAdmin", desc="legacy Lumen application")
    dbu("dev", "dev-admin", "atlasAdmin", scope=["dev-cluster0"])
    return users, roles, scopes


def _api_keys(
    org: Org, pid: dict[str, str]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    specs: tuple[tuple[str, list[tuple[str, str | None, str]], list[str]], ...] = (
        ("terraform-automation", [("org", None, "ORG_OWNER")], ["10.50.0.0/16"]),
        ("ci-deployer", [("project", "staging", "GROUP_CLUSTER_MANAGER")], ["198.51.100.0/24"]),
        ("backup-exporter", [("project", "prod-core", "GROUP_READ_ONLY")], []),
        ("lumen-ops-script", [("org", None, "ORG_OWNER")], []),  # org owner, usable from anywhere
        ("billing-report", [("org", None, "ORG_BILLING_ADMIN")], ["203.0.113.10/32"]),
        ("datadog-monitoring", [("org", None, "ORG_READ_ONLY")], ["0.0.0.0/0"]),
    )
    keys: list[Row] = []
    roles: list[Row] = []
    acl: list[Row] = []
    for i, (desc, key_roles, cidrs) in enumerate(specs):
        kid = org.hexid(24)
        keys.append(
            (
                kid,
                org.token("abcdefghijklmnopqrstuvwxyz", 8),
                desc,
                ts(datetime(2021, 1, 1, tzinfo=AS_OF.tzinfo) + timedelta(days=150 * i)),
            )
        )
        for scope, proj, role in key_roles:
            roles.append((kid, scope, pid[proj] if proj else None, role))
        for c in cidrs:
            acl.append((kid, c))
    return keys, roles, acl
