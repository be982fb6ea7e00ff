"""Google Cloud: projects, IAM bindings with member strings, and service accounts with their keys."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from runner.world.org import AS_OF, DOMAIN, Org, Rows, ts
from runner.world.tables.gcp import GcpIamBindingRow, GcpProjectRow, GcpServiceAccountKeyRow, GcpServiceAccountRow
from runner.world.vendors.gws import WorkspaceDirectory

ORG = "organizations/493021884120"
FOLDERS = {
    "prod": "folders/330118842011",
    "nonprod": "folders/330118842012",
    "sandbox": "folders/330118842013",
    "legacy": "folders/330118842014",
}


PROJECTS = (
    ("corvid-prod-api", "prod"),
    ("corvid-prod-data", "prod"),
    ("corvid-prod-ml", "prod"),
    ("corvid-security-logs", None),
    ("corvid-billing-export", None),
    ("corvid-staging", "nonprod"),
    ("corvid-dev-platform", "nonprod"),
    ("corvid-dev-data", "nonprod"),
    ("corvid-dev-web", "nonprod"),
    ("corvid-public-assets", "prod"),
    ("corvid-sandbox-ml", "sandbox"),
    ("corvid-sandbox-hackweek", "sandbox"),
    ("corvid-sandbox-infra", "sandbox"),
    ("lumen-analytics-legacy", "legacy"),
    ("lumen-etl", "legacy"),
    ("corvid-ci", "nonprod"),
)


def generate(org: Org, workspace: WorkspaceDirectory) -> Rows:
    """Projects, bindings and service accounts, bound to the Workspace users and groups."""
    rng = org.rng
    ids = workspace.user_ids
    person_of = workspace.person_of
    projects: list[GcpProjectRow] = []
    for i, (pid, folder) in enumerate(PROJECTS):
        parent = FOLDERS[folder] if folder else ORG
        projects.append(
            GcpProjectRow(
                pid,
                str(710_000_000_000 + i * 104_729),
                pid.replace("-", " ").title(),
                parent,
                folder,
                "ACTIVE" if pid != "lumen-etl" else "DELETE_REQUESTED",
                ts(datetime(2019, 2, 1, tzinfo=AS_OF.tzinfo) + timedelta(days=90 * i)),
            )
        )
    bindings: set[GcpIamBindingRow] = set()

    def bind(resource: str, role: str, member: str, condition: str | None = None) -> None:
        bindings.add(GcpIamBindingRow(resource, role, member, condition))

    def proj(p: str) -> str:
        return f"projects/{p}"

    bind(ORG, "roles/resourcemanager.organizationAdmin", f"group:gcp-org-admins@{DOMAIN}")
    bind(ORG, "roles/billing.admin", f"group:gcp-billing-admins@{DOMAIN}")
    bind(ORG, "roles/browser", f"domain:{DOMAIN}")
    bind(ORG, "roles/iam.securityReviewer", f"group:security-alerts@{DOMAIN}")
    for project_id, folder in PROJECTS:
        if folder == "prod":
            bind(proj(project_id), "roles/owner", f"group:gcp-platform-admins@{DOMAIN}")
    bind(proj("corvid-prod-data"), "roles/bigquery.admin", f"group:data-platform@{DOMAIN}")
    bind(proj("corvid-dev-data"), "roles/bigquery.admin", f"group:data-platform@{DOMAIN}")
    # Engineers by primary email on non-production projects.
    eng_emails = [
        e
        for e, uid in ids.items()
        if uid in person_of and "eng" in org.by_pid(person_of[uid]).tags and not org.by_pid(person_of[uid]).left
    ]
    for e in rng.sample(eng_emails, 160):
        project = rng.choice([p for p, f in PROJECTS if f in ("nonprod", "sandbox")])
        bind(proj(project), rng.choice(("roles/editor", "roles/viewer", "roles/viewer")), f"user:{e}")
    for e in rng.sample(eng_emails, 12):
        bind(proj(rng.choice(("corvid-prod-api", "corvid-prod-ml"))), "roles/viewer", f"user:{e}")
    # Family 1: leavers (Workspace account suspended, or deleted) still bound directly.
    leavers = [
        p
        for p in org.people
        if p.left and "eng" in p.tags and p.pid not in org.claimed and p.termination and p.termination.year >= 2025
    ]
    for i, p in enumerate(org.pick(leavers, 4)):
        p.tags.add("gcp_leaver_binding")
        role = ("roles/owner", "roles/editor", "roles/bigquery.dataEditor", "roles/viewer")[i]
        bind(
            proj(("corvid-prod-data", "corvid-dev-platform", "corvid-prod-ml", "corvid-staging")[i]),
            role,
            f"user:{p.email}",
        )
    # Decoy: an active Lumen engineer bound by the old-domain address (resolves through an alias).
    lumen = [p for p in org.people if p.acquired and "eng" in p.tags and not p.left and p.pid not in org.claimed]
    for p in org.pick(lumen, 2):
        bind(proj("lumen-analytics-legacy"), "roles/editor", f"user:{p.old_email}")
    # Family 7: external principals and public exposure.
    bind(proj("corvid-prod-data"), "roles/bigquery.dataViewer", "domain:northbridge-consulting.com")
    bind(proj("corvid-dev-web"), "roles/editor", "user:consultant.ana@gmail.com")
    bind(proj("corvid-public-assets"), "roles/storage.objectViewer", "allUsers")
    bind(proj("corvid-staging"), "roles/run.invoker", "allUsers")
    bind(proj("lumen-analytics-legacy"), "roles/viewer", "allAuthenticatedUsers")
    bind(
        proj("corvid-sandbox-hackweek"),
        "roles/editor",
        "user:hackweek.judge@outlook.com",
        "expires 2026-03-01",
    )
    sas, keys = _service_accounts(org, bind)
    ordered = sorted(bindings, key=lambda b: (b.resource, b.role, b.member))
    return {
        "gcp_projects": projects,
        "gcp_iam_bindings": ordered,
        "gcp_service_accounts": sas,
        "gcp_service_account_keys": keys,
    }


def _service_accounts(
    org: Org, add: Callable[[str, str, str], None]
) -> tuple[list[GcpServiceAccountRow], list[GcpServiceAccountKeyRow]]:
    """Service accounts and their keys; ``add`` binds each account's role with ``generate``'s binder."""
    rng = org.rng
    sas: list[GcpServiceAccountRow] = []
    keys: list[GcpServiceAccountKeyRow] = []
    owners_ok = [p for p in org.people if "eng" in p.tags and not p.left]
    owners_gone = [
        p
        for p in org.people
        if "eng" in p.tags and p.left and p.pid not in org.claimed and p.termination and p.termination.year >= 2024
    ]
    gone = org.pick(owners_gone, 3)
    specs: tuple[tuple[str, str, str, str, list[int]], ...] = (
        # (project, name, role on the project, owner kind, user-managed key ages in days)
        ("corvid-prod-api", "api-runtime", "roles/cloudsql.client", "ok", []),
        ("corvid-prod-api", "deployer", "roles/owner", "gone", [540]),
        ("corvid-prod-data", "etl-writer", "roles/bigquery.dataEditor", "ok", [400, 20]),
        ("corvid-prod-data", "looker-reader", "roles/bigquery.dataViewer", "gone", [800]),
        ("corvid-prod-ml", "trainer", "roles/editor", "ok", [60]),
        ("corvid-ci", "ci-builder", "roles/owner", "ok", [1100]),
        ("corvid-security-logs", "log-sink", "roles/logging.admin", "ok", []),
        ("corvid-billing-export", "billing-export", "roles/bigquery.dataOwner", "none", [200]),
        ("lumen-analytics-legacy", "lumen-etl", "roles/owner", "gone", [1500, 1400]),
        ("corvid-dev-platform", "terraform", "roles/owner", "ok", [30]),
        ("corvid-staging", "staging-app", "roles/editor", "ok", []),
        ("corvid-sandbox-ml", "notebook", "roles/editor", "none", [95]),
        ("corvid-dev-web", "web-preview", "roles/run.admin", "ok", [10]),
    )
    gone_iter = iter(gone)
    for project, name, role, owner_kind, ages in specs:
        email = f"{name}@{project}.iam.gserviceaccount.com"
        owner = next(gone_iter) if owner_kind == "gone" else rng.choice(owners_ok) if owner_kind == "ok" else None
        if owner and owner_kind == "gone":
            owner.tags.add("gcp_sa_owner_left")
        desc = f"owner: {owner.email}" if owner else None
        unique_id = str(rng.randint(10**20, 10**21 - 1))
        sas.append(GcpServiceAccountRow(email, project, unique_id, name.replace("-", " ").title(), desc, 0))
        add(f"projects/{project}", role, f"serviceAccount:{email}")
        for age in ages:
            start = AS_OF - timedelta(days=age, hours=rng.randint(0, 20))
            keys.append(
                GcpServiceAccountKeyRow(
                    org.hexid(40),
                    email,
                    "USER_MANAGED",
                    "KEY_ALG_RSA_2048",
                    ts(start),
                    "9999-12-31T23:59:59Z",
                    0,
                )
            )
        for _ in range(2):
            start = AS_OF - timedelta(days=rng.randint(1, 80))
            keys.append(
                GcpServiceAccountKeyRow(
                    org.hexid(40),
                    email,
                    "SYSTEM_MANAGED",
                    "KEY_ALG_RSA_2048",
                    ts(start),
                    ts(start + timedelta(days=90)),
                    0,
                )
            )
    # Default compute service accounts hold Editor, as GCP grants by default.
    for project in ("corvid-prod-api", "corvid-staging", "corvid-sandbox-hackweek"):
        number = 710_000_000_000 + [p for p, _ in PROJECTS].index(project) * 104_729
        email = f"{number}-compute@developer.gserviceaccount.com"
        sas.append(
            GcpServiceAccountRow(
                email,
                project,
                str(rng.randint(10**20, 10**21 - 1)),
                "Compute Engine default service account",
                None,
                0,
            )
        )
        add(f"projects/{project}", "roles/editor", f"serviceAccount:{email}")
    # A disabled account with an old key: a decoy for "stale key" questions that ignore `disabled`.
    email = "old-exporter@corvid-billing-export.iam.gserviceaccount.com"
    unique_id = str(rng.randint(10**20, 10**21 - 1))
    sas.append(GcpServiceAccountRow(email, "corvid-billing-export", unique_id, "Old Exporter", None, 1))
    keys.append(
        GcpServiceAccountKeyRow(
            org.hexid(40),
            email,
            "USER_MANAGED",
            "KEY_ALG_RSA_1024",
            "2021-04-02T10:00:00Z",
            "9999-12-31T23:59:59Z",
            1,
        )
    )
    return sas, keys
