"""Plantings that make the documented traps decide answers.

The vendor modules plant the posture findings; this step runs after all of them and plants the cases
where reading an identity or a grant the careless way gives a different answer:

- **Azure AD nesting** at two levels and more under groups that hold roles, with decoys: a disabled
  account in a nested group, and a group that *contains* a role-holding group (reading nesting
  backwards would give its members the role).
- **PIM through nesting**: a role-assignable group that is only eligible for Global Administrator,
  reached through a nested group.
- **Alias identities**: leavers whose corvid.io Workspace user is suspended but whose old address, which
  the surviving Workspace alias ties to them, still holds a Google Cloud role or an Atlas user.
- **Lumen-login-only Okta twins**: leavers whose corvid.io Okta account was deactivated but who still
  have an active Okta account under their old Lumen login, and whose Workspace user was deleted (taking
  the alias with it), so only the documented Lumen login pattern ties the account to them; one of them
  still holds an Okta admin role. As a decoy, a current employee whose old-login twin is deactivated.
- **Federation after deactivation, through a Lumen login**: a leaver whose only Okta account (old login)
  was deactivated but whose federated Atlas user signed in afterwards.
- **Revoked grants**: inactive Okta admin role assignments on accounts that can sign in.

It has its own seeded ``random.Random`` and only adds rows, so every row the vendors generated is
unchanged and the answers it moves are exactly the ones these cases decide.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from runner.world.org import AS_OF, HEX_DIGITS, OLD_DOMAIN, Org, Person, Row, Rows, at, draw_guid, draw_token, ts
from runner.world.tables import rows_of
from runner.world.tables.atlas import AtlasOrgUserRow, AtlasProjectRow, AtlasUserRoleRow
from runner.world.tables.azure import AzureGroupMemberRow, AzureGroupRow, AzureRoleAssignmentRow
from runner.world.tables.gcp import GcpIamBindingRow
from runner.world.tables.gws import GwsUserAliasRow, GwsUserRow
from runner.world.tables.okta import OktaAdminRoleAssignmentRow, OktaUserRow
from runner.world.vendors.azure import ROLE, AzureDirectory, AzureUser
from runner.world.vendors.okta import okta_id

# Planted groups: (name, description, the group it is nested in, or None for a top-level group).
NESTED_GROUPS: tuple[tuple[str, str, str | None], ...] = (
    ("SG-Tier0-Operators", "Tier 0 operations staff", "SG-Tier0-Admins"),
    ("SG-Tier0-OnCall", "Tier 0 on-call rota", "SG-Tier0-Operators"),
    ("SG-Helpdesk-Tier2", "Second-line help desk", "SG-Helpdesk"),
    ("SG-Helpdesk-Contractors", "Contracted help desk staff", "SG-Helpdesk-Tier2"),
    ("SG-Helpdesk-Weekend", "Weekend help desk cover", "SG-Helpdesk-Contractors"),
    ("SG-GA-Eligible", "Candidates for just-in-time Global Administrator (role-assignable)", None),
    ("SG-GA-Candidates", "People nominated for just-in-time Global Administrator", "SG-GA-Eligible"),
    ("SG-IT-All", "Everyone in IT, including the Tier 0 group", None),
)


def lumen_login(p: Person) -> str:
    """The Lumen login pattern: first initial and surname, lower case, on the old domain."""
    return f"{p.first[0]}{p.last}".lower() + f"@{OLD_DOMAIN}"


def plant(org: Org, rows: dict[str, list[Row]], seed: int, azure: AzureDirectory) -> dict[str, list[Row]]:
    """The rows to add, per table. Reads the generated estate; changes nothing in it."""
    rng = random.Random(f"{seed}:traps")
    added: dict[str, list[Row]] = {}
    for planted in (
        _azure_nesting(org, rows, rng, azure.users),
        _okta_twins(org, rows, rng, azure.global_admins),
        _alias_grants(org, rows, rng),
        _federated_after_deactivation(org, rows, rng),
    ):
        for table, table_rows in planted.items():
            added.setdefault(table, []).extend(table_rows)
    return added


# ----------------------------------------------------------------------------------- Azure AD
def _azure_nesting(org: Org, rows: dict[str, list[Row]], rng: random.Random, users: Sequence[AzureUser]) -> Rows:
    azure_groups = rows_of(rows, AzureGroupRow)
    groups = {r.display_name: r.id for r in azure_groups}
    role_holders = {r.principal_id for r in rows_of(rows, AzureRoleAssignmentRow)}
    dynamic = {r.id for r in azure_groups if r.group_types == "DynamicMembership"}
    # Users already in a hand-managed group or holding a role are left alone, so each plant is the only reason.
    grouped = {
        r.member_id for r in rows_of(rows, AzureGroupMemberRow) if r.member_type == "user" and r.group_id not in dynamic
    }
    quiet = [u for u in users if u.person and u.id not in role_holders and u.id not in grouped]

    def one(pool: Sequence[AzureUser]) -> AzureUser:
        chosen = rng.choice(sorted(pool, key=lambda u: u.id))
        quiet.remove(chosen)
        return chosen

    enabled_leaver_a = one([u for u in quiet if u.enabled and u.person and u.person.left])
    enabled_leaver_b = one([u for u in quiet if u.enabled and u.person and u.person.left])
    disabled_leaver = one([u for u in quiet if not u.enabled and u.person and u.person.left])
    it_staff = one(
        [u for u in quiet if u.enabled and u.person and "it" in u.person.tags and u.person.status == "active"]
    )
    contractor = one(
        [
            u
            for u in quiet
            if u.enabled
            and u.person
            and u.person.status == "active"
            and u.person.employment_type == "Contractor"
            and u.person.contract_end is not None
            and u.person.contract_end < AS_OF.date()
        ]
    )
    intern = one(
        [
            u
            for u in quiet
            if u.enabled and u.person and u.person.status == "active" and u.person.employment_type == "Intern"
        ]
    )
    outsider = one(
        [
            u
            for u in quiet
            if u.enabled
            and u.person
            and u.person.status == "active"
            and not ({"it", "sec"} & u.person.tags)
            and u.person.employment_type == "Permanent"
        ]
    )

    new_groups: list[AzureGroupRow] = []
    members: list[AzureGroupMemberRow] = []
    for name, desc, parent in NESTED_GROUPS:
        gid = draw_guid(rng)
        groups[name] = gid
        role_assignable = name == "SG-GA-Eligible"
        new_groups.append(
            AzureGroupRow(gid, name, desc, name.lower(), 1, 0, "", int(role_assignable), "2024-02-19T10:00:00Z")
        )
        if parent is not None:
            members.append(AzureGroupMemberRow(groups[parent], gid, "group"))
    # Two and three levels below the role-holding groups; a disabled leaver is the decoy among them.
    members += [
        AzureGroupMemberRow(groups["SG-Tier0-OnCall"], enabled_leaver_a.id, "user"),
        AzureGroupMemberRow(groups["SG-Tier0-OnCall"], disabled_leaver.id, "user"),
        AzureGroupMemberRow(groups["SG-Tier0-Operators"], it_staff.id, "user"),
        AzureGroupMemberRow(groups["SG-Helpdesk-Weekend"], contractor.id, "user"),
        AzureGroupMemberRow(groups["SG-Helpdesk-Contractors"], intern.id, "user"),
        AzureGroupMemberRow(groups["SG-GA-Candidates"], enabled_leaver_b.id, "user"),
        # Backwards decoy: SG-IT-All contains the Tier 0 group, which gives SG-IT-All's own members nothing.
        AzureGroupMemberRow(groups["SG-IT-All"], groups["SG-Tier0-Admins"], "group"),
        AzureGroupMemberRow(groups["SG-IT-All"], outsider.id, "user"),
    ]
    assignment = AzureRoleAssignmentRow(
        draw_guid(rng),
        ROLE["Global Administrator"],
        groups["SG-GA-Eligible"],
        "Group",
        "/",
        "Eligible",
        "2024-02-20T09:30:00Z",
    )
    return {"azure_groups": new_groups, "azure_group_members": members, "azure_role_assignments": [assignment]}


# --------------------------------------------------------------------------------- identities
def _okta_twins(org: Org, rows: dict[str, list[Row]], rng: random.Random, global_admins: Sequence[AzureUser]) -> Rows:
    okta_by_login = {r.login.lower(): r for r in rows_of(rows, OktaUserRow)}
    workspace = {r.primary_email for r in rows_of(rows, GwsUserRow)}
    taken = set(okta_by_login)

    def corvid_status(p: Person) -> str | None:
        account = okta_by_login.get(p.email)
        return None if account is None else account.status

    # Leavers whose corvid.io Okta account was deactivated and whose Workspace user (with its alias) is gone.
    login_only = rng.sample(
        sorted(
            (
                p
                for p in org.people
                if p.left
                and p.old_email == lumen_login(p)
                and p.old_email not in taken
                and p.email not in workspace
                and corvid_status(p) == "DEPROVISIONED"
            ),
            key=lambda p: p.pid,
        ),
        2,
    )
    # Decoy: a current employee whose corvid.io account is active and whose old-login twin was deactivated.
    deactivated_twin = rng.choice(
        sorted(
            (
                p
                for p in org.people
                if p.status == "active"
                and p.old_email == lumen_login(p)
                and p.old_email not in taken
                and corvid_status(p) == "ACTIVE"
            ),
            key=lambda p: p.pid,
        )
    )
    users: list[OktaUserRow] = []

    def twin(p: Person, status: str) -> str:
        assert p.old_email is not None
        uid = okta_id(rng, "00u")
        created = at(date(2023, 3, 6), 10)
        if p.termination is not None:
            last, changed = at(p.termination) + timedelta(days=rng.randint(20, 60), hours=rng.randint(0, 8)), created
        else:
            last = at(date(2023, 9, 1)) + timedelta(days=rng.randint(0, 60))
            changed = last + timedelta(days=1)
        users.append(
            OktaUserRow(
                uid,
                status,
                p.old_email,
                p.old_email,
                p.first,
                p.last,
                "employee",
                ts(created),
                ts(created + timedelta(hours=2)),
                ts(changed),
                ts(min(last, AS_OF - timedelta(days=1))),
                ts(created),
            )
        )
        return uid

    helpdesk_twin = twin(login_only[0], "ACTIVE")
    twin(login_only[1], "ACTIVE")
    twin(deactivated_twin, "DEPROVISIONED")
    # A Lumen-login-only leaver who still administers Okta through the old account.
    roles = [
        OktaAdminRoleAssignmentRow(
            okta_id(rng, "ra"), "HELP_DESK_ADMIN", "USER", helpdesk_twin, "ACTIVE", "2023-06-14T11:00:00Z"
        )
    ]
    roles += _revoked_grants(org, rows, rng, global_admins)
    return {"okta_users": users, "okta_admin_role_assignments": roles}


def _alias_grants(org: Org, rows: dict[str, list[Row]], rng: random.Random) -> Rows:
    """Leavers whose Workspace user is suspended but whose old address, kept as its alias, still has access.

    Their corvid.io identity is suspended while the alias identity is live. Whether the address also
    follows the Lumen login pattern is left to the draw; where it carries a digit (the pattern address
    belonged to someone else first), only the alias ties it to the person.
    """
    suspended = {r.primary_email: r.id for r in rows_of(rows, GwsUserRow) if r.suspended == 1}
    aliases = {(r.user_id, r.alias) for r in rows_of(rows, GwsUserAliasRow)}
    leavers = sorted(
        (
            p
            for p in org.people
            if p.left and p.old_email and p.email in suspended and (suspended[p.email], p.old_email) in aliases
        ),
        key=lambda p: p.pid,
    )
    gcp_holder, atlas_holder = rng.sample(leavers, 2)
    assert gcp_holder.old_email is not None and atlas_holder.old_email is not None
    projects = {r.name: r.id for r in rows_of(rows, AtlasProjectRow)}
    atlas_id = draw_token(rng, HEX_DIGITS, 24)
    binding = GcpIamBindingRow("projects/lumen-analytics-legacy", "roles/editor", f"user:{gcp_holder.old_email}", None)
    return {
        "gcp_iam_bindings": [binding],
        "atlas_org_users": [
            AtlasOrgUserRow(
                atlas_id,
                atlas_holder.old_email,
                atlas_holder.first,
                atlas_holder.last,
                "GB",
                "2022-11-02T09:00:00Z",
                ts(AS_OF - timedelta(days=rng.randint(3, 20), hours=rng.randint(0, 12))),
                0,
                0,
            )
        ],
        "atlas_user_roles": [
            AtlasUserRoleRow(atlas_id, "org", None, "ORG_MEMBER"),
            AtlasUserRoleRow(atlas_id, "project", projects["lumen-legacy"], "GROUP_READ_ONLY"),
        ],
    }


def _federated_after_deactivation(org: Org, rows: dict[str, list[Row]], rng: random.Random) -> Rows:
    """A leaver whose only Okta account, under the old Lumen login, was deactivated, yet whose federated Atlas
    user (on corvid.io) signed in afterwards. Only the Lumen login pattern ties that Okta account to them."""
    okta_logins = {r.login.lower(): r for r in rows_of(rows, OktaUserRow)}
    atlas_names = {r.username.lower() for r in rows_of(rows, AtlasOrgUserRow)}
    leavers = sorted(
        (
            p
            for p in org.people
            if p.left
            and p.old_email == lumen_login(p)
            and p.email not in okta_logins
            and (o := okta_logins.get(p.old_email)) is not None
            and o.status == "DEPROVISIONED"
            and not {p.email, p.old_email} & atlas_names
        ),
        key=lambda p: p.pid,
    )
    person = rng.choice(leavers)
    assert person.old_email is not None
    deactivated = okta_logins[person.old_email].status_changed
    assert deactivated is not None
    last_auth = _parse(deactivated) + timedelta(days=rng.randint(5, 40), hours=rng.randint(1, 9))
    projects = {r.name: r.id for r in rows_of(rows, AtlasProjectRow)}
    atlas_id = draw_token(rng, HEX_DIGITS, 24)
    return {
        "atlas_org_users": [
            AtlasOrgUserRow(
                atlas_id, person.email, person.first, person.last, "GB", "2023-04-03T09:00:00Z", ts(last_auth), 1, 1
            )
        ],
        "atlas_user_roles": [
            AtlasUserRoleRow(atlas_id, "org", None, "ORG_MEMBER"),
            AtlasUserRoleRow(atlas_id, "project", projects["dev"], "GROUP_READ_ONLY"),
        ],
    }


def _parse(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _revoked_grants(
    org: Org, rows: dict[str, list[Row]], rng: random.Random, global_admins: Sequence[AzureUser]
) -> list[OktaAdminRoleAssignmentRow]:
    """Inactive (revoked) admin roles on accounts that can sign in: a leaver, and an Azure Global Administrator."""
    okta_by_email = {r.email.lower(): r for r in rows_of(rows, OktaUserRow)}
    holders = {r.assignee_id for r in rows_of(rows, OktaAdminRoleAssignmentRow)}
    leavers = sorted(
        r.id
        for p in org.people
        if "okta_active_leaver" in p.tags
        and (r := okta_by_email.get(p.email)) is not None
        and r.status == "ACTIVE"
        and r.id not in holders
    )
    admins = sorted(
        r.id
        for u in global_admins
        if u.person
        and (r := okta_by_email.get(u.person.email)) is not None
        and r.status == "ACTIVE"
        and r.id not in holders
    )
    return [
        OktaAdminRoleAssignmentRow(
            okta_id(rng, "ra"), "ORG_ADMIN", "USER", rng.choice(leavers), "INACTIVE", "2024-01-08T09:00:00Z"
        ),
        OktaAdminRoleAssignmentRow(
            okta_id(rng, "ra"), "SUPER_ADMIN", "USER", rng.choice(admins), "INACTIVE", "2023-11-27T15:00:00Z"
        ),
    ]
