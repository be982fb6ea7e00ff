"""Render the agent-visible schema docs from the table specs.

One overview page plus one page per vendor. The pages describe structure, vocabularies and how
identities appear; they never describe findings.
"""

from __future__ import annotations

from runner.world import DATASET_ID
from runner.world.generate import ORDER, VENDOR_PREFIXES
from runner.world.org import ACQUISITION_DATE, AS_OF, DOMAIN, OLD_DOMAIN, TENANT_DOMAIN, ts
from runner.world.schema import Table
from runner.world.tables import VENDOR_TABLES

IDENTITY_NOTES = {
    "hibob": "HiBob is the source of truth for people. `hibob_people.email` is the current work email on "
    f"`{DOMAIN}`. A person's status and dates here decide whether they still work for the company.",
    "okta": "Okta logins are usually the work email, but accounts created before the acquisition may still "
    f"use the `{OLD_DOMAIN}` address, and some logins keep the capitalisation they were typed with. "
    "A person can hold more than one Okta account, each with its own status. "
    "Okta ids are reused by downstream apps as their external id.",
    "azure": f"Member UPNs are `<first initial><surname>@{DOMAIN}` (with a digit when taken); `mail` holds the "
    f"`first.last@{DOMAIN}` address. Guests carry their home address inside the UPN. Cloud-only "
    f"accounts use `@{TENANT_DOMAIN}`.",
    "aws": "IAM user names are free text chosen by whoever created them (`JDoe-Dev`, `jdoe`, `john.doe`). "
    "Identity Center users are provisioned from Okta: `user_name` is the Okta login and `external_id` the "
    "Okta user id. Account ids not listed in `aws_accounts` are outside the organization.",
    "gcp": "IAM members are prefixed strings. `user:` and `group:` addresses are Google identities; the "
    "company's are Workspace users and groups (including their aliases).",
    "gws": f"The Workspace account owns `{DOMAIN}` (primary) and `{OLD_DOMAIN}` (secondary, from the "
    "acquisition). Addresses on any other domain are outside the organization. A user's aliases go with "
    "the user: once a Workspace user is deleted, its aliases no longer resolve anything.",
    "github": "Logins are chosen by their owners and do not follow names. A member is tied to a person only "
    "through `github_saml_identities.name_id`, the Okta login used at SSO.",
    "atlas": "Atlas `username` is the email the user signs in with, on either company domain. Database users "
    "are not people: they are credentials used by applications (or AWS IAM roles, by ARN).",
}


def _table_markdown(table: Table) -> str:
    lines = [f"### `{table.name}`", "", table.doc, "", "| column | type | meaning |", "|---|---|---|"]
    for c in table.columns:
        lines.append(f"| `{c.name}` | {c.type}{'' if c.nullable else ' NOT NULL'} | {c.doc} |")
    if table.primary_key:
        lines += ["", f"Primary key: `({', '.join(table.primary_key)})`."]
    return "\n".join(lines)


def render() -> dict[str, str]:
    """All docs pages, by file name."""
    as_of = ts(AS_OF)
    pages: dict[str, str] = {}
    overview = [
        f"# {DATASET_ID}: schema documentation",
        "",
        f"A frozen snapshot of one company's identity and access estate, **as of {as_of}**. Treat that moment "
        "as 'now' for every question about age, dormancy or expiry. All timestamps are ISO-8601 UTC.",
        "",
        f"The company is Corvid Systems (`{DOMAIN}`). It acquired Lumen Analytics (`{OLD_DOMAIN}`) on "
        f"{ACQUISITION_DATE.isoformat()}; some Lumen staff still appear under their old addresses.",
        "",
        f"**Lumen logins.** A Lumen address is the person's first initial and surname, lower case, at "
        f"`{OLD_DOMAIN}` (for Jane Doe, `jdoe@{OLD_DOMAIN}`), with a digit appended when that address was "
        "already taken. Workspace keeps the old address as an alias of the person's corvid.io user while that "
        "user exists; where it no longer does, the pattern, together with the name and the HR record of a "
        "Lumen Analytics employee, is the only link from a Lumen login to the person.",
        "",
        "Each vendor's tables share a prefix. No key crosses vendors: to follow a person from one system to "
        "another, match on emails, aliases, logins, names or the provisioning links each page describes.",
        "",
        "| vendor | prefix | page |",
        "|---|---|---|",
    ]
    for vendor in ORDER:
        prefix = vendor.__name__.rsplit(".", 1)[1]
        overview.append(f"| {VENDOR_PREFIXES[prefix]} | `{prefix}_` | `{prefix}.md` |")
        body = [
            f"# {VENDOR_PREFIXES[prefix]} (`{prefix}_` tables)",
            "",
            f"Snapshot as of {as_of}.",
            "",
            "## How identities appear",
            "",
            IDENTITY_NOTES[prefix],
            "",
            "## Tables",
            "",
        ]
        body += [_table_markdown(t) + "\n" for t in VENDOR_TABLES[prefix]]
        pages[f"{prefix}.md"] = "\n".join(body).rstrip() + "\n"
    overview += ["", "The database is read-only. Open it with `file:<path>?mode=ro&immutable=1`."]
    pages["overview.md"] = "\n".join(overview) + "\n"
    return pages
