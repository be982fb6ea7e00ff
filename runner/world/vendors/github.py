"""GitHub: the `corvid-systems` organization. Members, outside collaborators, nested teams, repos and
their permissions, SAML identity links, 2FA and deploy keys.

A GitHub login is chosen by its owner and says nothing about who they are; the only link to a person
is the SAML identity (the IdP name id the member last signed in with).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Org, Person, Row, Rows, at, ts
from runner.world.schema import Table, col, fk
from runner.world.vendors.okta import OktaUser

TABLES = (
    Table(
        "github_org_members",
        "Members of the `corvid-systems` organization.",
        (
            col("login", "GitHub login (chosen by the user).", required=True),
            col("id", "Numeric GitHub user id.", "INTEGER", required=True),
            col("role", "`admin` (organization owner) or `member`.", required=True),
            col("two_factor_enabled", "1 if the account has 2FA enabled.", "INTEGER", required=True),
            col("name", "Public profile name, if the user set one."),
            col("created_at", "When the GitHub account was created (UTC)."),
        ),
        primary_key=("login",),
    ),
    Table(
        "github_outside_collaborators",
        "People who are not members but have been added to one or more repositories.",
        (
            col("login", "GitHub login.", required=True),
            col("id", "Numeric GitHub user id.", "INTEGER", required=True),
            col("two_factor_enabled", "1 if the account has 2FA enabled.", "INTEGER", required=True),
            col("name", "Public profile name, if any."),
        ),
        primary_key=("login",),
    ),
    Table(
        "github_saml_identities",
        "SAML SSO identities linked to organization members (GraphQL `samlIdentityProvider.externalIdentities`). "
        "`name_id` is what the IdP sent at the member's last SSO sign-in.",
        (
            col("login", "`github_org_members.login`.", required=True),
            col("name_id", "SAML NameID from the IdP (the IdP login).", required=True),
            col("linked_at", "When the identity was linked (UTC)."),
        ),
        primary_key=("login",),
        foreign_keys=(fk("login", "github_org_members", "login"),),
    ),
    Table(
        "github_teams",
        "Teams. A child team inherits the repository access of its parent team.",
        (
            col("id", "Team id.", "INTEGER", required=True),
            col("slug", "Team slug.", required=True),
            col("name", "Team name.", required=True),
            col("privacy", "`closed` (visible) or `secret`.", required=True),
            col("parent_team_id", "`github_teams.id` of the parent team; NULL for top-level teams.", "INTEGER"),
        ),
        primary_key=("id",),
        foreign_keys=(fk("parent_team_id", "github_teams", "id"),),
    ),
    Table(
        "github_team_members",
        "Direct members of each team (membership in a child team does not appear on the parent).",
        (
            col("team_id", "`github_teams.id`.", "INTEGER", required=True),
            col("login", "Member login.", required=True),
            col("role", "`maintainer` or `member`.", required=True),
        ),
        primary_key=("team_id", "login"),
        foreign_keys=(fk("team_id", "github_teams", "id"),),
    ),
    Table(
        "github_repos",
        "Repositories owned by the organization.",
        (
            col("id", "Repository id.", "INTEGER", required=True),
            col("name", "Repository name.", required=True),
            col("full_name", "`corvid-systems/<name>`.", required=True),
            col("visibility", "`public`, `private` or `internal`.", required=True),
            col("archived", "1 if archived (read-only).", "INTEGER", required=True),
            col("default_branch", "Default branch name.", required=True),
            col("created_at", "Creation time (UTC).", required=True),
            col("pushed_at", "Last push (UTC)."),
        ),
        primary_key=("id",),
    ),
    Table(
        "github_team_repos",
        "Repository permissions granted to teams (inherited by child teams).",
        (
            col("team_id", "`github_teams.id`.", "INTEGER", required=True),
            col("repo_id", "`github_repos.id`.", "INTEGER", required=True),
            col("permission", "`pull`, `triage`, `push`, `maintain` or `admin`.", required=True),
        ),
        primary_key=("team_id", "repo_id"),
        foreign_keys=(fk("team_id", "github_teams", "id"), fk("repo_id", "github_repos", "id")),
    ),
    Table(
        "github_repo_collaborators",
        "Users granted access to a repository directly (members or outside collaborators).",
        (
            col("repo_id", "`github_repos.id`.", "INTEGER", required=True),
            col("login", "User login.", required=True),
            col("permission", "`pull`, `triage`, `push`, `maintain` or `admin`.", required=True),
            col(
                "affiliation",
                "`direct` (an organization member) or `outside` (an outside collaborator).",
                required=True,
            ),
        ),
        primary_key=("repo_id", "login"),
        foreign_keys=(fk("repo_id", "github_repos", "id"),),
    ),
    Table(
        "github_deploy_keys",
        "SSH deploy keys on repositories.",
        (
            col("id", "Key id.", "INTEGER", required=True),
            col("repo_id", "`github_repos.id`.", "INTEGER", required=True),
            col("title", "Key title.", required=True),
            col("read_only", "1 for read-only keys, 0 for keys that can push.", "INTEGER", required=True),
            col("added_by", "Login of the user who added the key."),
            col("created_at", "Creation time (UTC).", required=True),
            col("last_used", "Last use (UTC); NULL if never used."),
        ),
        primary_key=("id",),
        foreign_keys=(fk("repo_id", "github_repos", "id"),),
    ),
)

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


def generate(org: Org) -> Rows:
    """Members and their SAML links, then teams, repos and permissions."""
    rng = org.rng
    okta: list[OktaUser] = org.shared["okta_users"]  # type: ignore[assignment]
    taken: set[str] = set()
    members: list[list[object]] = []
    saml: list[tuple[object, ...]] = []
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
            [
                login,
                uid(),
                "member",
                int(rng.random() < 0.95),
                p.name if rng.random() < 0.6 else None,
                ts(org.when(datetime(2012, 1, 1, tzinfo=AS_OF.tzinfo), at(p.start))),
            ]
        )
        saml.append((login, u.login, ts(org.when(at(max(p.start, date(2020, 1, 1))), AS_OF - timedelta(days=5)))))
    # Members with no SAML identity: bots, and accounts that match nobody (family 5).
    for login, name in (
        ("corvid-ci-bot", "Corvid CI"),
        ("corvid-release-bot", None),
        ("dkwon-old", None),
        ("contractor-tmp-7", None),
        ("sre-shared", "SRE shared account"),
    ):
        taken.add(login)
        members.append([login, uid(), "member", 1 if "bot" in login else 0, name, "2021-05-05T12:00:00Z"])
    by_login = {str(m[0]): m for m in members}
    # Owners: a handful of platform/security staff, plus planted problems.
    owner_candidates = [
        login_of[u.person.pid] for u in eng_okta if u.person and {"sre", "sec"} & u.person.tags and not u.person.left
    ]
    for login in owner_candidates[:5]:
        by_login[login][2] = "admin"
        by_login[login][3] = 1
    by_login[owner_candidates[5]][2] = "admin"
    by_login[owner_candidates[5]][3] = 0  # Family 3: an owner without 2FA
    by_login[login_of[still_member[0].pid]][2] = "admin"  # Family 1: a leaver who is still an owner
    by_login["sre-shared"][2] = "admin"  # Family 5: an owner that resolves to no person
    org.shared["github_login_of"] = login_of
    outside = []
    for i in range(24):
        login = f"{rng.choice(WORDS)}-{rng.choice(('consulting', 'freelance', 'oss', 'dev', 'labs'))}{i}"
        taken.add(login)
        outside.append((login, uid(), int(i % 5 != 0), None))
    out = _repos(org, [str(m[0]) for m in members], owner_candidates, outside, login_of, still_member)
    out.update(
        {
            "github_org_members": [tuple(m) for m in members],
            "github_saml_identities": saml,
            "github_outside_collaborators": outside,
        }
    )
    return out


def _repos(
    org: Org,
    member_logins: list[str],
    leads: list[str],
    outside: Sequence[Row],
    login_of: dict[str, str],
    leavers: list[Person],
) -> Rows:
    rng = org.rng
    repos: list[tuple[object, ...]] = []
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
            (
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
            (
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
    repo_id = {str(r[1]): int(str(r[0])) for r in repos}
    teams: list[tuple[object, ...]] = []

    def team(slug: str, parent: int | None = None) -> int:
        tid = 4_400_000 + len(teams) * 13
        teams.append((tid, slug, slug.replace("-", " ").title(), "closed", parent))
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
    tmembers: set[tuple[int, str, str]] = set()
    humans = [m for m in member_logins if m in login_of.values()]
    for login in humans:
        tmembers.add((rng.choice((eng, data, web, mobile, eng)), login, "member"))
    for login in leads[:8]:
        tmembers.add((plat, login, "maintainer"))
    for login in rng.sample(humans, 6):
        tmembers.add((oncall, login, "member"))
    tmembers.add((oncall, login_of[leavers[1].pid], "member"))
    for login in leads[8:12]:
        tmembers.add((sec, login, "member"))
    for login in rng.sample(humans, 10):
        tmembers.add((lumen, login, "member"))
    for login in rng.sample(humans, 3):
        tmembers.add((release, login, "maintainer"))
    trepos: set[tuple[int, int, str]] = set()
    for r in repos:
        rid = int(str(r[0]))
        trepos.add((eng, rid, "push" if r[3] != "public" else "pull"))
    trepos.add((plat, repo_id["platform-infra"], "admin"))
    trepos.add((plat, repo_id["terraform-aws"], "admin"))
    trepos.add((sec, repo_id["terraform-aws"], "pull"))
    trepos.add((lumen, repo_id["lumen-pipelines"], "maintain"))
    trepos.add((release, repo_id["corvid-sdk-python"], "admin"))
    collabs: set[tuple[int, str, str, str]] = set()
    out_logins = [str(o[0]) for o in outside]
    for login in out_logins:
        for r in rng.sample(repos, rng.randint(1, 3)):
            collabs.add((int(str(r[0])), login, rng.choice(("pull", "pull", "triage", "push")), "outside"))
    # Family 7: outside collaborators with admin rights.
    collabs.add((repo_id["terraform-aws"], out_logins[0], "admin", "outside"))
    collabs.add((repo_id["corvid-sdk-python"], out_logins[5], "admin", "outside"))
    collabs.add((repo_id["lumen-pipelines"], out_logins[9], "maintain", "outside"))
    collabs.add((repo_id["platform-infra"], out_logins[12], "admin", "outside"))
    for login in rng.sample(humans, 30):
        collabs.add((int(str(rng.choice(repos)[0])), login, rng.choice(("push", "admin", "maintain")), "direct"))
    keys: list[tuple[object, ...]] = []
    for i, r in enumerate(rng.sample(repos, 40)):
        added = rng.choice(humans)
        created = org.when(datetime(2019, 1, 1, tzinfo=AS_OF.tzinfo), AS_OF - timedelta(days=20))
        keys.append(
            (
                7_700_000 + i * 17,
                r[0],
                f"deploy-{r[1]}",
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
            (
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
