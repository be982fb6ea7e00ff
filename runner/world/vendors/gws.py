"""Google Workspace: users with aliases and 2-Step Verification, groups with external and nested
members, admin roles, and third-party OAuth grants."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, DOMAIN, Org, Rows, at, ts
from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "gws_users",
        "Workspace users (Directory API `users.list`). Deleted users are gone; suspended ones remain.",
        (
            col("id", "Immutable Google user id (numeric string).", required=True),
            col("primary_email", "Primary email, the sign-in name.", required=True),
            col("full_name", "Full name.", required=True),
            col(
                "org_unit_path",
                "Organizational unit, e.g. `/Employees/Engineering`, `/Contractors`, `/Service Accounts`.",
                required=True,
            ),
            col("is_admin", "1 if the user is a super administrator.", "INTEGER", required=True),
            col(
                "is_delegated_admin",
                "1 if the user holds any delegated (non-super) admin role.",
                "INTEGER",
                required=True,
            ),
            col(
                "is_enrolled_in_2sv",
                "1 if the user has enrolled in 2-Step Verification.",
                "INTEGER",
                required=True,
            ),
            col(
                "is_enforced_in_2sv",
                "1 if 2-Step Verification is enforced for the user's org unit. "
                "Enrollment is what protects an account; enforcement only requires it at sign-in.",
                "INTEGER",
                required=True,
            ),
            col("suspended", "1 if the account is suspended.", "INTEGER", required=True),
            col("archived", "1 if the account is archived.", "INTEGER", required=True),
            col("creation_time", "Creation time (UTC).", required=True),
            col("last_login_time", "Last sign-in (UTC); NULL if never."),
        ),
        primary_key=("id",),
    ),
    Table(
        "gws_user_aliases",
        "Additional addresses that deliver to, and identify, a user (including addresses on secondary domains).",
        (
            col("user_id", "`gws_users.id`.", required=True),
            col("alias", "The alias address.", required=True),
        ),
        primary_key=("user_id", "alias"),
        foreign_keys=(fk("user_id", "gws_users", "id"),),
    ),
    Table(
        "gws_groups",
        "Workspace groups. Groups are also used as principals in Google Cloud IAM.",
        (
            col("id", "Group id.", required=True),
            col("email", "Group address.", required=True),
            col("name", "Group name.", required=True),
            col("description", "Description."),
            col(
                "allow_external_members",
                "1 if the group settings allow members outside the organization.",
                "INTEGER",
                required=True,
            ),
        ),
        primary_key=("id",),
    ),
    Table(
        "gws_group_members",
        "Direct members of each group. A member can be a user, another group (nesting, transitive) or an "
        "address outside the organization.",
        (
            col("group_id", "`gws_groups.id`.", required=True),
            col("member_email", "The address the member was added by (a primary address or an alias).", required=True),
            col(
                "member_id",
                "`gws_users.id` or `gws_groups.id` when the member is in this directory; NULL "
                "for addresses outside it.",
            ),
            col("role", "`OWNER`, `MANAGER` or `MEMBER`.", required=True),
            col("type", "`USER`, `GROUP` or `CUSTOMER` (everyone in the organization).", required=True),
            col("status", "`ACTIVE`, `SUSPENDED` or NULL for addresses outside the directory."),
        ),
        primary_key=("group_id", "member_email"),
        foreign_keys=(fk("group_id", "gws_groups", "id"),),
    ),
    Table(
        "gws_admin_roles",
        "Admin roles defined in the Workspace account (system roles and custom roles).",
        (
            col("role_id", "Role id.", required=True),
            col(
                "role_name",
                "Role name, e.g. `_SEED_ADMIN_ROLE` (Super Admin), `_GROUPS_ADMIN_ROLE`.",
                required=True,
            ),
            col("role_description", "What the role is for."),
            col("is_super_admin_role", "1 for the super admin role.", "INTEGER", required=True),
            col("is_system_role", "1 for Google-defined roles, 0 for custom roles.", "INTEGER", required=True),
        ),
        primary_key=("role_id",),
    ),
    Table(
        "gws_role_assignments",
        "Which users hold which admin role, and where.",
        (
            col("role_assignment_id", "Assignment id.", required=True),
            col("role_id", "`gws_admin_roles.role_id`.", required=True),
            col("assigned_to", "`gws_users.id` of the holder.", required=True),
            col("scope_type", "`CUSTOMER` (whole account) or `ORG_UNIT`.", required=True),
            col("org_unit_path", "The org unit for `ORG_UNIT` scope; NULL otherwise."),
        ),
        primary_key=("role_assignment_id",),
        foreign_keys=(fk("role_id", "gws_admin_roles", "role_id"), fk("assigned_to", "gws_users", "id")),
    ),
    Table(
        "gws_oauth_tokens",
        "OAuth grants users gave to third-party apps (Directory API `tokens.list`).",
        (
            col("user_id", "`gws_users.id` of the user who granted access.", required=True),
            col("client_id", "OAuth client id of the app.", required=True),
            col("display_text", "App name shown on the consent screen.", required=True),
            col("scopes", "Space-separated OAuth scopes granted.", required=True),
            col(
                "anonymous",
                "1 if the app is not registered with Google (unverified).",
                "INTEGER",
                required=True,
            ),
            col("native_app", "1 for installed (native) apps.", "INTEGER", required=True),
        ),
        primary_key=("user_id", "client_id"),
        foreign_keys=(fk("user_id", "gws_users", "id"),),
    ),
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


def generate(org: Org) -> Rows:
    """Users, groups, roles and OAuth grants."""
    rng = org.rng
    rows_users: list[list[object]] = []
    aliases: list[tuple[object, ...]] = []
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
            [
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
            ]
        )
        if p.old_email:
            aliases.append((uid, p.old_email))
        if rng.random() < 0.3:
            aliases.append((uid, f"{p.handle}@{DOMAIN}"))
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
            [
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
            ]
        )
    row_of = {r[0]: r for r in rows_users}
    people_rows = [r for r in rows_users if r[0] in person_of]
    it_rows = [
        r
        for r in people_rows
        if "it" in org.by_pid(person_of[str(r[0])]).tags
        and not r[8]
        and org.by_pid(person_of[str(r[0])]).status == "active"
    ]
    roles: list[tuple[object, ...]] = []
    role_ids = {name: str(9_170_000_000_000 + i * 11) for i, (name, *_rest) in enumerate(ROLES)}

    def grant(role: str, uid: str, scope: str = "CUSTOMER", ou: str | None = None) -> None:
        roles.append((str(len(roles) + 5_550_000_000), role_ids[role], uid, scope, ou))
        if role == "_SEED_ADMIN_ROLE":
            row_of[uid][4] = 1
        else:
            row_of[uid][5] = 1

    supers = [str(r[0]) for r in it_rows[:3]]
    for uid in supers:
        grant("_SEED_ADMIN_ROLE", uid)
        row_of[uid][6] = 1
    grant("_SEED_ADMIN_ROLE", ids[f"gws-admin@{DOMAIN}"])
    # Family 3: a super admin who never enrolled in 2SV.
    weak = str(it_rows[3][0])
    grant("_SEED_ADMIN_ROLE", weak)
    row_of[weak][6] = 0
    # Family 11: a dormant super admin.
    dormant = str(it_rows[4][0])
    grant("_SEED_ADMIN_ROLE", dormant)
    row_of[dormant][6] = 1
    row_of[dormant][11] = "2025-12-02T07:55:00Z"
    # Family 1: a leaver whose account was never suspended holds a delegated admin role.
    leaver_uid = next(str(r[0]) for r in people_rows if "gws_active_leaver" in org.by_pid(person_of[str(r[0])]).tags)
    grant("_USER_MANAGEMENT_ADMIN_ROLE", leaver_uid)
    for r in it_rows[5:10]:
        grant("_HELP_DESK_ADMIN_ROLE", str(r[0]), "ORG_UNIT", "/Employees")
    for r in it_rows[10:12]:
        grant("_GROUPS_ADMIN_ROLE", str(r[0]))
    grant("_SERVICES_ADMIN_ROLE", ids[f"it-automation@{DOMAIN}"])
    # A decoy: the 2SV-less user here holds only a read-only custom role.
    grant("Security Reviewer", str(next(r for r in people_rows if r[6] == 0 and not r[8] and r[4] == 0)[0]))
    for pid_row in (supers[0], weak, dormant):
        org.by_pid(person_of[pid_row]).tags.add("gws_super_admin")
    org.shared["gws_ids"] = ids
    org.shared["gws_person_of"] = person_of
    out_groups, out_members = _groups(org, rows_users, ids, person_of)
    return {
        "gws_users": [tuple(r) for r in rows_users],
        "gws_user_aliases": sorted(set(aliases)),
        "gws_groups": out_groups,
        "gws_group_members": out_members,
        "gws_admin_roles": [(role_ids[n], n, d, s, sys) for n, d, s, sys in ROLES],
        "gws_role_assignments": roles,
        "gws_oauth_tokens": _oauth(org, rows_users, [*supers, weak]),
    }


def _groups(
    org: Org, rows_users: list[list[object]], ids: dict[str, str], person_of: dict[str, str]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    rng = org.rng
    groups: list[tuple[object, ...]] = []
    gid_of: dict[str, str] = {}
    members: dict[tuple[str, str], tuple[object, ...]] = {}

    def group(local: str, name: str, desc: str, external: int = 0) -> None:
        gid = "0" + org.hexid(14)
        email = f"{local}@{DOMAIN}"
        gid_of[email] = gid
        groups.append((gid, email, name, desc, external))

    def add(group_email: str, member_email: str, role: str = "MEMBER", alias_of: str | None = None) -> None:
        gid = gid_of[group_email]
        if alias_of is not None:
            # Added by an alias: the directory still knows whose address it is.
            members[(gid, member_email)] = (gid, member_email, alias_of, role, "USER", "ACTIVE")
        elif member_email in gid_of:
            members[(gid, member_email)] = (gid, member_email, gid_of[member_email], role, "GROUP", "ACTIVE")
        elif member_email in ids:
            row = next(r for r in rows_users if r[0] == ids[member_email])
            members[(gid, member_email)] = (
                gid,
                member_email,
                ids[member_email],
                role,
                "USER",
                "SUSPENDED" if row[8] else "ACTIVE",
            )
        else:
            members[(gid, member_email)] = (gid, member_email, None, role, "USER", None)

    active = [r for r in rows_users if not r[8] and r[0] in person_of]
    depts = sorted({org.by_pid(person_of[str(r[0])]).department for r in active})
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
        p = org.by_pid(person_of[str(r[0])])
        add(f"{p.department.lower().replace(' ', '-')}@{DOMAIN}", str(r[1]))
        if p.acquired:
            # Lumen staff are listed under their old-domain alias: internal, not external.
            add(f"lumen-alumni@{DOMAIN}", p.old_email or str(r[1]), alias_of=str(r[0]))
    add(f"all-staff@{DOMAIN}", f"all-staff@{DOMAIN}".replace("all-staff", "engineering"))
    members[(gid_of[f"all-staff@{DOMAIN}"], "C0corvid")] = (
        gid_of[f"all-staff@{DOMAIN}"],
        "C0corvid",
        None,
        "MEMBER",
        "CUSTOMER",
        None,
    )
    sre = [r for r in active if "sre" in org.by_pid(person_of[str(r[0])]).tags]
    eng = [r for r in active if "eng" in org.by_pid(person_of[str(r[0])]).tags]
    data = [r for r in active if "data" in org.by_pid(person_of[str(r[0])]).tags]
    for r in sre[:4]:
        add(f"sre-leads@{DOMAIN}", str(r[1]))
    # Family 8: org-level GCP admin reaches sre-leads through nesting, and through it, one non-SRE.
    add(f"gcp-org-admins@{DOMAIN}", f"sre-leads@{DOMAIN}")
    add(f"gcp-org-admins@{DOMAIN}", str(sre[4][1]), "OWNER")
    add(f"sre-leads@{DOMAIN}", str(eng[40][1]))
    org.by_pid(person_of[str(eng[40][0])]).tags.add("gcp_nested_admin")
    for r in sre[5:9]:
        add(f"gcp-platform-admins@{DOMAIN}", str(r[1]))
    add(f"gcp-platform-admins@{DOMAIN}", f"data-platform@{DOMAIN}")
    for r in data[:12]:
        add(f"data-platform@{DOMAIN}", str(r[1]))
    # A leaver (account still present but suspended) lingers in a privileged group: a decoy for
    # "active" questions, a finding for "clean up memberships" questions.
    suspended = [r for r in rows_users if r[8] and r[0] in person_of]
    add(f"gcp-platform-admins@{DOMAIN}", str(suspended[0][1]))
    for r in rng.sample(active, 3):
        add(f"gcp-billing-admins@{DOMAIN}", str(r[1]))
    for r in rng.sample(active, 8):
        add(f"security-alerts@{DOMAIN}", str(r[1]))
    # Family 7: external members, including one in a group that holds cloud privileges.
    add(f"partners-northbridge@{DOMAIN}", EXTERNAL[1], "MANAGER")
    add(f"partners-northbridge@{DOMAIN}", EXTERNAL[0])
    add(f"board-materials@{DOMAIN}", EXTERNAL[5])
    add(f"vendor-support@{DOMAIN}", EXTERNAL[2])
    add(f"design-agency@{DOMAIN}", EXTERNAL[2])
    add(f"data-platform@{DOMAIN}", EXTERNAL[3])
    add(f"gcp-billing-admins@{DOMAIN}", EXTERNAL[4])
    for r in rng.sample(active, 4):
        add(f"partners-northbridge@{DOMAIN}", str(r[1]), "OWNER")
    org.shared["gws_group_ids"] = gid_of
    org.shared["gws_group_members"] = list(members.values())
    return groups, [members[k] for k in sorted(members)]


def _oauth(org: Org, rows_users: list[list[object]], admins: list[str]) -> list[tuple[object, ...]]:
    rng = org.rng
    rows: dict[tuple[str, str], tuple[object, ...]] = {}
    clients = {
        name: f"{rng.randint(10**11, 10**12 - 1)}-{org.hexid(20)}.apps.googleusercontent.com" for name, *_ in APPS
    }
    live = [r for r in rows_users if not r[8]]
    for r in live:
        for name, scopes, anon, share in APPS:
            if rng.random() < share:
                rows[(str(r[0]), clients[name])] = (r[0], clients[name], name, scopes, anon, 0)
    # Family 12: broad grants to unverified apps, including by super admins.
    for name, holders in (
        ("PDF Merge Free", [admins[0], *[str(r[0]) for r in rng.sample(live, 6)]]),
        ("MailTracker Plus", [str(r[0]) for r in rng.sample(live, 4)]),
        ("Org Chart Sync", [admins[3]]),
        ("Backupify", [admins[1]]),
    ):
        spec = next(a for a in APPS if a[0] == name)
        for uid in holders:
            rows[(uid, clients[name])] = (uid, clients[name], name, spec[1], spec[2], 0)
    return [rows[k] for k in sorted(rows)]


_ = datetime
