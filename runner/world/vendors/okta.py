"""Okta: the workforce identity provider. Logins, groups, apps, MFA factors and admin roles."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Org, Person, Row, Rows, at, ts
from runner.world.schema import Table, col, fk

TABLES = (
    Table(
        "okta_users",
        "Okta users (`/api/v1/users`), including deactivated ones. Okta keeps a deprovisioned user "
        "until an admin deletes it.",
        (
            col("id", "Okta user id, e.g. `00u1a2b3c4D5e6F7g8h9`.", required=True),
            col(
                "status",
                "`STAGED`, `PROVISIONED`, `ACTIVE`, `RECOVERY`, `PASSWORD_EXPIRED`, `LOCKED_OUT`, "
                "`SUSPENDED` or `DEPROVISIONED` (deactivated). Only `DEPROVISIONED` users cannot sign in "
                "at all; `SUSPENDED` users are blocked until unsuspended.",
                required=True,
            ),
            col(
                "login",
                "Okta username. Usually the work email, but it keeps whatever form it was "
                "created with (older domains, mixed case).",
                required=True,
            ),
            col("email", "Primary email on the profile.", required=True),
            col("first_name", "Profile given name."),
            col("last_name", "Profile family name."),
            col("user_type", "Okta user type: `employee`, `contractor` or `service`."),
            col("created", "When the user was created (UTC)."),
            col("activated", "When the user was first activated (UTC); NULL if never activated."),
            col("status_changed", "When `status` last changed (UTC)."),
            col("last_login", "Last successful sign-in (UTC); NULL if never signed in."),
            col("password_changed", "When the password was last changed (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "okta_groups",
        "Okta groups (`/api/v1/groups`). Several are pushed to downstream apps (AWS IAM Identity Center, "
        "GitHub) under the same name.",
        (
            col("id", "Okta group id, e.g. `00g...`.", required=True),
            col("name", "Group name.", required=True),
            col("description", "Free-text description."),
            col(
                "type",
                "`OKTA_GROUP` (managed in Okta), `APP_GROUP` (imported from an app) or `BUILT_IN` (`Everyone`).",
                required=True,
            ),
            col("created", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "okta_group_memberships",
        "Direct members of each Okta group. Okta groups do not nest.",
        (
            col("group_id", "`okta_groups.id`.", required=True),
            col("user_id", "`okta_users.id`.", required=True),
        ),
        primary_key=("group_id", "user_id"),
        foreign_keys=(fk("group_id", "okta_groups", "id"), fk("user_id", "okta_users", "id")),
    ),
    Table(
        "okta_apps",
        "Applications integrated with Okta for single sign-on or provisioning.",
        (
            col("id", "Okta app id, e.g. `0oa...`.", required=True),
            col(
                "name",
                "Okta integration name, e.g. `amazon_aws_sso`, `github_enterprise_cloud`.",
                required=True,
            ),
            col("label", "Display label shown to users.", required=True),
            col("status", "`ACTIVE` or `INACTIVE`.", required=True),
            col("sign_on_mode", "`SAML_2_0`, `OPENID_CONNECT`, `BOOKMARK` or `BROWSER_PLUGIN`."),
            col(
                "provisioning",
                "Lifecycle provisioning to the app: `SCIM` (pushes users and groups) or `NONE`.",
            ),
            col("created", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "okta_app_user_assignments",
        "Which users are assigned to each app. `scope` says whether the assignment is direct (`USER`) or "
        "inherited from a group assignment (`GROUP`).",
        (
            col("app_id", "`okta_apps.id`.", required=True),
            col("user_id", "`okta_users.id`.", required=True),
            col("scope", "`USER` (assigned directly) or `GROUP` (through a group assignment).", required=True),
            col("app_username", "The username Okta sends to the app for this user."),
            col("created", "When the assignment was made (UTC)."),
        ),
        primary_key=("app_id", "user_id"),
        foreign_keys=(fk("app_id", "okta_apps", "id"), fk("user_id", "okta_users", "id")),
    ),
    Table(
        "okta_app_group_assignments",
        "Groups assigned to each app. For SCIM apps the group is also pushed to the app.",
        (
            col("app_id", "`okta_apps.id`.", required=True),
            col("group_id", "`okta_groups.id`.", required=True),
            col("priority", "Assignment priority (0 is highest).", "INTEGER"),
        ),
        primary_key=("app_id", "group_id"),
        foreign_keys=(fk("app_id", "okta_apps", "id"), fk("group_id", "okta_groups", "id")),
    ),
    Table(
        "okta_factors",
        "Enrolled MFA factors per user (`/api/v1/users/{id}/factors`).",
        (
            col("id", "Factor id.", required=True),
            col("user_id", "`okta_users.id`.", required=True),
            col(
                "factor_type",
                "`push` (Okta Verify push), `token:software:totp`, `signed_nonce` (Okta FastPass), "
                "`webauthn` (security key or biometric), `sms`, `call`, `email` or `question`. `sms`, `call`, "
                "`email` and `question` are not phishing-resistant and are treated as weak by policy.",
                required=True,
            ),
            col("provider", "`OKTA`, `GOOGLE` or `FIDO`.", required=True),
            col(
                "status",
                "`ACTIVE`, `PENDING_ACTIVATION` (enrollment started, never finished) or `INACTIVE`.",
                required=True,
            ),
            col("created", "Enrollment time (UTC)."),
            col("last_updated", "Last change (UTC)."),
        ),
        primary_key=("id",),
        foreign_keys=(fk("user_id", "okta_users", "id"),),
    ),
    Table(
        "okta_admin_role_assignments",
        "Okta administrator roles, granted to a user directly or to a group (every member holds it).",
        (
            col("id", "Role assignment id.", required=True),
            col(
                "role_type",
                "`SUPER_ADMIN`, `ORG_ADMIN`, `APP_ADMIN`, `USER_ADMIN`, `HELP_DESK_ADMIN`, "
                "`GROUP_MEMBERSHIP_ADMIN`, `READ_ONLY_ADMIN` or `REPORT_ADMIN`.",
                required=True,
            ),
            col("assignee_type", "`USER` or `GROUP`.", required=True),
            col(
                "assignee_id",
                "`okta_users.id` or `okta_groups.id`, depending on `assignee_type`.",
                required=True,
            ),
            col(
                "status",
                "`ACTIVE`, or `INACTIVE` for an assignment that was revoked (it grants nothing).",
                required=True,
            ),
            col("created", "When the role was granted (UTC)."),
        ),
        primary_key=("id",),
    ),
)


@dataclass
class OktaUser:
    """What later vendors need to know about an Okta user."""

    id: str
    login: str
    status: str
    person: Person | None
    groups: set[str] = field(default_factory=set)


def _oid(org: Org, prefix: str) -> str:
    return prefix + org.token("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 17)


GROUPS = (
    ("Everyone", "BUILT_IN", "All users in the org"),
    ("okta-admins", "OKTA_GROUP", "Identity team administrators"),
    ("helpdesk", "OKTA_GROUP", "IT help desk staff"),
    ("aws-prod-admin", "OKTA_GROUP", "Pushed to AWS: administrator access to production accounts"),
    ("aws-prod-readonly", "OKTA_GROUP", "Pushed to AWS: read-only production access"),
    ("aws-dev-poweruser", "OKTA_GROUP", "Pushed to AWS: power user in development and staging"),
    ("aws-data-engineer", "OKTA_GROUP", "Pushed to AWS: data platform access"),
    ("aws-security-audit", "OKTA_GROUP", "Pushed to AWS: security audit across the organization"),
    ("aws-billing", "OKTA_GROUP", "Pushed to AWS: billing console"),
    ("sre-breakfix", "OKTA_GROUP", "Pushed to AWS: emergency break-fix access for on-call"),
    ("eng-oncall", "OKTA_GROUP", "Engineering on-call rotation"),
    ("github-users", "OKTA_GROUP", "GitHub Enterprise organization access"),
    ("gcp-users", "OKTA_GROUP", "Google Cloud console access"),
    ("atlas-users", "OKTA_GROUP", "MongoDB Atlas access"),
    ("contractors", "OKTA_GROUP", "External contractors"),
    ("lumen-legacy", "APP_GROUP", "Imported from the Lumen Analytics directory"),
)
# Groups assigned to the AWS IAM Identity Center app; SCIM pushes them to AWS under the same names.
AWS_PUSHED_GROUPS = (
    "aws-prod-admin",
    "aws-prod-readonly",
    "aws-dev-poweruser",
    "aws-data-engineer",
    "aws-security-audit",
    "aws-billing",
    "sre-breakfix",
)
DEPT_GROUPS = (
    "Engineering",
    "Platform",
    "Data",
    "Security",
    "IT",
    "Product",
    "Sales",
    "Marketing",
    "Customer Success",
    "Finance",
    "People",
    "Legal",
    "Operations",
)
APPS = (
    ("amazon_aws_sso", "AWS IAM Identity Center", "SAML_2_0", "SCIM"),
    ("github_enterprise_cloud", "GitHub Enterprise Cloud - Organization", "SAML_2_0", "NONE"),
    ("google", "Google Workspace", "SAML_2_0", "NONE"),
    ("office365", "Microsoft Office 365", "SAML_2_0", "NONE"),
    ("mongodb_atlas", "MongoDB Atlas", "SAML_2_0", "NONE"),
    ("slack", "Slack", "SAML_2_0", "SCIM"),
    ("salesforce", "Salesforce", "SAML_2_0", "NONE"),
    ("zoom", "Zoom", "SAML_2_0", "NONE"),
    ("hibob", "HiBob", "SAML_2_0", "NONE"),
    ("jira_cloud", "Jira Software Cloud", "OPENID_CONNECT", "NONE"),
    ("expensify", "Expensify", "BOOKMARK", "NONE"),
)
SERVICE_LOGINS = (
    # (login, status, user_type, person-less on purpose: these match nobody in HR)
    ("okta-breakglass@corvid.io", "ACTIVE", "service"),
    ("svc-scim-provisioner@corvid.io", "ACTIVE", "service"),
    ("svc-jenkins@corvid.io", "ACTIVE", "service"),
    ("qa.test.user@corvid.io", "ACTIVE", "employee"),
    ("temp-admin@corvid.io", "ACTIVE", "employee"),
    ("demo.account@corvid.io", "SUSPENDED", "employee"),
    ("integration.bot@corvid.io", "DEPROVISIONED", "service"),
)


def generate(org: Org) -> Rows:
    """Okta users for everyone hired since Okta went live, plus the planted findings."""
    rng = org.rng
    users: list[OktaUser] = []
    rows_users: list[tuple[object, ...]] = []
    okta_live = date(2019, 1, 1)
    active_leavers = _plant_active_leavers(org)
    for p in org.people:
        if p.left and p.termination and p.termination < okta_live:
            continue
        login = p.email
        if p.acquired and p.old_email and rng.random() < 0.4:
            login = p.old_email
        elif rng.random() < 0.04:
            local, domain = login.split("@")
            login = ".".join(s.capitalize() for s in local.split(".")) + "@" + domain.capitalize()
        status = "ACTIVE"
        if p.left and p.pid not in active_leavers:
            status = "DEPROVISIONED"
        elif p.status == "leave" and rng.random() < 0.7:
            status = "SUSPENDED"
        elif p.status == "active" and rng.random() < 0.01:
            status = rng.choice(("LOCKED_OUT", "PASSWORD_EXPIRED"))
        created = at(max(p.start, okta_live) - timedelta(days=rng.randint(1, 10)), 15)
        changed = at(p.termination, 18) if status == "DEPROVISIONED" and p.termination else created
        if status == "ACTIVE" or status in ("LOCKED_OUT", "PASSWORD_EXPIRED"):
            last_login = org.when(AS_OF - timedelta(days=30), AS_OF - timedelta(hours=1))
            if p.left and p.termination:
                last_login = org.when(at(p.termination) + timedelta(days=2), AS_OF - timedelta(days=1))
        elif p.termination:
            last_login = org.when(at(p.termination) - timedelta(days=10), at(p.termination, 17))
        else:
            last_login = org.when(AS_OF - timedelta(days=200), AS_OF - timedelta(days=40))
        user_type = "contractor" if p.employment_type == "Contractor" else "employee"
        u = OktaUser(_oid(org, "00u"), login, status, p)
        users.append(u)
        email = login.lower() if login.lower() == p.old_email else p.email
        rows_users.append(
            (
                u.id,
                status,
                login,
                email,
                p.first,
                p.last,
                user_type,
                ts(created),
                ts(created + timedelta(hours=2)),
                ts(changed),
                ts(last_login),
                ts(min(created + timedelta(days=rng.randint(0, 400)), AS_OF - timedelta(days=1))),
            )
        )
    for login, status, user_type in SERVICE_LOGINS:
        u = OktaUser(_oid(org, "00u"), login, status, None)
        users.append(u)
        created = datetime(2021, 4, 12, 16, 0, tzinfo=AS_OF.tzinfo) + timedelta(days=rng.randint(0, 900))
        last = None if login.startswith("qa.") else ts(org.when(AS_OF - timedelta(days=60), AS_OF))
        if login.startswith("okta-breakglass"):
            last = ts(datetime(2025, 11, 3, 2, 14, tzinfo=AS_OF.tzinfo))
        rows_users.append(
            (
                u.id,
                status,
                login,
                login,
                None,
                None,
                user_type,
                ts(created),
                ts(created),
                ts(created),
                last,
                ts(created),
            )
        )
    org.shared["okta_users"] = users
    by_login = {u.login.lower(): u for u in users}
    groups, rows_groups, rows_members = _groups(org, users)
    org.shared["okta_groups"] = groups
    rows_apps, rows_user_assign, rows_group_assign = _apps(org, users, groups)
    rows_factors = _factors(org, users, by_login)
    rows_roles = _admin_roles(org, users, groups, by_login)
    dormant = org.shared["okta_dormant_admin"]
    rows_users = [(*r[:10], "2025-10-17T08:12:00Z", *r[11:]) if r[0] == dormant else r for r in rows_users]
    return {
        "okta_users": rows_users,
        "okta_groups": rows_groups,
        "okta_group_memberships": rows_members,
        "okta_apps": rows_apps,
        "okta_app_user_assignments": rows_user_assign,
        "okta_app_group_assignments": rows_group_assign,
        "okta_factors": rows_factors,
        "okta_admin_role_assignments": rows_roles,
    }


def _plant_active_leavers(org: Org) -> set[str]:
    """Family 1: leavers whose Okta account was never deactivated (the rest were)."""
    leavers = [p for p in org.people if p.left and p.termination and p.termination > date(2025, 6, 1)]
    chosen = org.pick(leavers, 7)
    for p in chosen:
        p.tags.add("okta_active_leaver")
    return {p.pid for p in chosen}


def _groups(
    org: Org, users: list[OktaUser]
) -> tuple[dict[str, str], list[tuple[object, ...]], list[tuple[object, ...]]]:
    rng = org.rng
    groups: dict[str, str] = {}
    rows: list[tuple[object, ...]] = []
    for name, kind, desc in GROUPS:
        gid = _oid(org, "00g")
        groups[name] = gid
        rows.append((gid, name, desc, kind, "2019-01-02T10:00:00Z"))
    for dept in DEPT_GROUPS:
        gid = _oid(org, "00g")
        name = "dept-" + dept.lower().replace(" ", "-")
        groups[name] = gid
        rows.append((gid, name, f"Everyone in {dept} (rule-based from HR)", "OKTA_GROUP", "2019-01-02T10:00:00Z"))
    members: set[tuple[str, str]] = set()

    def add(group: str, u: OktaUser) -> None:
        members.add((groups[group], u.id))
        u.groups.add(group)

    for u in users:
        p = u.person
        if u.status == "DEPROVISIONED" and rng.random() < 0.9:
            continue  # deactivation removes most group memberships
        add("Everyone", u)
        if p is None:
            continue
        add("dept-" + p.department.lower().replace(" ", "-"), u)
        if p.employment_type == "Contractor":
            add("contractors", u)
        if p.acquired:
            add("lumen-legacy", u)
        if "eng" in p.tags:
            add("github-users", u)
            if rng.random() < 0.6:
                add("aws-dev-poweruser", u)
            if rng.random() < 0.5:
                add("gcp-users", u)
            if rng.random() < 0.25:
                add("atlas-users", u)
            if rng.random() < 0.12:
                add("eng-oncall", u)
        if "sre" in p.tags:
            add("aws-prod-readonly", u)
            if rng.random() < 0.35:
                add("aws-prod-admin", u)
            if rng.random() < 0.5:
                add("sre-breakfix", u)
            add("eng-oncall", u)
        if "data" in p.tags:
            add("aws-data-engineer", u)
        if "sec" in p.tags:
            add("aws-security-audit", u)
        if "finance" in p.tags and rng.random() < 0.5:
            add("aws-billing", u)
        if "it" in p.tags and p.title in ("IT Support Specialist", "Systems Administrator"):
            add("helpdesk", u)
        if "it" in p.tags and p.title in ("Identity Engineer", "IT Manager"):
            add("okta-admins", u)
    # Family 8: privilege through group mapping. People outside platform engineering sit in the
    # break-fix group that maps to AdministratorAccess in production.
    outsiders = [
        u
        for u in users
        if u.person
        and u.status == "ACTIVE"
        and not u.person.left
        and u.person.department in ("Customer Success", "Marketing", "Sales", "Finance")
    ]
    for u in rng.sample(outsiders, 4):
        add("sre-breakfix", u)
        assert u.person is not None
        u.person.tags.add("breakfix_outsider")
    lapsed = [u for u in users if u.person and "lapsed_contract" in u.person.tags and u.status == "ACTIVE"]
    for u in lapsed[:5]:
        add("aws-prod-admin" if u is lapsed[0] else "aws-dev-poweruser", u)
        add("github-users", u)
    leavers = [u for u in users if u.person and "okta_active_leaver" in u.person.tags]
    for u in leavers[:3]:
        add("aws-prod-admin", u)
    return groups, rows, sorted(members)


def _apps(
    org: Org, users: list[OktaUser], groups: dict[str, str]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    rng = org.rng
    apps: dict[str, str] = {}
    rows_apps: list[Row] = []
    for name, label, mode, prov in APPS:
        aid = _oid(org, "0oa")
        apps[name] = aid
        rows_apps.append((aid, name, label, "ACTIVE", mode, prov, "2019-02-11T12:00:00Z"))
    group_assign = {
        "amazon_aws_sso": AWS_PUSHED_GROUPS,
        "github_enterprise_cloud": ("github-users",),
        "google": ("Everyone",),
        "office365": ("Everyone",),
        "mongodb_atlas": ("atlas-users",),
        "slack": ("Everyone",),
        "zoom": ("Everyone",),
        "hibob": ("Everyone",),
        "jira_cloud": ("dept-engineering", "dept-platform", "dept-data", "dept-product", "dept-security"),
        "salesforce": ("dept-sales", "dept-customer-success"),
        "expensify": ("Everyone",),
    }
    rows_ga: list[Row] = []
    for app, gnames in group_assign.items():
        for prio, g in enumerate(gnames):
            rows_ga.append((apps[app], groups[g], prio))
    rows_ua: dict[tuple[str, str], tuple[object, ...]] = {}
    for u in users:
        for app, gnames in group_assign.items():
            if u.groups & set(gnames):
                rows_ua[(apps[app], u.id)] = (
                    apps[app],
                    u.id,
                    "GROUP",
                    u.login.lower(),
                    "2020-01-06T09:00:00Z",
                )
    # A few direct assignments to AWS outside any group (they bypass group review).
    direct = [
        u
        for u in users
        if u.person
        and u.status == "ACTIVE"
        and "aws-dev-poweruser" not in u.groups
        and u.person.department in ("Product", "Data", "Security")
    ]
    for u in rng.sample(direct, 5):
        rows_ua[(apps["amazon_aws_sso"], u.id)] = (
            apps["amazon_aws_sso"],
            u.id,
            "USER",
            u.login.lower(),
            "2024-08-19T14:30:00Z",
        )
    return rows_apps, [rows_ua[k] for k in sorted(rows_ua)], rows_ga


def _factors(org: Org, users: list[OktaUser], by_login: dict[str, OktaUser]) -> list[tuple[object, ...]]:
    rng = org.rng
    rows: list[Row] = []

    def factor(u: OktaUser, kind: str, status: str = "ACTIVE") -> None:
        provider = {"webauthn": "FIDO", "token:software:totp": rng.choice(("OKTA", "GOOGLE"))}.get(kind, "OKTA")
        made = ts(org.when(datetime(2020, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=5)))
        rows.append((_oid(org, "mfa"), u.id, kind, provider, status, made, made))

    for u in users:
        if u.status == "DEPROVISIONED" or u.person is None:
            continue
        roll = rng.random()
        if roll < 0.70:
            factor(u, "push")
            if rng.random() < 0.3:
                factor(u, "token:software:totp")
        elif roll < 0.80:
            factor(u, "signed_nonce")
            factor(u, "push")
        elif roll < 0.86:
            factor(u, "webauthn")
        elif roll < 0.95:
            factor(u, "sms")
        elif roll < 0.97:
            factor(u, "email")
        # else: no factor at all
    factor(by_login["okta-breakglass@corvid.io"], "webauthn")
    factor(by_login["svc-jenkins@corvid.io"], "token:software:totp")
    factor(by_login["temp-admin@corvid.io"], "sms")
    org.shared["okta_factor_rows"] = rows
    return rows


def _admin_roles(
    org: Org, users: list[OktaUser], groups: dict[str, str], by_login: dict[str, OktaUser]
) -> list[tuple[object, ...]]:
    """Admin roles, with the MFA and dormancy plants on the people who hold them."""
    rng = org.rng
    rows: list[tuple[object, ...]] = []
    factors: list[tuple[object, ...]] = org.shared["okta_factor_rows"]  # type: ignore[assignment]

    def grant(role: str, kind: str, target: str, when: str = "2022-05-10T16:00:00Z") -> None:
        rows.append((_oid(org, "ra"), role, kind, target, "ACTIVE", when))

    def set_factors(u: OktaUser, kinds: list[tuple[str, str]]) -> None:
        factors[:] = [f for f in factors if f[1] != u.id]
        for kind, status in kinds:
            made = ts(org.when(datetime(2023, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=30)))
            factors.append((_oid(org, "mfa"), u.id, kind, "FIDO" if kind == "webauthn" else "OKTA", status, made, made))

    it_staff = [u for u in users if u.person and u.status == "ACTIVE" and "it" in u.person.tags and not u.person.left]
    sec_staff = [u for u in users if u.person and u.status == "ACTIVE" and "sec" in u.person.tags and not u.person.left]
    eng_staff = [u for u in users if u.person and u.status == "ACTIVE" and "eng" in u.person.tags and not u.person.left]
    supers = [it_staff[0], it_staff[1], sec_staff[0], sec_staff[1]]
    for u in supers:
        grant("SUPER_ADMIN", "USER", u.id)
        set_factors(u, [("webauthn", "ACTIVE"), ("push", "ACTIVE")])
    grant("SUPER_ADMIN", "USER", by_login["okta-breakglass@corvid.io"].id, "2021-06-01T08:00:00Z")
    # Family 3: a super admin whose only factor is SMS.
    weak_super = it_staff[2]
    grant("SUPER_ADMIN", "USER", weak_super.id)
    set_factors(weak_super, [("sms", "ACTIVE")])
    # Family 3 trap: an org admin whose security key enrollment never finished, plus email only.
    pending = it_staff[3]
    grant("ORG_ADMIN", "USER", pending.id)
    set_factors(pending, [("webauthn", "PENDING_ACTIVATION"), ("email", "ACTIVE")])
    grant("ORG_ADMIN", "USER", it_staff[4].id)
    set_factors(it_staff[4], [("push", "ACTIVE"), ("sms", "ACTIVE")])
    # Family 5: an orphaned admin account that matches nobody.
    grant("ORG_ADMIN", "USER", by_login["temp-admin@corvid.io"].id, "2025-02-14T22:41:00Z")
    # Family 1 + 3: a leaver, still ACTIVE in Okta, who holds user administration.
    leaver = next(u for u in users if u.person and "okta_active_leaver" in u.person.tags)
    grant("USER_ADMIN", "USER", leaver.id)
    for u in rng.sample(eng_staff, 3):
        grant("APP_ADMIN", "USER", u.id)
    for u in rng.sample(sec_staff[2:], 3):
        grant("READ_ONLY_ADMIN", "USER", u.id)
    grant("HELP_DESK_ADMIN", "GROUP", groups["helpdesk"])
    grant("GROUP_MEMBERSHIP_ADMIN", "GROUP", groups["okta-admins"])
    grant("USER_ADMIN", "GROUP", groups["okta-admins"])
    # Family 11: a dormant super admin (no sign-in for months), marked for the users table below.
    dormant = it_staff[5]
    grant("SUPER_ADMIN", "USER", dormant.id, "2020-03-02T10:00:00Z")
    set_factors(dormant, [("push", "ACTIVE")])
    org.shared["okta_dormant_admin"] = dormant.id
    # An inactive (revoked) super admin grant is a decoy: it confers nothing.
    rows.append((_oid(org, "ra"), "SUPER_ADMIN", "USER", it_staff[6].id, "INACTIVE", "2021-01-05T10:00:00Z"))
    for u in [*supers, weak_super, pending, leaver, dormant]:
        assert u.person is not None
        u.person.tags.add("okta_admin")
    return rows
