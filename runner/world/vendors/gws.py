"""Google Workspace: users with aliases and 2-Step Verification, groups with external and nested
members, admin roles, and third-party OAuth grants."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, DOMAIN, Generated, Org, Rows, at, ts
from runner.world.tables.gws import (
    GwsAdminRoleRow,
    GwsGroupMemberRow,
    GwsGroupRow,
    GwsOauthTokenRow,
    GwsRoleAssignmentRow,
    GwsUserAliasRow,
    GwsUserRow,
)

APPS = (
    # (name, scopes, anonymous, share of users)
    ("Slack", "openid email profile", 0, 0.7),
    ("Zoom", "openid email profile https://www.googleapis.com/auth/calendar.events", 0, 0.6),
    ("Calendly", "https://www.googleapis.com/auth/calendar", 0, 0.12),
    ("Grammarly", "openid email profile", 0, 0.15),
    ("Miro", "openid email profile https://www.googleapis.com/auth/drive.file", 0, 0.2),
    ("Loom", "openid email profile", 0, 0.1),
    ("DocuSign", "https://www.googleapis.com/auth/drive.file", 0, 0.05),
    ("Superhuman", "https://mail.google.com/ https://www.googleapis.com/auth/contacts", 0, 0.01),
    ("PDF Merge Free", "https://www.googleapis.com/auth/drive", 1, 0.0),
    ("MailTracker Plus", "https://mail.google.com/ https://www.googleapis.com/auth/gmail.send", 1, 0.0),
    (
        "Org Chart Sync",
        "https://www.googleapis.com/auth/admin.directory.user https://www.googleapis.com/auth/admin.directory.group",
        1,
        0.0,
    ),
    (
        "Backupify",
        "https://www.googleapis.com/auth/drive https://mail.google.com/ "
        "https://www.googleapis.com/auth/admin.directory.user.readonly",
        0,
        0.0,
    ),
)
EXTERNAL = (
    "consultant.ana@gmail.com",
    "m.keller@northbridge-consulting.com",
    "ops@pixelforge.design",
    "j.owusu@talentbridge.io",
    "audit.team@acme-audit.co.uk",
    "r.vance@yahoo.com",
)
ROLES = (
    ("_SEED_ADMIN_ROLE", "Super Admin", 1, 1),
    ("_GROUPS_ADMIN_ROLE", "Groups Administrator", 0, 1),
    ("_USER_MANAGEMENT_ADMIN_ROLE", "User Management Administrator", 0, 1),
    ("_HELP_DESK_ADMIN_ROLE", "Help Desk Administrator", 0, 1),
    ("_SERVICES_ADMIN_ROLE", "Services Administrator", 0, 1),
    ("_MOBILE_ADMIN_ROLE", "Mobile Administrator", 0, 1),
    ("Security Reviewer", "Custom: read security settings", 0, 0),
)


@dataclass(frozen=True)
class WorkspaceDirectory:
    """What Google Workspace publishes for Google Cloud, whose IAM members are Workspace addresses."""

    # Workspace user id by primary email, for every user that still exists.
    user_ids: Mapping[str, str]
    # HR pid by Workspace user id, for the users that belong to a person.
    person_of: Mapping[str, str]


def generate(org: Org) -> Generated[WorkspaceDirectory]:
    """Users, groups, roles and OAuth grants."""
    rng = org.rng
    rows_users: list[GwsUserRow] = []
    aliases: set[GwsUserAliasRow] = set()
    ids: dict[str, str] = {}  # primary email -> id
    person_of: dict[str, str] = {}
    leavers = [p for p in org.people if p.left and p.termination and p.termination > date(2025, 5, 1)]
    unsuspended = {p.pid for p in org.pick(leavers, 5)}
    next_id = [104_000_000_000_000_000_000]

    def new_id() -> str:
        next_id[0] += rng.randint(1_000, 9_000_000)
        return str(next_id[0])

    for p in org.people:
        if p.left and p.pid not in unsuspended:
            assert p.termination is not None
            if (AS_OF.date() - p.termination).days > 90:
                continue  # deleted after the 90-day retention
        uid = new_id()
        ids[p.email] = uid
        person_of[uid] = p.pid
        if p.pid in unsuspended:
            p.tags.add("gws_active_leaver")
        ou = (
            "/Contractors"
            if p.employment_type == "Contractor"
            else ("/Lumen" if p.acquired else f"/Employees/{p.department}")
        )
        enrolled = rng.random() < 0.93
        enforced = ou not in ("/Contractors", "/Lumen")
        suspended = int(p.left and p.pid not in unsuspended)
        if p.left and p.termination:
            last = org.when(at(p.termination) - timedelta(days=4), at(p.termination, 18))
            if p.pid in unsuspended:
                last = org.when(at(p.termination) + timedelta(days=3), AS_OF - timedelta(days=1))
        else:
            last = org.when(AS_OF - timedelta(days=14), AS_OF - timedelta(hours=1))
        rows_users.append(
            GwsUserRow(
                uid,
                p.email,
                p.name,
                ou,
                0,
                0,
                int(enrolled),
                int(enforced),
                suspended,
                0,
                ts(at(max(p.start, date(2016, 1, 1)) - timedelta(days=2), 12)),
                ts(last),
            )
        )
        if p.old_email:
            aliases.add(GwsUserAliasRow(uid, p.old_email))
        if rng.random() < 0.3:
            aliases.add(GwsUserAliasRow(uid, f"{p.handle}@{DOMAIN}"))
    for local, name, ou in (
        ("gws-admin", "Workspace Admin", "/Service Accounts"),
        ("it-automation", "IT Automation", "/Service Accounts"),
        ("recruiting-shared", "Recruiting Shared Inbox", "/Service Accounts"),
        ("old-intern-2019", "Intern Account", "/Employees/Engineering"),
    ):
        uid = new_id()
        email = f"{local}@{DOMAIN}"
        ids[email] = uid
        rows_users.append(
            GwsUserRow(
                uid,
                email,
                name,
                ou,
                0,
                0,
                1 if local == "gws-admin" else 0,
                0,
                0,
                0,
                "2019-08-01T10:00:00Z",
                "2024-02-11T09:00:00Z" if local.startswith("old") else ts(org.when(AS_OF - timedelta(days=30), AS_OF)),
            )
        )
    # The admin plants below change users' flags; the rows are immutable, so each change replaces the
    # user's row here, in the users' order.
    row_of = {r.id: r for r in rows_users}
    people_rows = [r for r in rows_users if r.id in person_of]
    it_rows = [
        r
        for r in people_rows
        if "it" in org.by_pid(person_of[r.id]).tags
        and not r.suspended
        and org.by_pid(person_of[r.id]).status == "active"
    ]
    roles: list[GwsRoleAssignmentRow] = []
    role_ids = {name: str(9_170_000_000_000 + i * 11) for i, (name, *_rest) in enumerate(ROLES)}

    def grant(role: str, uid: str, scope: str = "CUSTOMER", ou: str | None = None) -> None:
        roles.append(GwsRoleAssignmentRow(str(len(roles) + 5_550_000_000), role_ids[role], uid, scope, ou))
        if role == "_SEED_ADMIN_ROLE":
            row_of[uid] = row_of[uid]._replace(is_admin=1)
        else:
            row_of[uid] = row_of[uid]._replace(is_delegated_admin=1)

    def enrol_2sv(uid: str, enrolled: int) -> None:
        row_of[uid] = row_of[uid]._replace(is_enrolled_in_2sv=enrolled)

    supers = [r.id for r in it_rows[:3]]
    for uid in supers:
        grant("_SEED_ADMIN_ROLE", uid)
        enrol_2sv(uid, 1)
    grant("_SEED_ADMIN_ROLE", ids[f"gws-admin@{DOMAIN}"])
    # Family 3: a super admin who never enrolled in 2SV.
    weak = it_rows[3].id
    grant("_SEED_ADMIN_ROLE", weak)
    enrol_2sv(weak, 0)
    # Family 11: a dormant super admin.
    dormant = it_rows[4].id
    grant("_SEED_ADMIN_ROLE", dormant)
    enrol_2sv(dormant, 1)
    row_of[dormant] = row_of[dormant]._replace(last_login_time="2025-12-02T07:55:00Z")
    # Family 1: a leaver whose account was never suspended holds a delegated admin role.
    leaver_uid = next(r.id for r in people_rows if "gws_active_leaver" in org.by_pid(person_of[r.id]).tags)
    grant("_USER_MANAGEMENT_ADMIN_ROLE", leaver_uid)
    for r in it_rows[5:10]:
        grant("_HELP_DESK_ADMIN_ROLE", r.id, "ORG_UNIT", "/Employees")
    for r in it_rows[10:12]:
        grant("_GROUPS_ADMIN_ROLE", r.id)
    grant("_SERVICES_ADMIN_ROLE", ids[f"it-automation@{DOMAIN}"])
    # A decoy: the 2SV-less user here holds only a read-only custom role.
    decoy = next(
        r
        for r in (row_of[p.id] for p in people_rows)
        if r.is_enrolled_in_2sv == 0 and not r.suspended and r.is_admin == 0
    )
    grant("Security Reviewer", decoy.id)
    rows_users = list(row_of.values())
    for pid_row in (supers[0], weak, dormant):
        org.by_pid(person_of[pid_row]).tags.add("gws_super_admin")
    out_groups, out_members = _groups(org, rows_users, ids, person_of)
    rows: Rows = {
        "gws_users": rows_users,
        "gws_user_aliases": sorted(aliases),
        "gws_groups": out_groups,
        "gws_group_members": out_members,
        "gws_admin_roles": [GwsAdminRoleRow(role_ids[n], n, d, s, sys) for n, d, s, sys in ROLES],
        "gws_role_assignments": roles,
        "gws_oauth_tokens": _oauth(org, rows_users, [*supers, weak]),
    }
    return Generated(rows, WorkspaceDirectory(user_ids=ids, person_of=person_of))


def _groups(
    org: Org, rows_users: list[GwsUserRow], ids: dict[str, str], person_of: dict[str, str]
) -> tuple[list[GwsGroupRow], list[GwsGroupMemberRow]]:
    rng = org.rng
    groups: list[GwsGroupRow] = []
    gid_of: dict[str, str] = {}
    members: dict[tuple[str, str], GwsGroupMemberRow] = {}

    def group(local: str, name: str, desc: str, external: int = 0) -> None:
        gid = "0" + org.hexid(14)
        email = f"{local}@{DOMAIN}"
        gid_of[email] = gid
        groups.append(GwsGroupRow(gid, email, name, desc, external))

    def add(group_email: str, member_email: str, role: str = "MEMBER", alias_of: str | None = None) -> None:
        gid = gid_of[group_email]
        if alias_of is not None:
            # Added by an alias: the directory still knows whose address it is.
            members[(gid, member_email)] = GwsGroupMemberRow(gid, member_email, alias_of, role, "USER", "ACTIVE")
        elif member_email in gid_of:
            members[(gid, member_email)] = GwsGroupMemberRow(
                gid, member_email, gid_of[member_email], role, "GROUP", "ACTIVE"
            )
        elif member_email in ids:
            row = next(r for r in rows_users if r.id == ids[member_email])
            members[(gid, member_email)] = GwsGroupMemberRow(
                gid,
                member_email,
                ids[member_email],
                role,
                "USER",
                "SUSPENDED" if row.suspended else "ACTIVE",
            )
        else:
            members[(gid, member_email)] = GwsGroupMemberRow(gid, member_email, None, role, "USER", None)

    active = [r for r in rows_users if not r.suspended and r.id in person_of]
    depts = sorted({org.by_pid(person_of[r.id]).department for r in active})
    for d in depts:
        group(d.lower().replace(" ", "-"), d, f"Everyone in {d}")
    for local, name, desc, ext in (
        ("all-staff", "All Staff", "Company-wide announcements", 0),
        ("gcp-org-admins", "GCP Organization Admins", "Holds organization-level roles in Google Cloud", 0),
        ("gcp-platform-admins", "GCP Platform Admins", "Project owners for platform projects", 0),
        ("sre-leads", "SRE Leads", "Site reliability leads", 0),
        ("gcp-billing-admins", "GCP Billing Admins", "Billing account administrators", 0),
        ("data-platform", "Data Platform", "Data engineering team", 0),
        ("security-alerts", "Security Alerts", "Alert fan-out list", 0),
        ("partners-northbridge", "Northbridge Consulting", "Shared workspace with Northbridge", 1),
        ("board-materials", "Board Materials", "Board of directors document sharing", 1),
        ("vendor-support", "Vendor Support", "Third-party support escalations", 1),
        ("lumen-alumni", "Lumen Team", "Former Lumen Analytics staff", 1),
        ("design-agency", "Design Agency", "Brand work with the design agency", 1),
    ):
        group(local, name, desc, ext)
    for r in active:
        p = org.by_pid(person_of[r.id])
        add(f"{p.department.lower().replace(' ', '-')}@{DOMAIN}", r.primary_email)
        if p.acquired:
            # Lumen staff are listed under their old-domain alias: internal, not external.
            add(f"lumen-alumni@{DOMAIN}", p.old_email or r.primary_email, alias_of=r.id)
    add(f"all-staff@{DOMAIN}", f"all-staff@{DOMAIN}".replace("all-staff", "engineering"))
    members[(gid_of[f"all-staff@{DOMAIN}"], "C0corvid")] = GwsGroupMemberRow(
        gid_of[f"all-staff@{DOMAIN}"],
        "C0corvid",
        None,
        "MEMBER",
        "CUSTOMER",
        None,
    )
    sre = [r for r in active if "sre" in org.by_pid(person_of[r.id]).tags]
    eng = [r for r in active if "eng" in org.by_pid(person_of[r.id]).tags]
    data = [r for r in active if "data" in org.by_pid(person_of[r.id]).tags]
    for r in sre[:4]:
        add(f"sre-leads@{DOMAIN}", r.primary_email)
    # Family 8: org-level GCP admin reaches sre-leads through nesting, and through it, one non-SRE.
    add(f"gcp-org-admins@{DOMAIN}", f"sre-leads@{DOMAIN}")
    add(f"gcp-org-admins@{DOMAIN}", sre[4].primary_email, "OWNER")
    add(f"sre-leads@{DOMAIN}", eng[40].primary_email)
    org.by_pid(person_of[eng[40].id]).tags.add("gcp_nested_admin")
    for r in sre[5:9]:
        add(f"gcp-platform-admins@{DOMAIN}", r.primary_email)
    add(f"gcp-platform-admins@{DOMAIN}", f"data-platform@{DOMAIN}")
    for r in data[:12]:
        add(f"data-platform@{DOMAIN}", r.primary_email)
    # A leaver (account still present but suspended) lingers in a privileged group: a decoy for
    # "active" questions, a finding for "clean up memberships" questions.
    suspended = [r for r in rows_users if r.suspended and r.id in person_of]
    add(f"gcp-platform-admins@{DOMAIN}", suspended[0].primary_email)
    for r in rng.sample(active, 3):
        add(f"gcp-billing-admins@{DOMAIN}", r.primary_email)
    for r in rng.sample(active, 8):
        add(f"security-alerts@{DOMAIN}", r.primary_email)
    # Family 7: external members, including one in a group that holds cloud privileges.
    add(f"partners-northbridge@{DOMAIN}", EXTERNAL[1], "MANAGER")
    add(f"partners-northbridge@{DOMAIN}", EXTERNAL[0])
    add(f"board-materials@{DOMAIN}", EXTERNAL[5])
    add(f"vendor-support@{DOMAIN}", EXTERNAL[2])
    add(f"design-agency@{DOMAIN}", EXTERNAL[2])
    add(f"data-platform@{DOMAIN}", EXTERNAL[3])
    add(f"gcp-billing-admins@{DOMAIN}", EXTERNAL[4])
    for r in rng.sample(active, 4):
        add(f"partners-northbridge@{DOMAIN}", r.primary_email, "OWNER")
    return groups, [members[k] for k in sorted(members)]


def _oauth(org: Org, rows_users: list[GwsUserRow], admins: list[str]) -> list[GwsOauthTokenRow]:
    rng = org.rng
    rows: dict[tuple[str, str], GwsOauthTokenRow] = {}
    clients = {
        name: f"{rng.randint(10**11, 10**12 - 1)}-{org.hexid(20)}.apps.googleusercontent.com" for name, *_ in APPS
    }
    live = [r for r in rows_users if not r.suspended]
    for r in live:
        for name, scopes, anon, share in APPS:
            if rng.random() < share:
                rows[(r.id, clients[name])] = GwsOauthTokenRow(r.id, clients[name], name, scopes, anon, 0)
    # Family 12: broad grants to unverified apps, including by super admins.
    for name, holders in (
        ("PDF Merge Free", [admins[0], *[r.id for r in rng.sample(live, 6)]]),
        ("MailTracker Plus", [r.id for r in rng.sample(live, 4)]),
        ("Org Chart Sync", [admins[3]]),
        ("Backupify", [admins[1]]),
    ):
        spec = next(a for a in APPS if a[0] == name)
        for uid in holders:
            rows[(uid, clients[name])] = GwsOauthTokenRow(uid, clients[name], name, spec[1], spec[2], 0)
    return [rows[k] for k in sorted(rows)]


_ = datetime
