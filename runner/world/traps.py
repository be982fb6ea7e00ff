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

from runner.world.org import AS_OF, OLD_DOMAIN, Org, Person, Row, at, ts
from runner.world.vendors.azure import ROLE, AzureUser

OKTA_ID_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
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


class _Ids:
    """Identifiers drawn from the plantings' own generator, in the vendors' formats."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def guid(self) -> str:
        h = "".join(self.rng.choice("0123456789abcdef") for _ in range(32))
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def okta(self, prefix: str) -> str:
        return prefix + "".join(self.rng.choice(OKTA_ID_ALPHABET) for _ in range(17))


def plant(org: Org, rows: dict[str, list[Row]], seed: int) -> dict[str, list[Row]]:
    """The rows to add, per table. Reads the generated estate; changes nothing in it."""
    rng = random.Random(f"{seed}:traps")
    ids = _Ids(rng)
    added: dict[str, list[Row]] = {}
    added.update(_azure_nesting(org, rows, rng, ids))
    for planted in (
        _okta_twins(org, rows, rng, ids),
        _alias_grants(org, rows, rng, ids),
        _federated_after_deactivation(org, rows, rng),
    ):
        for table, table_rows in planted.items():
            added.setdefault(table, []).extend(table_rows)
    return added


# ----------------------------------------------------------------------------------- Azure AD
def _azure_nesting(org: Org, rows: dict[str, list[Row]], rng: random.Random, ids: _Ids) -> dict[str, list[Row]]:
    users: list[AzureUser] = org.shared["azure_users"]  # type: ignore[assignment]
    groups = {str(r[1]): str(r[0]) for r in rows["azure_groups"]}
    role_holders = {str(r[2]) for r in rows["azure_role_assignments"]}
    dynamic = {str(r[0]) for r in rows["azure_groups"] if r[6] == "DynamicMembership"}
    # Users already in a hand-managed group or holding a role are left alone, so each plant is the only reason.
    grouped = {str(r[1]) for r in rows["azure_group_members"] if r[2] == "user" and str(r[0]) not in dynamic}
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

    new_groups: list[Row] = []
    members: list[Row] = []
    for name, desc, parent in NESTED_GROUPS:
        gid = ids.guid()
        groups[name] = gid
        role_assignable = name == "SG-GA-Eligible"
        new_groups.append((gid, name, desc, name.lower(), 1, 0, "", int(role_assignable), "2024-02-19T10:00:00Z"))
        if parent is not None:
            members.append((groups[parent], gid, "group"))
    # Two and three levels below the role-holding groups; a disabled leaver is the decoy among them.
    members += [
        (groups["SG-Tier0-OnCall"], enabled_leaver_a.id, "user"),
        (groups["SG-Tier0-OnCall"], disabled_leaver.id, "user"),
        (groups["SG-Tier0-Operators"], it_staff.id, "user"),
        (groups["SG-Helpdesk-Weekend"], contractor.id, "user"),
        (groups["SG-Helpdesk-Contractors"], intern.id, "user"),
        (groups["SG-GA-Candidates"], enabled_leaver_b.id, "user"),
        # Backwards decoy: SG-IT-All contains the Tier 0 group, which gives SG-IT-All's own members nothing.
        (groups["SG-IT-All"], groups["SG-Tier0-Admins"], "group"),
        (groups["SG-IT-All"], outsider.id, "user"),
    ]
    assignment = (
        ids.guid(),
        ROLE["Global Administrator"],
        groups["SG-GA-Eligible"],
        "Group",
        "/",
        "Eligible",
        "2024-02-20T09:30:00Z",
    )
    return {"azure_groups": new_groups, "azure_group_members": members, "azure_role_assignments": [assignment]}


# --------------------------------------------------------------------------------- identities
def _okta_twins(org: Org, rows: dict[str, list[Row]], rng: random.Random, ids: _Ids) -> dict[str, list[Row]]:
    okta_by_login = {str(r[2]).lower(): r for r in rows["okta_users"]}
    workspace = {str(r[1]) for r in rows["gws_users"]}
    taken = set(okta_by_login)

    def corvid_status(p: Person) -> str | None:
        account = okta_by_login.get(p.email)
        return None if account is None else str(account[1])

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
    users: list[Row] = []

    def twin(p: Person, status: str) -> str:
        uid = ids.okta("00u")
        created = at(date(2023, 3, 6), 10)
        if p.termination is not None:
            last, changed = at(p.termination) + timedelta(days=rng.randint(20, 60), hours=rng.randint(0, 8)), created
        else:
            last = at(date(2023, 9, 1)) + timedelta(days=rng.randint(0, 60))
            changed = last + timedelta(days=1)
        users.append(
            (
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
    roles: list[Row] = [(ids.okta("ra"), "HELP_DESK_ADMIN", "USER", helpdesk_twin, "ACTIVE", "2023-06-14T11:00:00Z")]
    roles += _revoked_grants(org, rows, rng, ids)
    return {"okta_users": users, "okta_admin_role_assignments": roles}


def _alias_grants(org: Org, rows: dict[str, list[Row]], rng: random.Random, ids: _Ids) -> dict[str, list[Row]]:
    """Leavers whose Workspace user is suspended but whose old address, kept as its alias, still has access.

    Their corvid.io identity is suspended while the alias identity is live. Whether the address also
    follows the Lumen login pattern is left to the draw; where it carries a digit (the pattern address
    belonged to someone else first), only the alias ties it to the person.
    """
    suspended = {str(r[1]): str(r[0]) for r in rows["gws_users"] if r[8] == 1}
    aliases = {(str(r[0]), str(r[1])) for r in rows["gws_user_aliases"]}
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
    projects = {str(r[1]): str(r[0]) for r in rows["atlas_projects"]}
    atlas_id = "".join(rng.choice("0123456789abcdef") for _ in range(24))
    return {
        "gcp_iam_bindings": [("projects/lumen-analytics-legacy", "roles/editor", f"user:{gcp_holder.old_email}", None)],
        "atlas_org_users": [
            (
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
            (atlas_id, "org", None, "ORG_MEMBER"),
            (atlas_id, "project", projects["lumen-legacy"], "GROUP_READ_ONLY"),
        ],
    }


def _federated_after_deactivation(org: Org, rows: dict[str, list[Row]], rng: random.Random) -> dict[str, list[Row]]:
    """A leaver whose only Okta account, under the old Lumen login, was deactivated, yet whose federated Atlas
    user (on corvid.io) signed in afterwards. Only the Lumen login pattern ties that Okta account to them."""
    okta_logins = {str(r[2]).lower(): r for r in rows["okta_users"]}
    atlas_names = {str(r[1]).lower() for r in rows["atlas_org_users"]}
    leavers = sorted(
        (
            p
            for p in org.people
            if p.left
            and p.old_email == lumen_login(p)
            and p.email not in okta_logins
            and (o := okta_logins.get(p.old_email)) is not None
            and o[1] == "DEPROVISIONED"
            and not {p.email, p.old_email} & atlas_names
        ),
        key=lambda p: p.pid,
    )
    person = rng.choice(leavers)
    assert person.old_email is not None
    deactivated = str(okta_logins[person.old_email][9])
    last_auth = _parse(deactivated) + timedelta(days=rng.randint(5, 40), hours=rng.randint(1, 9))
    projects = {str(r[1]): str(r[0]) for r in rows["atlas_projects"]}
    atlas_id = "".join(rng.choice("0123456789abcdef") for _ in range(24))
    return {
        "atlas_org_users": [
            (atlas_id, person.email, person.first, person.last, "GB", "2023-04-03T09:00:00Z", ts(last_auth), 1, 1)
        ],
        "atlas_user_roles": [
            (atlas_id, "org", None, "ORG_MEMBER"),
            (atlas_id, "project", projects["dev"], "GROUP_READ_ONLY"),
        ],
    }


def _parse(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _revoked_grants(org: Org, rows: dict[str, list[Row]], rng: random.Random, ids: _Ids) -> list[Row]:
    """Inactive (revoked) admin roles on accounts that can sign in: a leaver, and an Azure Global Administrator."""
    okta_by_email = {str(r[3]).lower(): r for r in rows["okta_users"]}
    holders = {str(r[3]) for r in rows["okta_admin_role_assignments"]}
    leavers = sorted(
        str(r[0])
        for p in org.people
        if "okta_active_leaver" in p.tags
        and (r := okta_by_email.get(p.email)) is not None
        and r[1] == "ACTIVE"
        and str(r[0]) not in holders
    )
    ga: list[AzureUser] = org.shared["azure_ga"]  # type: ignore[assignment]
    admins = sorted(
        str(r[0])
        for u in ga
        if u.person
        and (r := okta_by_email.get(u.person.email)) is not None
        and r[1] == "ACTIVE"
        and str(r[0]) not in holders
    )
    return [
        (ids.okta("ra"), "ORG_ADMIN", "USER", rng.choice(leavers), "INACTIVE", "2024-01-08T09:00:00Z"),
        (ids.okta("ra"), "SUPER_ADMIN", "USER", rng.choice(admins), "INACTIVE", "2023-11-27T15:00:00Z"),
    ]
