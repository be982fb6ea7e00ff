"""MongoDB Atlas: organization users and roles, projects and clusters, database users, API keys and
IP access lists."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Org, Rows, at, ts
from runner.world.tables.atlas import (
    AtlasApiKeyAccessListRow,
    AtlasApiKeyRoleRow,
    AtlasApiKeyRow,
    AtlasClusterRow,
    AtlasDatabaseUserRoleRow,
    AtlasDatabaseUserRow,
    AtlasDatabaseUserScopeRow,
    AtlasIpAccessListRow,
    AtlasOrgUserRow,
    AtlasProjectRow,
    AtlasUserRoleRow,
)

ORG_ID = "5f1e2d3c4b5a69788796a5b4"


PROJECTS = ("prod-core", "prod-analytics", "staging", "dev", "sandbox", "lumen-legacy", "internal-tools")


def generate(org: Org) -> Rows:
    """Users, projects, clusters, database users, keys and access lists."""
    rng = org.rng
    pid = {name: org.hexid(24) for name in PROJECTS}
    projects = [
        AtlasProjectRow(pid[n], n, ORG_ID, ts(datetime(2020, 2, 1, tzinfo=AS_OF.tzinfo) + timedelta(days=120 * i)))
        for i, n in enumerate(PROJECTS)
    ]
    clusters: list[AtlasClusterRow] = []
    for n in PROJECTS:
        for j in range(1 if n in ("sandbox", "internal-tools") else rng.randint(2, 4)):
            clusters.append(
                AtlasClusterRow(
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
        AtlasIpAccessListRow(pid["prod-core"], "10.20.0.0/16", "Prod VPC peering", None),
        AtlasIpAccessListRow(pid["prod-core"], "203.0.113.10/32", "SF office egress", None),
        AtlasIpAccessListRow(pid["prod-analytics"], "0.0.0.0/0", "temporary: BI vendor onboarding", None),  # family 9
        AtlasIpAccessListRow(pid["prod-analytics"], "10.30.0.0/16", "Data VPC", None),
        AtlasIpAccessListRow(pid["staging"], "10.40.0.0/16", "Staging VPC", None),
        AtlasIpAccessListRow(pid["staging"], "198.51.100.0/24", "CI runners", None),
        AtlasIpAccessListRow(pid["dev"], "0.0.0.0/0", "dev convenience", None),  # family 9
        AtlasIpAccessListRow(pid["sandbox"], "0.0.0.0/0", "workshop", "2026-07-02T00:00:00Z"),  # temporary, still open
        AtlasIpAccessListRow(pid["lumen-legacy"], "0.0.0.0/1", "legacy app servers", None),  # half the internet
        AtlasIpAccessListRow(pid["lumen-legacy"], "128.0.0.0/1", "legacy app servers", None),
        AtlasIpAccessListRow(pid["internal-tools"], "192.0.2.44/32", "London office", None),
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


def _users(org: Org, pid: dict[str, str]) -> tuple[list[AtlasOrgUserRow], list[AtlasUserRoleRow]]:
    rng = org.rng
    users: list[AtlasOrgUserRow] = []
    roles: set[AtlasUserRoleRow] = set()
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
            AtlasOrgUserRow(
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
        roles.add(AtlasUserRoleRow(uid, "org", None, "ORG_MEMBER"))
        for proj in rng.sample(PROJECTS, rng.randint(1, 3)):
            roles.add(
                AtlasUserRoleRow(
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
    owners = [u for u in users if u.federated == 1][:3]
    for u in owners:
        roles.add(AtlasUserRoleRow(u.id, "org", None, "ORG_OWNER"))
    weak = next(u for u in users if u.federated == 0 and u.mfa_enabled == 0)
    roles.add(AtlasUserRoleRow(weak.id, "org", None, "ORG_OWNER"))
    leaver_row = next(u for u in users if u.username in {p.email for p in leavers} | {p.old_email for p in leavers})
    roles.add(AtlasUserRoleRow(leaver_row.id, "project", pid["prod-core"], "GROUP_OWNER"))
    # An account matching nobody, with project owner on production.
    orphan = org.hexid(24)
    users.append(
        AtlasOrgUserRow(
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
    roles.add(AtlasUserRoleRow(orphan, "org", None, "ORG_MEMBER"))
    roles.add(AtlasUserRoleRow(orphan, "project", pid["prod-core"], "GROUP_OWNER"))
    # str() sorts a NULL project as the text 'None', as the tuples were always sorted.
    return users, sorted(roles, key=lambda r: (r.user_id, r.scope, str(r.project_id), r.role_name))


def _db_users(
    org: Org, pid: dict[str, str], clusters: Sequence[AtlasClusterRow]
) -> tuple[list[AtlasDatabaseUserRow], list[AtlasDatabaseUserRoleRow], list[AtlasDatabaseUserScopeRow]]:
    rng = org.rng
    users: list[AtlasDatabaseUserRow] = []
    roles: list[AtlasDatabaseUserRoleRow] = []
    scopes: list[AtlasDatabaseUserScopeRow] = []
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
        database = "$external" if iam != "NONE" else db
        users.append(AtlasDatabaseUserRow(pid[project], name, database, iam, "NONE", desc, temp))
        roles.append(
            AtlasDatabaseUserRoleRow(
                pid[project],
                name,
                role,
                "admin" if role.endswith("AnyDatabase") or role == "atlasAdmin" else db,
                None,
            )
        )
        for c in scope or []:
            scopes.append(AtlasDatabaseUserScopeRow(pid[project], name, c))

    names = {c.name for c in clusters}
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
) -> tuple[list[AtlasApiKeyRow], list[AtlasApiKeyRoleRow], list[AtlasApiKeyAccessListRow]]:
    specs: tuple[tuple[str, list[tuple[str, str | None, str]], list[str]], ...] = (
        ("terraform-automation", [("org", None, "ORG_OWNER")], ["10.50.0.0/16"]),
        ("ci-deployer", [("project", "staging", "GROUP_CLUSTER_MANAGER")], ["198.51.100.0/24"]),
        ("backup-exporter", [("project", "prod-core", "GROUP_READ_ONLY")], []),
        ("lumen-ops-script", [("org", None, "ORG_OWNER")], []),  # org owner, usable from anywhere
        ("billing-report", [("org", None, "ORG_BILLING_ADMIN")], ["203.0.113.10/32"]),
        ("datadog-monitoring", [("org", None, "ORG_READ_ONLY")], ["0.0.0.0/0"]),
    )
    keys: list[AtlasApiKeyRow] = []
    roles: list[AtlasApiKeyRoleRow] = []
    acl: list[AtlasApiKeyAccessListRow] = []
    for i, (desc, key_roles, cidrs) in enumerate(specs):
        kid = org.hexid(24)
        keys.append(
            AtlasApiKeyRow(
                kid,
                org.token("abcdefghijklmnopqrstuvwxyz", 8),
                desc,
                ts(datetime(2021, 1, 1, tzinfo=AS_OF.tzinfo) + timedelta(days=150 * i)),
            )
        )
        for scope, proj, role in key_roles:
            roles.append(AtlasApiKeyRoleRow(kid, scope, pid[proj] if proj else None, role))
        for c in cidrs:
            acl.append(AtlasApiKeyAccessListRow(kid, c))
    return keys, roles, acl
