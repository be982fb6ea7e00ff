"""Azure AD (Microsoft Entra ID): users and guests, nested groups, directory roles, conditional
access, MFA registration, and service principals with their credentials and owners."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, DOMAIN, TENANT_DOMAIN, Generated, Org, Person, Rows, at, ts
from runner.world.tables.azure import (
    AzureConditionalAccessPolicyRow,
    AzureConditionalAccessTargetRow,
    AzureDirectoryRoleRow,
    AzureGroupMemberRow,
    AzureGroupRow,
    AzureRoleAssignmentRow,
    AzureServicePrincipalCredentialRow,
    AzureServicePrincipalOwnerRow,
    AzureServicePrincipalRow,
    AzureUserRegistrationDetailRow,
    AzureUserRow,
)

TENANT_ID = "7c1d9e02-45b3-4f7a-9a61-2e8c4b5d0f13"
MICROSOFT_TENANT = "f8cdef31-a31e-4b4a-93e4-5f571e91255a"


ROLES = (
    ("62e90394-69f5-4237-9190-012177145e10", "Global Administrator", 1),
    ("e8611ab8-c189-46e8-94e1-60213ab1f814", "Privileged Role Administrator", 1),
    ("194ae4cb-b126-40b2-bd5b-6091b380977d", "Security Administrator", 1),
    ("fe930be7-5e62-47db-91af-98c3a49a38b1", "User Administrator", 1),
    ("29232cdf-9323-42fd-ade2-1d097af3e4de", "Exchange Administrator", 1),
    ("729827e3-9c14-49f7-bb1b-9608f156bbb8", "Helpdesk Administrator", 1),
    ("9b895d92-2cd3-44c7-9d02-a6ac2d5ea5c3", "Application Administrator", 1),
    ("158c047a-c907-4556-b7ef-446551a6b5f7", "Cloud Application Administrator", 1),
    ("c4e39bd9-1100-46d3-8c65-fb160da0071f", "Authentication Administrator", 1),
    ("f2ef992c-3afb-46b9-b7cf-a126ee74c451", "Global Reader", 0),
    ("5d6b6bb7-de71-4623-b4af-96380a352509", "Security Reader", 0),
)
ROLE = {name: rid for rid, name, _ in ROLES}
ADMIN_ROLES = [r for r in ROLE if r not in ("Global Reader", "Security Reader")]

PARTNER_DOMAINS = (
    "northbridge-consulting.com",
    "acme-audit.co.uk",
    "pixelforge.design",
    "gmail.com",
    "talentbridge.io",
    "securelayer.net",
)


@dataclass
class AzureUser:
    """An Entra user as later steps need it."""

    id: str
    upn: str
    person: Person | None
    enabled: bool


@dataclass(frozen=True)
class AzureDirectory:
    """What Azure AD publishes for the trap plantings that run after every vendor."""

    # Every Entra user: members in HR order, then cloud-only accounts, then guests.
    users: tuple[AzureUser, ...]
    # The four people planted as Global Administrators, in the order they were drawn.
    global_admins: tuple[AzureUser, ...]


def generate(org: Org) -> Generated[AzureDirectory]:
    """Members, guests, groups, roles, conditional access and service principals."""
    rng = org.rng
    users: list[AzureUser] = []
    rows_users: list[AzureUserRow] = []
    leavers = [p for p in org.people if p.left and p.termination and p.termination > date(2025, 9, 1)]
    enabled_leavers = {p.pid for p in org.pick(leavers, 5)}
    for p in org.pick(leavers, 0):
        _ = p
    for p in org.people:
        if p.left:
            assert p.termination is not None
            # Leavers are deleted after a 30-day hold, unless someone forgot (planted).
            if p.pid not in enabled_leavers and (AS_OF.date() - p.termination).days > 30:
                continue
        enabled = not p.left or p.pid in enabled_leavers
        if p.pid in enabled_leavers:
            p.tags.add("azure_enabled_leaver")
        uid = org.guid()
        upn = f"{p.handle}@{DOMAIN}"
        created = at(max(p.start, date(2018, 6, 1)) - timedelta(days=3), 14)
        if enabled:
            last = org.when(AS_OF - timedelta(days=20), AS_OF - timedelta(hours=2))
        else:
            assert p.termination is not None
            last = org.when(at(p.termination) - timedelta(days=5), at(p.termination, 17))
        users.append(AzureUser(uid, upn, p, enabled))
        rows_users.append(
            AzureUserRow(
                uid,
                upn,
                p.email,
                p.name,
                p.first,
                p.last,
                p.title,
                p.department,
                "Member",
                int(enabled),
                None,
                ts(created),
                ts(last),
            )
        )
    # Cloud-only and non-human accounts: match nobody in HR.
    for local, name, domain in (
        ("breakglass01", "Break Glass 01", TENANT_DOMAIN),
        ("breakglass02", "Break Glass 02", TENANT_DOMAIN),
        ("svc-adconnect", "Azure AD Connect Sync", DOMAIN),
        ("scanner", "Office Scanner", DOMAIN),
        ("conf-room-atlas", "Conference Room Atlas", DOMAIN),
        ("adm-jwright", "Admin J Wright", DOMAIN),
    ):
        uid = org.guid()
        upn = f"{local}@{domain}"
        users.append(AzureUser(uid, upn, None, True))
        seen = None if local.startswith("breakglass") else ts(org.when(AS_OF - timedelta(days=90), AS_OF))
        rows_users.append(
            AzureUserRow(
                uid,
                upn,
                None if domain == TENANT_DOMAIN else upn,
                name,
                None,
                None,
                None,
                None,
                "Member",
                1,
                None,
                "2020-02-03T11:00:00Z",
                seen,
            )
        )
    for i in range(48):
        domain = PARTNER_DOMAINS[i % len(PARTNER_DOMAINS)]
        first, last_name = (
            rng.choice(("lena", "marco", "ike", "rosa", "tariq", "nina", "pete", "ula")),
            rng.choice(("berg", "costa", "duarte", "fox", "grant", "holm", "ito", "james")),
        )
        mail = f"{first}.{last_name}{i}@{domain}"
        uid = org.guid()
        upn = f"{mail.replace('@', '_')}#EXT#@{TENANT_DOMAIN}"
        users.append(AzureUser(uid, upn, None, True))
        state = "Accepted" if rng.random() < 0.85 else "PendingAcceptance"
        rows_users.append(
            AzureUserRow(
                uid,
                upn,
                mail,
                f"{first.title()} {last_name.title()} ({domain})",
                first.title(),
                last_name.title(),
                None,
                None,
                "Guest",
                1,
                state,
                ts(org.when(datetime(2021, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=10))),
                ts(org.when(AS_OF - timedelta(days=300), AS_OF)) if state == "Accepted" else None,
            )
        )
    by_upn = {u.upn: u for u in users}
    out, ga = _groups_roles_ca(org, users, by_upn, rows_users)
    out["azure_users"] = rows_users
    principals, principal_roles = _service_principals(org, users)
    out.update(principals)
    out["azure_role_assignments"] = [*out["azure_role_assignments"], *principal_roles]
    return Generated(out, AzureDirectory(users=tuple(users), global_admins=tuple(ga)))


def _groups_roles_ca(
    org: Org, users: list[AzureUser], by_upn: dict[str, AzureUser], rows_users: list[AzureUserRow]
) -> tuple[Rows, list[AzureUser]]:
    """Groups, user role assignments and conditional access, and the planted Global Administrators."""
    rng = org.rng
    groups: dict[str, str] = {}
    rows_groups: list[AzureGroupRow] = []
    members: list[AzureGroupMemberRow] = []

    def group(name: str, desc: str, *, role: bool = False, kind: str = "", mail: bool = False) -> str:
        gid = org.guid()
        groups[name] = gid
        rows_groups.append(
            AzureGroupRow(
                gid,
                name,
                desc,
                name.lower().replace(" ", "-"),
                1,
                int(mail),
                kind,
                int(role),
                "2020-05-12T09:00:00Z",
            )
        )
        return gid

    def member(g: str, mid: str, kind: str = "user") -> None:
        members.append(AzureGroupMemberRow(groups[g], mid, kind))

    humans = [u for u in users if u.person and u.enabled and not u.person.left]
    for dept in sorted({p.department for p in org.people}):
        group(f"All {dept}", f"Dynamic: department eq '{dept}'", kind="DynamicMembership", mail=True)
    for u in humans:
        assert u.person is not None
        member(f"All {u.person.department}", u.id)
    for name, desc, role in (
        ("SG-Tier0-Admins", "Tier 0 administrators (role-assignable)", True),
        ("SG-Helpdesk", "Help desk operators (role-assignable)", True),
        ("SG-Identity-Ops", "Identity operations team", False),
        ("CA-Exclusion-BreakGlass", "Emergency access accounts excluded from conditional access", False),
        ("CA-Exclusion-Legacy-Auth", "Devices and people that still need legacy protocols", False),
        ("Legacy-Scanner-Devices", "Multifunction printers and scanners", False),
        ("Finance-Legacy-VPN", "Finance users on the old VPN client", False),
        ("CA-Exclusion-Travel", "Temporary exclusion while travelling", False),
        ("SG-App-Owners", "Owners of internal app registrations", False),
    ):
        group(name, desc, role=role)
    it = [u for u in humans if u.person and "it" in u.person.tags]
    sec = [u for u in humans if u.person and "sec" in u.person.tags]
    fin = [u for u in humans if u.person and "finance" in u.person.tags]
    ga_humans = org.pick([u.person for u in it[:12] if u.person], 4)
    ga = [next(u for u in it if u.person is p) for p in ga_humans]
    for u in ga:
        assert u.person is not None
        u.person.tags.add("azure_ga")
    member("CA-Exclusion-BreakGlass", by_upn[f"breakglass01@{TENANT_DOMAIN}"].id)
    member("CA-Exclusion-BreakGlass", by_upn[f"breakglass02@{TENANT_DOMAIN}"].id)
    member("CA-Exclusion-Legacy-Auth", groups["Legacy-Scanner-Devices"], "group")
    member("Legacy-Scanner-Devices", by_upn[f"scanner@{DOMAIN}"].id)
    member("Legacy-Scanner-Devices", groups["Finance-Legacy-VPN"], "group")
    for u in fin[:6]:
        member("Finance-Legacy-VPN", u.id)
    # Family 4: a Global Administrator excluded from admin MFA through two levels of nesting.
    member("Finance-Legacy-VPN", ga[1].id)
    travellers = rng.sample([u for u in humans if u.person and not ({"it", "sec"} & u.person.tags)], 5)
    for u in travellers:
        member("CA-Exclusion-Travel", u.id)
    member("CA-Exclusion-Travel", ga[2].id)  # also excluded from the all-users MFA policy
    for u in it[12:18]:
        member("SG-Helpdesk", u.id)
    member("SG-Tier0-Admins", sec[0].id)
    member("SG-Tier0-Admins", sec[1].id)
    member("SG-Identity-Ops", it[18].id)
    member("SG-Identity-Ops", groups["SG-Helpdesk"], "group")

    rows_roles = [AzureDirectoryRoleRow(rid, name, priv) for rid, name, priv in ROLES]
    assigns: list[AzureRoleAssignmentRow] = []

    def assign(role: str, pid: str, ptype: str = "User", kind: str = "Active") -> None:
        assigns.append(
            AzureRoleAssignmentRow(
                org.guid(),
                ROLE[role],
                pid,
                ptype,
                "/",
                kind,
                ts(org.when(datetime(2021, 3, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=40))),
            )
        )

    for u in ga:
        assign("Global Administrator", u.id)
    assign("Global Administrator", by_upn[f"breakglass01@{TENANT_DOMAIN}"].id)
    assign("Global Administrator", by_upn[f"breakglass02@{TENANT_DOMAIN}"].id)
    assign("Global Administrator", by_upn[f"adm-jwright@{DOMAIN}"].id)  # orphaned admin account
    assign("Global Administrator", it[19].id, kind="Eligible")  # PIM-eligible only: not active
    assign("Privileged Role Administrator", groups["SG-Tier0-Admins"], "Group")
    assign("Security Administrator", groups["SG-Tier0-Admins"], "Group")
    assign("Helpdesk Administrator", groups["SG-Helpdesk"], "Group")
    assign("User Administrator", it[20].id)
    assign("User Administrator", it[21].id)
    assign("Exchange Administrator", it[22].id)
    assign("Authentication Administrator", it[23 % len(it)].id)
    assign("Application Administrator", sec[2].id)
    for u in sec[3:7]:
        assign("Security Reader", u.id)
    # Family 7: external guests who hold directory roles.
    guests = [u for u in users if "#EXT#" in u.upn]
    assign("User Administrator", guests[3].id)
    assign("Global Reader", guests[7].id)
    assign("Global Reader", guests[11].id)
    assign("Cloud Application Administrator", guests[14].id, kind="Eligible")
    # Family 1: a leaver with an enabled account still holds a privileged role.
    leaver = next(u for u in users if u.person and "azure_enabled_leaver" in u.person.tags)
    assign("Exchange Administrator", leaver.id)
    # Family 11: a dormant Global Administrator (no sign-in since last year).
    dormant = ga[3]
    idx = next(i for i, r in enumerate(rows_users) if r.id == dormant.id)
    rows_users[idx] = rows_users[idx]._replace(last_sign_in_date_time="2025-11-21T16:40:00Z")

    rows_ca, rows_targets = _conditional_access(org, groups, by_upn, ga)
    rows_reg = _registration(org, users, ga)
    rows: Rows = {
        "azure_groups": rows_groups,
        "azure_group_members": members,
        "azure_directory_roles": rows_roles,
        "azure_role_assignments": assigns,
        "azure_conditional_access_policies": rows_ca,
        "azure_conditional_access_targets": rows_targets,
        "azure_user_registration_details": rows_reg,
    }
    return rows, ga


def _conditional_access(
    org: Org, groups: dict[str, str], by_upn: dict[str, AzureUser], ga: list[AzureUser]
) -> tuple[list[AzureConditionalAccessPolicyRow], list[AzureConditionalAccessTargetRow]]:
    policies: list[AzureConditionalAccessPolicyRow] = []
    targets: list[AzureConditionalAccessTargetRow] = []
    specs = (
        (
            "CA001 - Require MFA for administrators",
            "enabled",
            "mfa",
            "all",
            [("include", "role", ROLE[r]) for r in ADMIN_ROLES]
            + [
                ("exclude", "group", groups["CA-Exclusion-BreakGlass"]),
                ("exclude", "group", groups["CA-Exclusion-Legacy-Auth"]),
            ],
        ),
        (
            "CA002 - Require MFA for all users",
            "enabled",
            "mfa",
            "all",
            [
                ("include", "special", "All"),
                ("exclude", "group", groups["CA-Exclusion-BreakGlass"]),
                ("exclude", "group", groups["CA-Exclusion-Travel"]),
                ("exclude", "user", by_upn[f"svc-adconnect@{DOMAIN}"].id),
            ],
        ),
        (
            "CA003 - Block legacy authentication",
            "enabled",
            "block",
            "exchangeActiveSync,other",
            [("include", "special", "All"), ("exclude", "group", groups["CA-Exclusion-Legacy-Auth"])],
        ),
        (
            "CA004 - Require compliant device for Global Administrators",
            "enabledForReportingButNotEnforced",
            "compliantDevice",
            "all",
            [("include", "role", ROLE["Global Administrator"])],
        ),
        (
            "CA005 - Require MFA for guests",
            "enabled",
            "mfa",
            "all",
            [("include", "special", "GuestsOrExternalUsers")],
        ),
        ("CA006 - Legacy MFA baseline (retired)", "disabled", "mfa", "all", [("include", "special", "All")]),
        (
            "CA007 - Block sign-ins from untrusted countries",
            "enabled",
            "block",
            "all",
            [
                ("include", "special", "All"),
                ("exclude", "group", groups["CA-Exclusion-BreakGlass"]),
                ("exclude", "user", ga[0].id),
            ],
        ),
    )
    for name, state, grant, apps, rules in specs:
        pid = org.guid()
        policies.append(
            AzureConditionalAccessPolicyRow(
                pid, name, state, grant, "OR", apps, "2022-01-10T10:00:00Z", "2026-02-17T15:20:00Z"
            )
        )
        for scope, kind, target in rules:
            targets.append(AzureConditionalAccessTargetRow(pid, scope, kind, target))
    return policies, targets


def _registration(org: Org, users: list[AzureUser], ga: list[AzureUser]) -> list[AzureUserRegistrationDetailRow]:
    rng = org.rng
    rows: list[AzureUserRegistrationDetailRow] = []
    weak_ga = ga[2]  # Family 3: a Global Administrator with no MFA method (also excluded from CA002).
    for u in users:
        if "#EXT#" in u.upn:
            continue
        if u is weak_ga or (u.person is None and u.upn.startswith(("scanner", "conf-room", "svc-"))):
            methods: list[str] = []
        elif u.upn.startswith("breakglass"):
            methods = ["fido2"]
        else:
            roll = rng.random()
            methods = (
                ["microsoftAuthenticatorPush", "softwareOneTimePasscode"]
                if roll < 0.6
                else ["microsoftAuthenticatorPush"]
                if roll < 0.8
                else ["windowsHelloForBusiness", "fido2"]
                if roll < 0.86
                else ["mobilePhone"]
                if roll < 0.95
                else []
            )
        default = {
            "microsoftAuthenticatorPush": "microsoftAuthenticatorPush",
            "fido2": "fido2",
            "windowsHelloForBusiness": "fido2",
            "mobilePhone": "sms",
        }.get(methods[0] if methods else "", "none")
        if methods and methods[0] == "microsoftAuthenticatorPush":
            default = "microsoftAuthenticatorPush"
        rows.append(
            AzureUserRegistrationDetailRow(
                u.id,
                u.upn,
                int(bool(methods)),
                int(bool(methods)),
                int(bool({"fido2", "windowsHelloForBusiness"} & set(methods))),
                ",".join(methods),
                default,
                "2026-06-29T03:00:00Z",
            )
        )
    return rows


def _service_principals(org: Org, users: list[AzureUser]) -> tuple[Rows, list[AzureRoleAssignmentRow]]:
    """Service principals, their credentials and owners, and the directory roles they hold."""
    rng = org.rng
    sps: list[AzureServicePrincipalRow] = []
    creds: list[AzureServicePrincipalCredentialRow] = []
    owners: list[AzureServicePrincipalOwnerRow] = []

    def sp(name: str, tenant: str, kind: str = "Application") -> str:
        sid = org.guid()
        sps.append(
            AzureServicePrincipalRow(
                sid,
                org.guid(),
                name,
                kind,
                1,
                tenant if kind == "Application" else None,
                ts(org.when(datetime(2020, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=60))),
            )
        )
        return sid

    for name in (
        "Microsoft Graph",
        "Office 365 Exchange Online",
        "Office 365 SharePoint Online",
        "Microsoft Teams",
        "Azure Portal",
        "Microsoft Intune",
        "Windows Azure Active Directory",
    ):
        sp(name, MICROSOFT_TENANT)
    third = (
        "Zoom for Microsoft",
        "Slack for Outlook",
        "DocuSign",
        "Calendly",
        "Grammarly",
        "Salesforce Outlook Integration",
        "Miro",
        "LucidChart",
        "Notion Sync",
        "MailMerge Pro",
    )
    for name in third:
        sp(name, org.guid())
    for i in range(6):
        sp(f"mi-corvid-prod-{i:02d}", "", "ManagedIdentity")
    internal_names = (
        "corvid-ci-deployer",
        "corvid-hr-sync",
        "corvid-scim-bridge",
        "corvid-billing-export",
        "corvid-log-shipper",
        "corvid-backup-runner",
        "corvid-support-portal",
        "corvid-data-loader",
        "corvid-sso-test",
        "corvid-mail-relay",
        "corvid-reporting",
        "corvid-okta-sync",
        "corvid-secops-automation",
        "corvid-terraform",
        "corvid-legacy-crm",
        "lumen-etl-runner",
        "lumen-dashboard",
        "corvid-intune-sync",
        "corvid-analytics-api",
        "corvid-teams-bot",
    )
    members = [u for u in users if u.person and u.enabled and not u.person.left and "eng" in u.person.tags]
    disabled_leavers = [u for u in users if u.person and not u.enabled]
    enabled_leavers = [u for u in users if u.person and u.enabled and u.person.left]
    for i, name in enumerate(internal_names):
        sid = sp(name, TENANT_ID)
        start = org.when(datetime(2023, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=30))
        years = 1 if i % 4 else 2
        creds.append(
            AzureServicePrincipalCredentialRow(
                org.guid(),
                sid,
                "Password",
                f"{name}-secret",
                ts(start),
                ts(start + timedelta(days=365 * years)),
            )
        )
        if i in (2, 7, 12, 15):
            # Family 6: secrets far beyond the two-year policy, some effectively never expiring.
            end = start + timedelta(days=365 * (99 if i == 12 else 5))
            creds.append(
                AzureServicePrincipalCredentialRow(org.guid(), sid, "Password", "long-lived", ts(start), ts(end))
            )
        if i in (4, 9):
            old = start - timedelta(days=800)
            expired = ts(old + timedelta(days=365))
            creds.append(
                AzureServicePrincipalCredentialRow(org.guid(), sid, "Password", "old-expired", ts(old), expired)
            )
        if i % 3 == 0:
            creds.append(
                AzureServicePrincipalCredentialRow(
                    org.guid(),
                    sid,
                    "AsymmetricX509Cert",
                    "CN=" + name,
                    ts(start),
                    ts(start + timedelta(days=730)),
                )
            )
        owner_pool = members
        if i in (1, 10, 15):
            owner_pool = disabled_leavers  # owned only by people who have left (family 6)
        elif i in (5, 16):
            owner_pool = enabled_leavers
        for u in rng.sample(owner_pool, 1 if i in (1, 5, 10, 15, 16) else 2):
            owners.append(AzureServicePrincipalOwnerRow(sid, u.id))
    # Privileged service principals: one internal app holds Global Administrator (toxic), one holds
    # Application Administrator.
    roles: list[AzureRoleAssignmentRow] = []
    by_name = {s.display_name: s.id for s in sps}
    roles.append(
        AzureRoleAssignmentRow(
            org.guid(),
            ROLE["Global Administrator"],
            by_name["corvid-secops-automation"],
            "ServicePrincipal",
            "/",
            "Active",
            "2024-04-02T12:00:00Z",
        )
    )
    roles.append(
        AzureRoleAssignmentRow(
            org.guid(),
            ROLE["Application Administrator"],
            by_name["corvid-terraform"],
            "ServicePrincipal",
            "/",
            "Active",
            "2023-09-14T12:00:00Z",
        )
    )
    rows: Rows = {
        "azure_service_principals": sps,
        "azure_service_principal_credentials": creds,
        "azure_service_principal_owners": owners,
    }
    return rows, roles
