"""AWS: the organization's accounts, IAM users, keys, roles and policies, and IAM Identity Center
(permission sets, account assignments, and the users and groups Okta pushes over SCIM)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from runner.world.org import AS_OF, Org, Person, Rows, at, ts
from runner.world.tables.aws import (
    AwsAccountRow,
    AwsIamAccessKeyRow,
    AwsIamGroupMembershipRow,
    AwsIamGroupRow,
    AwsIamInlinePolicyRow,
    AwsIamMfaDeviceRow,
    AwsIamPolicyAttachmentRow,
    AwsIamPolicyRow,
    AwsIamRoleRow,
    AwsIamUserRow,
    AwsIdentitystoreGroupMembershipRow,
    AwsIdentitystoreGroupRow,
    AwsIdentitystoreUserRow,
    AwsSsoAccountAssignmentRow,
    AwsSsoPermissionSetPolicyRow,
    AwsSsoPermissionSetRow,
)
from runner.world.vendors.okta import AWS_PUSHED_GROUPS, OktaDirectory

ACCOUNTS = (
    ("204861379512", "corvid-management", "Root", "ACTIVE"),
    ("318427560193", "corvid-security", "Root/Security", "ACTIVE"),
    ("427390158264", "corvid-log-archive", "Root/Security", "ACTIVE"),
    ("539182746021", "corvid-prod", "Root/Workloads/Prod", "ACTIVE"),
    ("862047319586", "corvid-data-prod", "Root/Workloads/Prod", "ACTIVE"),
    ("640271938475", "corvid-staging", "Root/Workloads/NonProd", "ACTIVE"),
    ("751938264017", "corvid-dev", "Root/Workloads/NonProd", "ACTIVE"),
    ("973158420697", "corvid-data-dev", "Root/Workloads/NonProd", "ACTIVE"),
    ("306241597832", "corvid-shared-services", "Root/Infrastructure", "ACTIVE"),
    ("184029375610", "corvid-sandbox", "Root/Sandbox", "ACTIVE"),
    ("295130486721", "lumen-legacy", "Root/Legacy", "ACTIVE"),
    ("417352608943", "corvid-old-analytics", "Root/Suspended", "SUSPENDED"),
)
ACCT = {name: aid for aid, name, _, _ in ACCOUNTS}
IDENTITY_STORE = "d-9067a1b2c3"
SSO_INSTANCE = "arn:aws:sso:::instance/ssoins-7223c4d9e8f1a0b2"


MANAGED = {
    "AdministratorAccess": "Provides full access to AWS services and resources.",
    "PowerUserAccess": "Full access except IAM and Organizations management.",
    "ReadOnlyAccess": "Read-only access to AWS services and resources.",
    "ViewOnlyAccess": "View resources and basic metadata across services.",
    "SecurityAudit": "Read access to security configuration metadata.",
    "IAMFullAccess": "Full access to IAM.",
    "AmazonS3FullAccess": "Full access to all S3 buckets.",
    "AmazonS3ReadOnlyAccess": "Read-only access to all S3 buckets.",
    "Billing": "Grants permissions for billing and cost management.",
    "AWSLambda_FullAccess": "Full access to Lambda.",
    "AmazonEC2FullAccess": "Full access to EC2.",
}
GITHUB_DEPLOY_SUBJECT = "repo:corvid-systems/platform-infra:ref:refs/heads/main"
EXTERNAL_ACCOUNTS = ("464622532012", "710293847561", "882211334455", "953017264810")


def _doc(statements: list[dict[str, object]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def _trust_account(account: str, condition: dict[str, object] | None = None) -> str:
    stmt: dict[str, object] = {
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
        "Action": "sts:AssumeRole",
    }
    if condition:
        stmt["Condition"] = condition
    return _doc([stmt])


def _trust_service(service: str) -> str:
    return _doc([{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}])


def generate(org: Org, okta: OktaDirectory) -> Rows:
    """Accounts, IAM, and Identity Center (fed by Okta over SCIM)."""
    out: Rows = {
        "aws_accounts": [
            AwsAccountRow(
                aid,
                name,
                f"aws+{name}@corvid.io",
                status,
                ou,
                "2019-03-04T18:00:00Z" if name != "lumen-legacy" else "2023-04-17T10:00:00Z",
            )
            for aid, name, ou, status in ACCOUNTS
        ],
    }
    policies: list[AwsIamPolicyRow] = [
        AwsIamPolicyRow(f"arn:aws:iam::aws:policy/{n}", n, "AWS managed", None, d, None) for n, d in MANAGED.items()
    ]
    policies += [
        AwsIamPolicyRow(
            f"arn:aws:iam::{ACCT['corvid-prod']}:policy/ops-break-fix",
            "ops-break-fix",
            "Customer managed",
            ACCT["corvid-prod"],
            "Temporary operational fixes",
            _doc([{"Effect": "Allow", "Action": "*", "Resource": "*"}]),
        ),
        AwsIamPolicyRow(
            f"arn:aws:iam::{ACCT['lumen-legacy']}:policy/lumen-iam-manage",
            "lumen-iam-manage",
            "Customer managed",
            ACCT["lumen-legacy"],
            "Legacy IAM self-service",
            _doc([{"Effect": "Allow", "Action": ["iam:*"], "Resource": "*"}]),
        ),
        AwsIamPolicyRow(
            f"arn:aws:iam::{ACCT['corvid-data-prod']}:policy/s3-data-reader",
            "s3-data-reader",
            "Customer managed",
            ACCT["corvid-data-prod"],
            "Read the analytics buckets",
            _doc(
                [
                    {
                        "Effect": "Allow",
                        "Action": ["s3:GetObject", "s3:ListBucket"],
                        "Resource": ["arn:aws:s3:::corvid-analytics", "arn:aws:s3:::corvid-analytics/*"],
                    }
                ]
            ),
        ),
        AwsIamPolicyRow(
            f"arn:aws:iam::{ACCT['corvid-shared-services']}:policy/ci-deploy",
            "ci-deploy",
            "Customer managed",
            ACCT["corvid-shared-services"],
            "CI deployment",
            _doc([{"Effect": "Allow", "Action": ["ecs:*", "ecr:*", "iam:PassRole"], "Resource": "*"}]),
        ),
    ]
    out["aws_iam_policies"] = policies
    out.update(_iam_users(org))
    iam_roles, role_attach = _roles(org)
    identity_center, sso_roles = _identity_center(org, okta)
    out.update(identity_center)
    out["aws_iam_policy_attachments"] = [*out["aws_iam_policy_attachments"], *role_attach]
    out["aws_iam_roles"] = [*iam_roles, *sso_roles]
    return out


CUSTOMER_POLICY_ACCOUNT = {
    "ops-break-fix": "corvid-prod",
    "lumen-iam-manage": "lumen-legacy",
    "s3-data-reader": "corvid-data-prod",
    "ci-deploy": "corvid-shared-services",
}


def _policy_arn(policy: str) -> str:
    if policy in MANAGED:
        return f"arn:aws:iam::aws:policy/{policy}"
    return f"arn:aws:iam::{ACCT[CUSTOMER_POLICY_ACCOUNT[policy]]}:policy/{policy}"


def _camel(p: Person) -> str:
    return f"{p.first[0].upper()}{p.last.replace(' ', '')}"


def _iam_users(org: Org) -> Rows:
    rng = org.rng
    users: list[AwsIamUserRow] = []
    keys: list[AwsIamAccessKeyRow] = []
    mfa: list[AwsIamMfaDeviceRow] = []
    attach: list[AwsIamPolicyAttachmentRow] = []
    inline: list[AwsIamInlinePolicyRow] = []
    memberships: list[AwsIamGroupMembershipRow] = []
    legacy = ACCT["lumen-legacy"]
    dev = ACCT["corvid-dev"]

    def key_id() -> str:
        return "AKIA" + org.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)

    def user(
        account: str,
        name: str,
        created: datetime,
        *,
        console: bool,
        last_console: datetime | None,
        tags: dict[str, str] | None = None,
    ) -> None:
        users.append(
            AwsIamUserRow(
                account,
                name,
                "AIDA" + org.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 17),
                f"arn:aws:iam::{account}:user/{name}",
                ts(created),
                int(console),
                ts(last_console) if last_console else None,
                json.dumps(tags or {}, sort_keys=True),
            )
        )

    def key(account: str, name: str, created: datetime, last: datetime | None, status: str = "Active") -> None:
        keys.append(
            AwsIamAccessKeyRow(
                account,
                name,
                key_id(),
                status,
                ts(created),
                ts(last) if last else None,
                rng.choice(("s3", "sts", "ec2", "dynamodb", "lambda")) if last else None,
            )
        )

    def add_mfa(account: str, name: str, kind: str = "virtual") -> None:
        serial = f"arn:aws:iam::{account}:mfa/{name}" if kind == "virtual" else "GAHT" + org.token("0123456789", 8)
        mfa.append(
            AwsIamMfaDeviceRow(
                account,
                name,
                serial,
                kind,
                ts(org.when(datetime(2021, 1, 1, tzinfo=AS_OF.tzinfo), datetime(2024, 1, 1, tzinfo=AS_OF.tzinfo))),
            )
        )

    recent = AS_OF - timedelta(days=3)
    # Lumen's legacy account: people's IAM users named in three different house styles.
    lumen = [p for p in org.people if p.acquired and "eng" in p.tags]
    lumen_left = [p for p in lumen if p.left and p.termination]
    used_after = org.pick([p for p in lumen_left if p.termination and p.termination < date(2026, 5, 15)], 3)
    used_before = org.pick([p for p in lumen_left if p.termination], 3)
    lumen_active = [p for p in lumen if not p.left]
    styles = (lambda p: f"{_camel(p)}-Dev", lambda p: p.handle, lambda p: f"{p.first}.{p.last}".lower())
    for i, p in enumerate(used_after + used_before + lumen_active[:26]):
        name = styles[i % 3](p)
        created = at(date(2021, 2, 1) + timedelta(days=rng.randint(0, 600)))
        console = i % 4 != 3
        if p in used_after:
            assert p.termination is not None
            p.tags.add("aws_key_after_termination")
            last_key: datetime | None = org.when(at(p.termination) + timedelta(days=5), recent)
        elif p in used_before:
            assert p.termination is not None
            p.tags.add("aws_key_before_termination")
            last_key = org.when(at(p.termination) - timedelta(days=60), at(p.termination) - timedelta(days=1))
        else:
            last_key = org.when(AS_OF - timedelta(days=400), recent) if rng.random() < 0.8 else None
        user(
            legacy,
            name,
            created,
            console=console,
            last_console=org.when(AS_OF - timedelta(days=300), recent) if console else None,
        )
        key(legacy, name, created + timedelta(days=1), last_key)
        if i % 5 == 0:
            key(legacy, name, created + timedelta(days=400), None, "Inactive")
        group = "Admins" if i % 6 == 0 else "Developers" if i % 3 else "ReadOnly"
        memberships.append(AwsIamGroupMembershipRow(legacy, group, name))
        if console and i % 7 not in (0, 3):
            add_mfa(legacy, name)
        if i == 7:
            inline.append(
                AwsIamInlinePolicyRow(
                    legacy,
                    "user",
                    name,
                    "self-service-iam",
                    _doc(
                        [
                            {
                                "Effect": "Allow",
                                "Action": [
                                    "iam:CreatePolicyVersion",
                                    "iam:AttachUserPolicy",
                                    "iam:PutUserPolicy",
                                ],
                                "Resource": "*",
                            }
                        ]
                    ),
                )
            )
    # Corvid engineers who predate SSO, in the dev account.
    eng = [p for p in org.people if "eng" in p.tags and not p.acquired and not p.left and p.start < date(2019, 6, 1)]
    for i, p in enumerate(eng[:14]):
        name = f"{_camel(p)}-Dev" if i % 2 else p.handle
        created = at(date(2018, 5, 1) + timedelta(days=rng.randint(0, 300)))
        user(
            dev,
            name,
            created,
            console=i % 3 == 0,
            last_console=org.when(AS_OF - timedelta(days=600), recent) if i % 3 == 0 else None,
        )
        key(dev, name, created, org.when(AS_OF - timedelta(days=700), recent))
        attach.append(AwsIamPolicyAttachmentRow(dev, "user", name, "arn:aws:iam::aws:policy/PowerUserAccess"))
    # Service and break-glass users. Owners are recorded only in tags.
    owner_pool = [p for p in org.people if "sre" in p.tags and not p.left]
    gone_owner = next(p for p in org.people if "sre" in p.tags and p.left)
    svc = (
        (ACCT["corvid-shared-services"], "svc-ci-deployer", owner_pool[0], "ci-deploy", True),
        (ACCT["corvid-prod"], "terraform-runner", owner_pool[1], "AdministratorAccess", True),
        (ACCT["corvid-prod"], "backup-agent", gone_owner, "AmazonS3FullAccess", True),
        (ACCT["corvid-data-prod"], "etl-loader", gone_owner, "s3-data-reader", False),
        (ACCT["corvid-prod"], "datadog-integration", None, "ReadOnlyAccess", True),
        (ACCT["corvid-management"], "breakglass-admin", None, "AdministratorAccess", False),
        (legacy, "lumen-deploy-bot", None, "lumen-iam-manage", True),
    )
    for account, name, owner, policy, old in svc:
        created = at(date(2019, 9, 1) + timedelta(days=rng.randint(0, 900)))
        tags = {"owner": owner.email} if owner else {}
        if name == "breakglass-admin":
            user(
                account,
                name,
                created,
                console=True,
                last_console=datetime(2024, 8, 30, 3, 1, tzinfo=AS_OF.tzinfo),
            )
            add_mfa(account, name, "hardware")
        else:
            user(account, name, created, console=False, last_console=None, tags=tags)
            key(
                account,
                name,
                created if old else AS_OF - timedelta(days=40),
                org.when(AS_OF - timedelta(days=20), recent),
            )
        attach.append(AwsIamPolicyAttachmentRow(account, "user", name, _policy_arn(policy)))
    # Family 3: console users with administrator rights and no MFA, in prod.
    prod = ACCT["corvid-prod"]
    for p in org.pick([p for p in org.people if "sre" in p.tags and not p.left], 3):
        name = f"{_camel(p)}-Admin"
        user(
            prod,
            name,
            at(date(2022, 3, 1)),
            console=True,
            last_console=org.when(AS_OF - timedelta(days=30), recent),
        )
        attach.append(AwsIamPolicyAttachmentRow(prod, "user", name, "arn:aws:iam::aws:policy/AdministratorAccess"))
        p.tags.add("aws_admin_no_mfa")
    decoy = org.pick([p for p in org.people if "sre" in p.tags and not p.left], 1)[0]
    user(prod, f"{_camel(decoy)}-Admin", at(date(2022, 3, 1)), console=True, last_console=recent)
    add_mfa(prod, f"{_camel(decoy)}-Admin", "u2f")
    admin = "arn:aws:iam::aws:policy/AdministratorAccess"
    attach.append(AwsIamPolicyAttachmentRow(prod, "user", f"{_camel(decoy)}-Admin", admin))
    groups = [
        AwsIamGroupRow(legacy, g, f"arn:aws:iam::{legacy}:group/{g}") for g in ("Admins", "Developers", "ReadOnly")
    ]
    attach += [
        AwsIamPolicyAttachmentRow(legacy, "group", "Admins", "arn:aws:iam::aws:policy/AdministratorAccess"),
        AwsIamPolicyAttachmentRow(legacy, "group", "Developers", "arn:aws:iam::aws:policy/PowerUserAccess"),
        AwsIamPolicyAttachmentRow(legacy, "group", "ReadOnly", "arn:aws:iam::aws:policy/ReadOnlyAccess"),
    ]
    return {
        "aws_iam_users": users,
        "aws_iam_access_keys": keys,
        "aws_iam_mfa_devices": mfa,
        "aws_iam_groups": groups,
        "aws_iam_group_memberships": memberships,
        "aws_iam_policy_attachments": attach,
        "aws_iam_inline_policies": inline,
    }


def _roles(org: Org) -> tuple[list[AwsIamRoleRow], list[AwsIamPolicyAttachmentRow]]:
    """IAM roles (but those Identity Center makes), and the policy attachments of those roles."""
    rng = org.rng
    roles: list[AwsIamRoleRow] = []
    mgmt = ACCT["corvid-management"]

    def role(
        account: str, name: str, trust: str, *, path: str = "/", desc: str | None = None, used: bool = True
    ) -> None:
        roles.append(
            AwsIamRoleRow(
                account,
                name,
                "AROA" + org.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 17),
                f"arn:aws:iam::{account}:role{path}{name}",
                path,
                desc,
                trust,
                ts(org.when(datetime(2020, 1, 1, tzinfo=AS_OF.tzinfo), datetime(2025, 1, 1, tzinfo=AS_OF.tzinfo))),
                ts(org.when(AS_OF - timedelta(days=60), AS_OF)) if used else None,
                3600,
            )
        )

    attach: list[AwsIamPolicyAttachmentRow] = []
    for aid, _name, _ou, status in ACCOUNTS:
        if status != "ACTIVE":
            continue
        if aid != mgmt:
            role(aid, "OrganizationAccountAccessRole", _trust_account(mgmt), desc="Created by Organizations")
            admin = "arn:aws:iam::aws:policy/AdministratorAccess"
            attach.append(AwsIamPolicyAttachmentRow(aid, "role", "OrganizationAccountAccessRole", admin))
        role(
            aid,
            "AWSServiceRoleForSupport",
            _trust_service("support.amazonaws.com"),
            path="/aws-service-role/",
        )
        role(aid, "ec2-app-instance", _trust_service("ec2.amazonaws.com"), path="/service-role/")
        for _ in range(rng.randint(2, 6)):
            role(aid, f"lambda-{org.hexid(6)}", _trust_service("lambda.amazonaws.com"), path="/service-role/")
    prod, data, dev, shared = (
        ACCT["corvid-prod"],
        ACCT["corvid-data-prod"],
        ACCT["corvid-dev"],
        ACCT["corvid-shared-services"],
    )
    ext = EXTERNAL_ACCOUNTS
    cross = (
        # (account, role, trust, policy) — family 7: trusts outside the organization
        (
            prod,
            "DatadogIntegrationRole",
            _trust_account(ext[0], {"StringEquals": {"sts:ExternalId": "c0rv1d-dd"}}),
            "ReadOnlyAccess",
        ),
        (prod, "vendor-audit-readonly", _trust_account(ext[1]), "SecurityAudit"),
        (data, "partner-data-exchange", _trust_account(ext[2]), "AmazonS3FullAccess"),
        (ACCT["lumen-legacy"], "lumen-contractor-admin", _trust_account(ext[3]), "AdministratorAccess"),
        (
            dev,
            "debug-role-temp",
            _doc([{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]),
            "PowerUserAccess",
        ),
        # decoys: cross-account trust inside the organization
        (prod, "ci-deploy-target", _trust_account(shared), "ci-deploy"),
        (prod, "lumen-migration", _trust_account(ACCT["lumen-legacy"]), "ReadOnlyAccess"),
        (ACCT["corvid-log-archive"], "log-reader", _trust_account(ACCT["corvid-security"]), "ReadOnlyAccess"),
        (
            prod,
            "github-actions-deploy",
            _doc(
                [
                    {
                        "Effect": "Allow",
                        "Action": "sts:AssumeRoleWithWebIdentity",
                        "Principal": {
                            "Federated": f"arn:aws:iam::{prod}:oidc-provider/token.actions.githubusercontent.com"
                        },
                        "Condition": {"StringLike": {"token.actions.githubusercontent.com:sub": GITHUB_DEPLOY_SUBJECT}},
                    }
                ]
            ),
            "PowerUserAccess",
        ),
    )
    for account, name, trust, policy in cross:
        role(account, name, trust, desc="Cross-account access")
        attach.append(AwsIamPolicyAttachmentRow(account, "role", name, _policy_arn(policy)))
    break_fix = f"arn:aws:iam::{prod}:policy/ops-break-fix"
    attach.append(AwsIamPolicyAttachmentRow(prod, "role", "ec2-app-instance", break_fix))
    return roles, attach


def _identity_center(org: Org, okta: OktaDirectory) -> tuple[Rows, list[AwsIamRoleRow]]:
    """Permission sets, account assignments, and the users and groups Okta pushed over SCIM; and the IAM
    roles Identity Center materialises in the accounts."""
    rng = org.rng
    okta_users = okta.users
    okta_groups = okta.group_ids
    pushed = AWS_PUSHED_GROUPS
    psets = {
        "AdministratorAccess": ["AdministratorAccess"],
        "PowerUserAccess": ["PowerUserAccess"],
        "ReadOnlyAccess": ["ReadOnlyAccess"],
        "Billing": ["Billing"],
        "SecurityAudit": ["SecurityAudit"],
        "DataEngineer": ["AmazonS3FullAccess", "AWSLambda_FullAccess"],
        "BreakFixAdmin": ["AdministratorAccess"],
    }
    ps_arn = {n: f"arn:aws:sso:::permissionSet/ssoins-7223c4d9e8f1a0b2/ps-{org.hexid(16)}" for n in psets}
    rows_ps = [
        AwsSsoPermissionSetRow(
            ps_arn[n],
            n,
            f"{n} permission set",
            "PT8H" if n != "BreakFixAdmin" else "PT12H",
            "2020-06-01T12:00:00Z",
        )
        for n in psets
    ]
    rows_psp = [
        AwsSsoPermissionSetPolicyRow(ps_arn[n], f"arn:aws:iam::aws:policy/{p}") for n, ps in psets.items() for p in ps
    ]

    def sid() -> str:
        return f"9067{rng.randint(100000, 999999)}-{org.guid()}"

    users: dict[str, str] = {}  # okta id -> store id
    rows_users: list[AwsIdentitystoreUserRow] = []
    in_app = [u for u in okta_users if u.status != "DEPROVISIONED" and u.groups & set(pushed)]
    for u in in_app:
        users[u.id] = sid()
        name = u.person.name if u.person else u.login
        rows_users.append(AwsIdentitystoreUserRow(users[u.id], u.login, name, u.login.lower(), u.id))
    # Family 1: leavers deprovisioned in Okta whose SCIM delete failed, with a direct assignment.
    stale = [
        u
        for u in okta_users
        if u.status == "DEPROVISIONED"
        and u.person
        and "eng" in u.person.tags
        and u.person.termination
        and u.person.termination > date(2025, 10, 1)
        and u.person.pid not in org.claimed
    ]
    stale = stale[:4]
    for u in stale:
        users[u.id] = sid()
        assert u.person is not None
        u.person.tags.add("aws_sso_stale_leaver")
        rows_users.append(AwsIdentitystoreUserRow(users[u.id], u.login, u.person.name, u.login.lower(), u.id))
    # A hand-made user (no external id) with admin in management: matches nobody unless resolved by email.
    manual_id = sid()
    rows_users.append(
        AwsIdentitystoreUserRow(
            manual_id,
            "admin-consultant@northbridge-consulting.com",
            "Northbridge Admin",
            "admin-consultant@northbridge-consulting.com",
            None,
        )
    )
    groups = {g: sid() for g in pushed}
    rows_groups = [AwsIdentitystoreGroupRow(groups[g], g, okta_groups[g]) for g in pushed]
    rows_members = sorted(
        AwsIdentitystoreGroupMembershipRow(groups[g], users[u.id]) for u in in_app for g in u.groups & set(pushed)
    )
    assigns: set[AwsSsoAccountAssignmentRow] = set()

    def assign(account: str, ps: str, kind: str, principal: str) -> None:
        assigns.add(AwsSsoAccountAssignmentRow(ACCT[account], ps_arn[ps], kind, principal))

    for acct in ("corvid-prod", "corvid-data-prod"):
        assign(acct, "AdministratorAccess", "GROUP", groups["aws-prod-admin"])
        assign(acct, "ReadOnlyAccess", "GROUP", groups["aws-prod-readonly"])
    for acct in ("corvid-dev", "corvid-staging", "corvid-sandbox"):
        assign(acct, "PowerUserAccess", "GROUP", groups["aws-dev-poweruser"])
    for acct in ("corvid-data-prod", "corvid-data-dev"):
        assign(acct, "DataEngineer", "GROUP", groups["aws-data-engineer"])
    for _aid, name, _ou, status in ACCOUNTS:
        if status == "ACTIVE":
            assign(name, "SecurityAudit", "GROUP", groups["aws-security-audit"])
    assign("corvid-management", "Billing", "GROUP", groups["aws-billing"])
    for acct in ("corvid-prod", "corvid-security", "corvid-log-archive"):
        assign(acct, "BreakFixAdmin", "GROUP", groups["sre-breakfix"])
    for i, u in enumerate(stale):
        assign(
            ("corvid-prod", "corvid-data-prod", "corvid-dev", "corvid-management")[i],
            "AdministratorAccess" if i % 2 == 0 else "PowerUserAccess",
            "USER",
            users[u.id],
        )
    assign("corvid-management", "AdministratorAccess", "USER", manual_id)
    direct = [u for u in in_app if u.person and "sec" in u.person.tags][:2]
    for u in direct:
        assign("corvid-security", "AdministratorAccess", "USER", users[u.id])
    assignments = sorted(assigns)
    rows: Rows = {
        "aws_sso_permission_sets": rows_ps,
        "aws_sso_permission_set_policies": rows_psp,
        "aws_sso_account_assignments": assignments,
        "aws_identitystore_users": rows_users,
        "aws_identitystore_groups": rows_groups,
        "aws_identitystore_group_memberships": rows_members,
    }
    return rows, _sso_roles(org, rows_ps, assignments)


def _sso_roles(
    org: Org, permission_sets: Sequence[AwsSsoPermissionSetRow], assignments: Sequence[AwsSsoAccountAssignmentRow]
) -> list[AwsIamRoleRow]:
    """The roles Identity Center materialises: one per (account, permission set) it has assigned."""
    ps_name = {r.arn: r.name for r in permission_sets}
    saml = "arn:aws:iam::{}:saml-provider/AWSSSO_7223c4d9e8f1a0b2_DO_NOT_DELETE"
    roles: list[AwsIamRoleRow] = []
    for account, ps in sorted({(a.account_id, a.permission_set_arn) for a in assignments}):
        name = f"AWSReservedSSO_{ps_name[ps]}_{org.hexid(16)}"
        trust = _doc(
            [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": saml.format(account)},
                    "Action": ["sts:AssumeRoleWithSAML", "sts:TagSession"],
                    "Condition": {"StringEquals": {"SAML:aud": "https://signin.aws.amazon.com/saml"}},
                }
            ]
        )
        roles.append(
            AwsIamRoleRow(
                account,
                name,
                "AROA" + org.token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 17),
                f"arn:aws:iam::{account}:role/aws-reserved/sso.amazonaws.com/{name}",
                "/aws-reserved/sso.amazonaws.com/",
                None,
                trust,
                "2020-06-01T12:05:00Z",
                ts(org.when(AS_OF - timedelta(days=10), AS_OF)),
                28800,
            )
        )
    return roles
