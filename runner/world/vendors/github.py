"""GitHub: the `corvid-systems` organization. Members, outside collaborators, nested teams, repos and
their permissions, SAML identity links, 2FA and deploy keys.

A GitHub login is chosen by its owner and says nothing about who they are; the only link to a person
is the SAML identity (the IdP name id the member last signed in with).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Org, Person, Rows, at, ts
from runner.world.tables.github import (
    GithubDeployKeyRow,
    GithubOrgMemberRow,
    GithubOutsideCollaboratorRow,
    GithubRepoCollaboratorRow,
    GithubRepoRow,
    GithubSamlIdentityRow,
    GithubTeamMemberRow,
    GithubTeamRepoRow,
    GithubTeamRow,
)
from runner.world.vendors.okta import OktaDirectory

WORDS = (
    "pixel",
    "byte",
    "cloud",
    "rust",
    "neon",
    "quantum",
    "panda",
    "otter",
    "lambda",
    "vector",
    "ember",
    "dev",
    "hack",
    "ninja",
    "nomad",
    "echo",
    "tango",
    "delta",
    "flux",
    "orbit",
)
REPO_WORDS = (
    "api",
    "web",
    "infra",
    "platform",
    "billing",
    "auth",
    "search",
    "ingest",
    "etl",
    "ml",
    "docs",
    "sdk",
    "cli",
    "mobile",
    "console",
    "gateway",
    "events",
    "reports",
    "alerts",
    "scheduler",
)


def _login(org: Org, p: Person, taken: set[str]) -> str:
    rng = org.rng
    style = rng.random()
    if style < 0.3:
        login = f"{p.first.lower()}{p.last[:3].lower()}"
    elif style < 0.5:
        login = f"{p.handle}-corvid"
    elif style < 0.8:
        login = f"{rng.choice(WORDS)}{rng.choice(WORDS)}{rng.randint(1, 99)}"
    else:
        login = f"{p.first[0].lower()}{p.last.lower()}{rng.randint(70, 99)}"
    while login in taken:
        login += str(rng.randint(0, 9))
    taken.add(login)
    return login


def generate(org: Org, okta_directory: OktaDirectory) -> Rows:
    """Members and their SAML links (to Okta logins), then teams, repos and permissions."""
    rng = org.rng
    okta = okta_directory.users
    taken: set[str] = set()
    members: list[GithubOrgMemberRow] = []
    saml: list[GithubSamlIdentityRow] = []
    next_id = [1_204_511]

    def uid() -> int:
        next_id[0] += rng.randint(1_000, 900_000)
        return next_id[0]

    # Deprovisioning in Okta removes GitHub access (SAML); only the planted leavers below escape it.
    eng_okta = [u for u in okta if u.person and "github-users" in u.groups and u.status != "DEPROVISIONED"]
    leavers_removed = [u for u in okta if u.person and u.person.left and "eng" in u.person.tags]
    still_member = org.pick(
        [
            u.person
            for u in leavers_removed
            if u.person and u.person.termination and u.person.termination > date(2025, 3, 1)
        ],
        5,
    )
    login_of: dict[str, str] = {}
    for u in eng_okta + [u for u in leavers_removed if u.person in still_member]:
        assert u.person is not None
        p = u.person
        login = _login(org, p, taken)
        login_of[p.pid] = login
        if p in still_member:
            p.tags.add("github_leaver_member")
        members.append(
            GithubOrgMemberRow(
                login,
                uid(),
                "member",
                int(rng.random() < 0.95),
                p.name if rng.random() < 0.6 else None,
                ts(org.when(datetime(2012, 1, 1, tzinfo=AS_OF.tzinfo), at(p.start))),
            )
        )
        linked = ts(org.when(at(max(p.start, date(2020, 1, 1))), AS_OF - timedelta(days=5)))
        saml.append(GithubSamlIdentityRow(login, u.login, linked))
    # Members with no SAML identity: bots, and accounts that match nobody (family 5).
    for login, name in (
        ("corvid-ci-bot", "Corvid CI"),
        ("corvid-release-bot", None),
        ("dkwon-old", None),
        ("contractor-tmp-7", None),
        ("sre-shared", "SRE shared account"),
    ):
        taken.add(login)
        members.append(
            GithubOrgMemberRow(login, uid(), "member", 1 if "bot" in login else 0, name, "2021-05-05T12:00:00Z")
        )
    # The owner plants below replace members' rows here, in the members' order.
    by_login = {m.login: m for m in members}

    def make_owner(login: str, two_factor: int | None = None) -> None:
        row = by_login[login]._replace(role="admin")
        by_login[login] = row if two_factor is None else row._replace(two_factor_enabled=two_factor)

    # Owners: a handful of platform/security staff, plus planted problems.
    owner_candidates = [
        login_of[u.person.pid] for u in eng_okta if u.person and {"sre", "sec"} & u.person.tags and not u.person.left
    ]
    for login in owner_candidates[:5]:
        make_owner(login, two_factor=1)
    make_owner(owner_candidates[5], two_factor=0)  # Family 3: an owner without 2FA
    make_owner(login_of[still_member[0].pid])  # Family 1: a leaver who is still an owner
    make_owner("sre-shared")  # Family 5: an owner that resolves to no person
    members = list(by_login.values())
    outside = []
    for i in range(24):
        login = f"{rng.choice(WORDS)}-{rng.choice(('consulting', 'freelance', 'oss', 'dev', 'labs'))}{i}"
        taken.add(login)
        outside.append(GithubOutsideCollaboratorRow(login, uid(), int(i % 5 != 0), None))
    out = _repos(org, [m.login for m in members], owner_candidates, outside, login_of, still_member)
    out.update(
        {
            "github_org_members": members,
            "github_saml_identities": saml,
            "github_outside_collaborators": outside,
        }
    )
    return out


def _repos(
    org: Org,
    member_logins: list[str],
    leads: list[str],
    outside: Sequence[GithubOutsideCollaboratorRow],
    login_of: dict[str, str],
    leavers: list[Person],
) -> Rows:
    rng = org.rng
    repos: list[GithubRepoRow] = []
    names: set[str] = set()
    for i in range(210):
        name = f"{rng.choice(REPO_WORDS)}-{rng.choice(REPO_WORDS)}"
        while name in names:
            name = f"{name}-{rng.randint(2, 9)}"
        names.add(name)
        vis = "private" if i % 9 else ("public" if i % 2 else "internal")
        created = org.when(datetime(2016, 3, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=30))
        archived = int(rng.random() < 0.12)
        repos.append(
            GithubRepoRow(
                90_000 + i * 37,
                name,
                f"corvid-systems/{name}",
                vis,
                archived,
                "main",
                ts(created),
                ts(org.when(created, AS_OF - timedelta(days=1))),
            )
        )
    for name, vis in (
        ("platform-infra", "private"),
        ("terraform-aws", "private"),
        ("corvid-sdk-python", "public"),
        ("corvid-docs", "public"),
        ("lumen-pipelines", "internal"),
    ):
        repos.append(
            GithubRepoRow(
                90_000 + len(repos) * 37,
                name,
                f"corvid-systems/{name}",
                vis,
                0,
                "main",
                "2020-04-01T10:00:00Z",
                ts(AS_OF - timedelta(days=2)),
            )
        )
    repo_id = {r.name: r.id for r in repos}
    teams: list[GithubTeamRow] = []

    def team(slug: str, parent: int | None = None) -> int:
        tid = 4_400_000 + len(teams) * 13
        teams.append(GithubTeamRow(tid, slug, slug.replace("-", " ").title(), "closed", parent))
        return tid

    eng = team("engineering")
    plat = team("platform", eng)
    oncall = team("platform-oncall", plat)
    sec = team("security")
    data = team("data", eng)
    web = team("web", eng)
    mobile = team("mobile", eng)
    lumen = team("lumen-legacy")
    release = team("release-managers")
    tmembers: set[GithubTeamMemberRow] = set()
    humans = [m for m in member_logins if m in login_of.values()]
    for login in humans:
        tmembers.add(GithubTeamMemberRow(rng.choice((eng, data, web, mobile, eng)), login, "member"))
    for login in leads[:8]:
        tmembers.add(GithubTeamMemberRow(plat, login, "maintainer"))
    for login in rng.sample(humans, 6):
        tmembers.add(GithubTeamMemberRow(oncall, login, "member"))
    tmembers.add(GithubTeamMemberRow(oncall, login_of[leavers[1].pid], "member"))
    for login in leads[8:12]:
        tmembers.add(GithubTeamMemberRow(sec, login, "member"))
    for login in rng.sample(humans, 10):
        tmembers.add(GithubTeamMemberRow(lumen, login, "member"))
    for login in rng.sample(humans, 3):
        tmembers.add(GithubTeamMemberRow(release, login, "maintainer"))
    trepos: set[GithubTeamRepoRow] = set()
    for r in repos:
        trepos.add(GithubTeamRepoRow(eng, r.id, "push" if r.visibility != "public" else "pull"))
    trepos.add(GithubTeamRepoRow(plat, repo_id["platform-infra"], "admin"))
    trepos.add(GithubTeamRepoRow(plat, repo_id["terraform-aws"], "admin"))
    trepos.add(GithubTeamRepoRow(sec, repo_id["terraform-aws"], "pull"))
    trepos.add(GithubTeamRepoRow(lumen, repo_id["lumen-pipelines"], "maintain"))
    trepos.add(GithubTeamRepoRow(release, repo_id["corvid-sdk-python"], "admin"))
    collabs: set[GithubRepoCollaboratorRow] = set()
    out_logins = [o.login for o in outside]
    for login in out_logins:
        for r in rng.sample(repos, rng.randint(1, 3)):
            permission = rng.choice(("pull", "pull", "triage", "push"))
            collabs.add(GithubRepoCollaboratorRow(r.id, login, permission, "outside"))
    # Family 7: outside collaborators with admin rights.
    collabs.add(GithubRepoCollaboratorRow(repo_id["terraform-aws"], out_logins[0], "admin", "outside"))
    collabs.add(GithubRepoCollaboratorRow(repo_id["corvid-sdk-python"], out_logins[5], "admin", "outside"))
    collabs.add(GithubRepoCollaboratorRow(repo_id["lumen-pipelines"], out_logins[9], "maintain", "outside"))
    collabs.add(GithubRepoCollaboratorRow(repo_id["platform-infra"], out_logins[12], "admin", "outside"))
    for login in rng.sample(humans, 30):
        picked = rng.choice(repos)
        collabs.add(GithubRepoCollaboratorRow(picked.id, login, rng.choice(("push", "admin", "maintain")), "direct"))
    keys: list[GithubDeployKeyRow] = []
    for i, r in enumerate(rng.sample(repos, 40)):
        added = rng.choice(humans)
        created = org.when(datetime(2019, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=20))
        keys.append(
            GithubDeployKeyRow(
                7_700_000 + i * 17,
                r.id,
                f"deploy-{r.name}",
                int(i % 4 != 0),
                added,
                ts(created),
                ts(org.when(created, AS_OF)) if i % 3 else None,
            )
        )
    # Family 6: write-enabled deploy keys on public repos, and keys added by people who left.
    for j, (repo, adder) in enumerate(
        (
            ("corvid-sdk-python", login_of[leavers[2].pid]),
            ("corvid-docs", humans[3]),
            ("terraform-aws", login_of[leavers[3].pid]),
        )
    ):
        keys.append(
            GithubDeployKeyRow(
                7_800_000 + j,
                repo_id[repo],
                f"ci-{repo}",
                0,
                adder,
                "2021-09-14T08:00:00Z",
                ts(AS_OF - timedelta(days=4)),
            )
        )
    return {
        "github_repos": repos,
        "github_teams": teams,
        "github_team_members": sorted(tmembers),
        "github_team_repos": sorted(trepos),
        "github_repo_collaborators": sorted(collabs),
        "github_deploy_keys": keys,
    }
