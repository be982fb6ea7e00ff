"""Azure AD (Microsoft Entra ID): users and guests, nested groups, directory roles, conditional
access, MFA registration, and service principals with their credentials and owners."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, DOMAIN, TENANT_DOMAIN, Org, Person, Row, Rows, at, ts
from runner.world.schema import Table, col, fk

TENANT_ID = "7c1d9e02-45b3-4f7a-9a61-2e8c4b5d0f13"
MICROSOFT_TENANT = "f8cdef31-a31e-4b4a-93e4-5f571e91255a"

TABLES = (
    Table(
        "azure_users",
        "Entra ID users (`/users`), members and guests. Deleted users are gone from this table; disabled "
        "ones remain with `account_enabled = 0`.",
        (
            col("id", "Object id (GUID).", required=True),
            col(
                "user_principal_name",
                "UPN, the sign-in name. Members use `<initial><surname>@corvid.io`; "
                "guests use `<mail with @ as _>#EXT#@corvid.onmicrosoft.com`.",
                required=True,
            ),
            col("mail", "Primary SMTP address; for members usually `first.last@corvid.io`."),
            col("display_name", "Display name.", required=True),
            col("given_name", "Given name."),
            col("surname", "Surname."),
            col("job_title", "Job title as synced to the directory (may lag HR)."),
            col("department", "Department as synced to the directory (may lag HR)."),
            col("user_type", "`Member` or `Guest`.", required=True),
            col("account_enabled", "1 if the account can sign in, 0 if disabled.", "INTEGER", required=True),
            col("external_user_state", "For guests: `Accepted` or `PendingAcceptance`; NULL for members."),
            col("created_date_time", "Creation time (UTC).", required=True),
            col(
                "last_sign_in_date_time",
                "Last interactive sign-in (UTC), from `signInActivity`; NULL if never.",
            ),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_groups",
        "Entra ID groups. Security groups can be nested; role-assignable groups can hold directory roles.",
        (
            col("id", "Object id (GUID).", required=True),
            col("display_name", "Group name.", required=True),
            col("description", "Free-text description."),
            col("mail_nickname", "Mail nickname."),
            col("security_enabled", "1 for security groups.", "INTEGER", required=True),
            col("mail_enabled", "1 for mail-enabled groups.", "INTEGER", required=True),
            col(
                "group_types",
                "`Unified` for Microsoft 365 groups, `DynamicMembership` for rule-based groups, "
                "empty for plain security groups.",
            ),
            col(
                "is_assignable_to_role",
                "1 if directory roles can be assigned to the group.",
                "INTEGER",
                required=True,
            ),
            col("created_date_time", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_group_members",
        "Direct members of each group. A member may itself be a group (nesting): membership is transitive.",
        (
            col("group_id", "`azure_groups.id`.", required=True),
            col(
                "member_id",
                "Object id of the member: an `azure_users.id`, an `azure_groups.id` or an "
                "`azure_service_principals.id`.",
                required=True,
            ),
            col("member_type", "`user`, `group` or `servicePrincipal`.", required=True),
        ),
        primary_key=("group_id", "member_id"),
        foreign_keys=(fk("group_id", "azure_groups", "id"),),
    ),
    Table(
        "azure_directory_roles",
        "Built-in directory role definitions in use in the tenant.",
        (
            col("id", "Role template id (GUID), the same in every tenant.", required=True),
            col("display_name", "Role name, e.g. `Global Administrator`.", required=True),
            col("is_privileged", "1 if Microsoft marks the role as privileged.", "INTEGER", required=True),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_role_assignments",
        "Directory role assignments (`/roleManagement/directory/roleAssignments` plus PIM eligibility). "
        "A role assigned to a group applies to every (transitive) member.",
        (
            col("id", "Assignment id.", required=True),
            col("role_definition_id", "`azure_directory_roles.id`.", required=True),
            col(
                "principal_id",
                "Object id of the user, group or service principal holding the role.",
                required=True,
            ),
            col("principal_type", "`User`, `Group` or `ServicePrincipal`.", required=True),
            col("directory_scope_id", "`/` for the whole tenant, or an administrative unit path."),
            col(
                "assignment_type",
                "`Active` (holds the role now) or `Eligible` (PIM: must activate first).",
                required=True,
            ),
            col("created_date_time", "When the assignment was made (UTC)."),
        ),
        primary_key=("id",),
        foreign_keys=(fk("role_definition_id", "azure_directory_roles", "id"),),
    ),
    Table(
        "azure_conditional_access_policies",
        "Conditional access policies. Who each policy targets is in `azure_conditional_access_targets`.",
        (
            col("id", "Policy id (GUID).", required=True),
            col("display_name", "Policy name.", required=True),
            col(
                "state",
                "`enabled`, `disabled` or `enabledForReportingButNotEnforced` (report-only: "
                "evaluated and logged, never enforced).",
                required=True,
            ),
            col(
                "grant_controls",
                "Comma-separated built-in controls: `mfa`, `compliantDevice`, "
                "`domainJoinedDevice`, `passwordChange` or `block`.",
            ),
            col("grant_operator", "`OR` (any control satisfies) or `AND` (all are required)."),
            col(
                "client_app_types",
                "Comma-separated client app types the policy applies to, e.g. `all`, "
                "`exchangeActiveSync,other` (legacy authentication).",
            ),
            col("created_date_time", "Creation time (UTC)."),
            col("modified_date_time", "Last modification (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_conditional_access_targets",
        "The users, groups and roles each policy includes or excludes. An exclusion beats an inclusion. "
        "A group target covers the group's transitive members.",
        (
            col("policy_id", "`azure_conditional_access_policies.id`.", required=True),
            col("scope", "`include` or `exclude`.", required=True),
            col("target_type", "`user`, `group`, `role` or `special`.", required=True),
            col(
                "target_id",
                "An `azure_users.id`, `azure_groups.id` or `azure_directory_roles.id`; for "
                "`special`: `All` or `GuestsOrExternalUsers`.",
                required=True,
            ),
        ),
        primary_key=("policy_id", "scope", "target_type", "target_id"),
        foreign_keys=(fk("policy_id", "azure_conditional_access_policies", "id"),),
    ),
    Table(
        "azure_user_registration_details",
        "Authentication methods registration per user (`/reports/authenticationMethods/userRegistrationDetails`).",
        (
            col("id", "`azure_users.id`.", required=True),
            col("user_principal_name", "UPN at the time of the report.", required=True),
            col("is_mfa_registered", "1 if the user registered any MFA method.", "INTEGER", required=True),
            col(
                "is_mfa_capable",
                "1 if a registered method is usable for MFA under current policy.",
                "INTEGER",
                required=True,
            ),
            col(
                "is_passwordless_capable",
                "1 if a passwordless method is registered.",
                "INTEGER",
                required=True,
            ),
            col(
                "methods_registered",
                "Comma-separated: `microsoftAuthenticatorPush`, `softwareOneTimePasscode`, "
                "`fido2`, `windowsHelloForBusiness`, `mobilePhone`, `email`. Empty if none.",
            ),
            col(
                "default_mfa_method",
                "`microsoftAuthenticatorPush`, `softwareOneTimePasscode`, `fido2`, `sms`, `voiceMobile` or `none`.",
            ),
            col("last_updated_date_time", "When the details were computed (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_service_principals",
        "Service principals: the tenant's own app registrations, Microsoft first-party apps, managed "
        "identities and multi-tenant third-party apps consented into the tenant.",
        (
            col("id", "Object id (GUID).", required=True),
            col("app_id", "Application (client) id (GUID).", required=True),
            col("display_name", "App name.", required=True),
            col("service_principal_type", "`Application` or `ManagedIdentity`.", required=True),
            col("account_enabled", "1 if sign-in is enabled.", "INTEGER", required=True),
            col(
                "app_owner_organization_id",
                "Tenant id of the publisher. The company's own tenant is "
                "`7c1d9e02-45b3-4f7a-9a61-2e8c4b5d0f13`; Microsoft's is `f8cdef31-a31e-4b4a-93e4-5f571e91255a`.",
            ),
            col("created_date_time", "Creation time (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "azure_service_principal_credentials",
        "Client secrets and certificates on service principals and their app registrations.",
        (
            col("key_id", "Credential id (GUID).", required=True),
            col("service_principal_id", "`azure_service_principals.id`.", required=True),
            col("type", "`Password` (client secret) or `AsymmetricX509Cert`.", required=True),
            col("display_name", "Credential description."),
            col("start_date_time", "Valid from (UTC).", required=True),
            col(
                "end_date_time",
                "Expires (UTC). Secrets valid for more than two years violate policy.",
                required=True,
            ),
        ),
        primary_key=("key_id",),
        foreign_keys=(fk("service_principal_id", "azure_service_principals", "id"),),
    ),
    Table(
        "azure_service_principal_owners",
        "Users who own each service principal and can manage its credentials.",
        (
            col("service_principal_id", "`azure_service_principals.id`.", required=True),
            col("owner_id", "`azure_users.id`.", required=True),
        ),
        primary_key=("service_principal_id", "owner_id"),
        foreign_keys=(
            fk("service_principal_id", "azure_service_principals", "id"),
            fk("owner_id", "azure_users", "id"),
        ),
    ),
)

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


def generate(org: Org) -> Rows:
    """Members, guests, groups, roles, conditional access and service principals."""
    rng = org.rng
    users: list[AzureUser] = []
    rows_users: list[tuple[object, ...]] = []
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
            (
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
            (
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
            (
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
    org.shared["azure_users"] = users
    by_upn = {u.upn: u for u in users}
    out = _groups_roles_ca(org, users, by_upn, rows_users)
    out["azure_users"] = rows_users
    out.update(_service_principals(org, users))
    return out


def _groups_roles_ca(
    org: Org, users: list[AzureUser], by_upn: dict[str, AzureUser], rows_users: list[tuple[object, ...]]
) -> Rows:
    rng = org.rng
    groups: dict[str, str] = {}
    rows_groups: list[tuple[object, ...]] = []
    members: list[tuple[object, ...]] = []

    def group(name: str, desc: str, *, role: bool = False, kind: str = "", mail: bool = False) -> str:
        gid = org.guid()
        groups[name] = gid
        rows_groups.append(
            (
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
        members.append((groups[g], mid, kind))

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

    rows_roles = [(rid, name, priv) for rid, name, priv in ROLES]
    assigns: list[tuple[object, ...]] = []

    def assign(role: str, pid: str, ptype: str = "User", kind: str = "Active") -> None:
        assigns.append(
            (
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
    idx = next(i for i, r in enumerate(rows_users) if r[0] == dormant.id)
    rows_users[idx] = (*rows_users[idx][:12], "2025-11-21T16:40:00Z")
    org.shared["azure_roles"] = assigns
    org.shared["azure_ga"] = ga

    rows_ca, rows_targets = _conditional_access(org, groups, by_upn, ga)
    rows_reg = _registration(org, users, ga)
    return {
        "azure_groups": rows_groups,
        "azure_group_members": members,
        "azure_directory_roles": rows_roles,
        "azure_role_assignments": assigns,
        "azure_conditional_access_policies": rows_ca,
        "azure_conditional_access_targets": rows_targets,
        "azure_user_registration_details": rows_reg,
    }


def _conditional_access(
    org: Org, groups: dict[str, str], by_upn: dict[str, AzureUser], ga: list[AzureUser]
) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    policies: list[tuple[object, ...]] = []
    targets: list[tuple[object, ...]] = []
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
        policies.append((pid, name, state, grant, "OR", apps, "2022-01-10T10:00:00Z", "2026-02-17T15:20:00Z"))
        for scope, kind, target in rules:
            targets.append((pid, scope, kind, target))
    return policies, targets


def _registration(org: Org, users: list[AzureUser], ga: list[AzureUser]) -> list[tuple[object, ...]]:
    rng = org.rng
    rows: list[Row] = []
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
            (
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


def _service_principals(org: Org, users: list[AzureUser]) -> Rows:
    rng = org.rng
    sps: list[tuple[object, ...]] = []
    creds: list[tuple[object, ...]] = []
    owners: list[tuple[object, ...]] = []

    def sp(name: str, tenant: str, kind: str = "Application") -> str:
        sid = org.guid()
        sps.append(
            (
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
            (
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
            creds.append((org.guid(), sid, "Password", "long-lived", ts(start), ts(end)))
        if i in (4, 9):
            old = start - timedelta(days=800)
            creds.append((org.guid(), sid, "Password", "old-expired", ts(old), ts(old + timedelta(days=365))))
        if i % 3 == 0:
            creds.append(
                (
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
            owners.append((sid, u.id))
    org.shared["azure_sp"] = [s[0] for s in sps]
    # Privileged service principals: one internal app holds Global Administrator (toxic), one holds
    # Application Administrator.
    roles: list[tuple[object, ...]] = org.shared["azure_roles"]  # type: ignore[assignment]
    by_name = {s[2]: s[0] for s in sps}
    roles.append(
        (
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
        (
            org.guid(),
            ROLE["Application Administrator"],
            by_name["corvid-terraform"],
            "ServicePrincipal",
            "/",
            "Active",
            "2023-09-14T12:00:00Z",
        )
    )
    return {
        "azure_service_principals": sps,
        "azure_service_principal_credentials": creds,
        "azure_service_principal_owners": owners,
    }
