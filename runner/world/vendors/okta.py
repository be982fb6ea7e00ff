"""Okta: the workforce identity provider. Logins, groups, apps, MFA factors and admin roles."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Generated, Org, Person, Rows, at, draw_token, ts
from runner.world.tables.okta import (
    OktaAdminRoleAssignmentRow,
    OktaAppGroupAssignmentRow,
    OktaAppRow,
    OktaAppUserAssignmentRow,
    OktaFactorRow,
    OktaGroupMembershipRow,
    OktaGroupRow,
    OktaUserRow,
)


@dataclass
class OktaUser:
    """What later vendors need to know about an Okta user."""

    id: str
    login: str
    status: str
    person: Person | None
    groups: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class OktaDirectory:
    """What Okta publishes for later vendors: the accounts SAML and SCIM send downstream."""

    # Every Okta user, people first in HR order, then the service and person-less logins.
    users: tuple[OktaUser, ...]
    # Okta group id by group name, for the groups SCIM pushes under the same name.
    group_ids: Mapping[str, str]


ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def okta_id(rng: random.Random, prefix: str) -> str:
    """An Okta object id: its kind's prefix (``00u`` user, ``00g`` group, ``ra`` role …) and 17 drawn characters."""
    return prefix + draw_token(rng, ID_ALPHABET, 17)


def _oid(org: Org, prefix: str) -> str:
    return okta_id(org.rng, prefix)


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


def generate(org: Org) -> Generated[OktaDirectory]:
    """Okta users for everyone hired since Okta went live, plus the planted findings."""
    rng = org.rng
    users: list[OktaUser] = []
    rows_users: list[OktaUserRow] = []
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
            OktaUserRow(
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
            OktaUserRow(
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
    by_login = {u.login.lower(): u for u in users}
    groups, rows_groups, rows_members = _groups(org, users)
    rows_apps, rows_user_assign, rows_group_assign = _apps(org, users, groups)
    rows_factors = _factors(org, users, by_login)
    rows_roles, dormant = _admin_roles(org, users, groups, by_login, rows_factors)
    rows_users = [r._replace(last_login="2025-10-17T08:12:00Z") if r.id == dormant else r for r in rows_users]
    rows: Rows = {
        "okta_users": rows_users,
        "okta_groups": rows_groups,
        "okta_group_memberships": rows_members,
        "okta_apps": rows_apps,
        "okta_app_user_assignments": rows_user_assign,
        "okta_app_group_assignments": rows_group_assign,
        "okta_factors": rows_factors,
        "okta_admin_role_assignments": rows_roles,
    }
    return Generated(rows, OktaDirectory(users=tuple(users), group_ids=groups))


def _plant_active_leavers(org: Org) -> set[str]:
    """Family 1: leavers whose Okta account was never deactivated (the rest were)."""
    leavers = [p for p in org.people if p.left and p.termination and p.termination > date(2025, 6, 1)]
    chosen = org.pick(leavers, 7)
    for p in chosen:
        p.tags.add("okta_active_leaver")
    return {p.pid for p in chosen}


def _groups(org: Org, users: list[OktaUser]) -> tuple[dict[str, str], list[OktaGroupRow], list[OktaGroupMembershipRow]]:
    rng = org.rng
    groups: dict[str, str] = {}
    rows: list[OktaGroupRow] = []
    for name, kind, desc in GROUPS:
        gid = _oid(org, "00g")
        groups[name] = gid
        rows.append(OktaGroupRow(gid, name, desc, kind, "2019-01-02T10:00:00Z"))
    for dept in DEPT_GROUPS:
        gid = _oid(org, "00g")
        name = "dept-" + dept.lower().replace(" ", "-")
        groups[name] = gid
        rows.append(
            OktaGroupRow(gid, name, f"Everyone in {dept} (rule-based from HR)", "OKTA_GROUP", "2019-01-02T10:00:00Z")
        )
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
    return groups, rows, [OktaGroupMembershipRow(g, u) for g, u in sorted(members)]


def _apps(
    org: Org, users: list[OktaUser], groups: dict[str, str]
) -> tuple[list[OktaAppRow], list[OktaAppUserAssignmentRow], list[OktaAppGroupAssignmentRow]]:
    rng = org.rng
    apps: dict[str, str] = {}
    rows_apps: list[OktaAppRow] = []
    for name, label, mode, prov in APPS:
        aid = _oid(org, "0oa")
        apps[name] = aid
        rows_apps.append(OktaAppRow(aid, name, label, "ACTIVE", mode, prov, "2019-02-11T12:00:00Z"))
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
    rows_ga: list[OktaAppGroupAssignmentRow] = []
    for app, gnames in group_assign.items():
        for prio, g in enumerate(gnames):
            rows_ga.append(OktaAppGroupAssignmentRow(apps[app], groups[g], prio))
    rows_ua: dict[tuple[str, str], OktaAppUserAssignmentRow] = {}
    for u in users:
        for app, gnames in group_assign.items():
            if u.groups & set(gnames):
                rows_ua[(apps[app], u.id)] = OktaAppUserAssignmentRow(
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
        rows_ua[(apps["amazon_aws_sso"], u.id)] = OktaAppUserAssignmentRow(
            apps["amazon_aws_sso"],
            u.id,
            "USER",
            u.login.lower(),
            "2024-08-19T14:30:00Z",
        )
    return rows_apps, [rows_ua[k] for k in sorted(rows_ua)], rows_ga


def _factors(org: Org, users: list[OktaUser], by_login: dict[str, OktaUser]) -> list[OktaFactorRow]:
    rng = org.rng
    rows: list[OktaFactorRow] = []

    def factor(u: OktaUser, kind: str, status: str = "ACTIVE") -> None:
        provider = {"webauthn": "FIDO", "token:software:totp": rng.choice(("OKTA", "GOOGLE"))}.get(kind, "OKTA")
        made = ts(org.when(datetime(2020, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=5)))
        rows.append(OktaFactorRow(_oid(org, "mfa"), u.id, kind, provider, status, made, made))

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
    return rows


def _admin_roles(
    org: Org,
    users: list[OktaUser],
    groups: dict[str, str],
    by_login: dict[str, OktaUser],
    factors: list[OktaFactorRow],
) -> tuple[list[OktaAdminRoleAssignmentRow], str]:
    """Admin roles, and the dormant super admin's user id. Replaces the factors of the people who
    hold a role in ``factors``, to plant the MFA findings on them."""
    rng = org.rng
    rows: list[OktaAdminRoleAssignmentRow] = []

    def grant(role: str, kind: str, target: str, when: str = "2022-05-10T16:00:00Z") -> None:
        rows.append(OktaAdminRoleAssignmentRow(_oid(org, "ra"), role, kind, target, "ACTIVE", when))

    def set_factors(u: OktaUser, kinds: list[tuple[str, str]]) -> None:
        factors[:] = [f for f in factors if f.user_id != u.id]
        for kind, status in kinds:
            made = ts(org.when(datetime(2023, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=30)))
            provider = "FIDO" if kind == "webauthn" else "OKTA"
            factors.append(OktaFactorRow(_oid(org, "mfa"), u.id, kind, provider, status, made, made))

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
    # An inactive (revoked) super admin grant is a decoy: it confers nothing.
    revoked = OktaAdminRoleAssignmentRow(
        _oid(org, "ra"), "SUPER_ADMIN", "USER", it_staff[6].id, "INACTIVE", "2021-01-05T10:00:00Z"
    )
    rows.append(revoked)
    for u in [*supers, weak_super, pending, leaver, dormant]:
        assert u.person is not None
        u.person.tags.add("okta_admin")
    return rows, dormant.id
