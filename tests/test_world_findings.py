"""Every planted posture family is in the world several times, and so are its near-miss decoys.

Each row: a family, a query for the findings, a query for decoys a careless query would confuse with them,
and the minimum count of each. The queries resolve identities the way an analyst must.
"""

from __future__ import annotations

import sqlite3

import pytest

AS_OF = "'2026-06-30T00:00:00Z'"
# HR person for an Okta user: by email, login, or a Workspace alias of the person's primary address.
OKTA_PERSON = """
  SELECT DISTINCT o.id AS okta_id, o.login, o.status AS okta_status, h.*
  FROM okta_users o
  JOIN (SELECT id, lower(login) AS address FROM okta_users UNION SELECT id, lower(email) FROM okta_users) oa
    ON oa.id = o.id
  JOIN (SELECT email AS address, id AS person_id FROM hibob_people
        UNION SELECT a.alias, h.id FROM gws_user_aliases a JOIN gws_users g ON g.id = a.user_id
        JOIN hibob_people h ON h.email = g.primary_email) addr ON addr.address = oa.address
  JOIN hibob_people h ON h.id = addr.person_id
"""
AWS_ADMIN_VIA_SSO = """
  SELECT DISTINCT iu.user_name AS login, iu.external_id
  FROM aws_sso_account_assignments a
  JOIN aws_sso_permission_set_policies p ON p.permission_set_arn = a.permission_set_arn
    AND p.policy_arn = 'arn:aws:iam::aws:policy/AdministratorAccess'
  JOIN aws_identitystore_users iu ON (a.principal_type = 'USER' AND a.principal_id = iu.user_id)
    OR (a.principal_type = 'GROUP' AND iu.user_id IN (SELECT user_id FROM aws_identitystore_group_memberships m
                                                      WHERE m.group_id = a.principal_id))
"""
PRIVILEGED_AZURE = """
  SELECT ra.principal_id FROM azure_role_assignments ra JOIN azure_directory_roles r ON r.id = ra.role_definition_id
  WHERE r.is_privileged = 1 AND ra.assignment_type = 'Active' AND ra.principal_type = 'User'
"""
EXCLUDED_FROM_MFA = """
  WITH RECURSIVE expanded(group_id, member_id, member_type) AS (
    SELECT group_id, member_id, member_type FROM azure_group_members
    UNION SELECT e.group_id, m.member_id, m.member_type FROM expanded e
      JOIN azure_group_members m ON m.group_id = e.member_id AND e.member_type = 'group')
  SELECT DISTINCT t.policy_id, COALESCE(e.member_id, t.target_id) AS user_id
  FROM azure_conditional_access_targets t
  JOIN azure_conditional_access_policies p ON p.id = t.policy_id AND p.state = 'enabled'
  LEFT JOIN expanded e ON t.target_type = 'group' AND e.group_id = t.target_id AND e.member_type = 'user'
  WHERE t.scope = 'exclude' AND (t.target_type = 'user' OR e.member_id IS NOT NULL)
"""

AZURE_ROLE_DEPTH = """
  WITH RECURSIVE below(role_group, member_id, member_type, depth) AS (
    SELECT ra.principal_id, m.member_id, m.member_type, 1 FROM azure_role_assignments ra
    JOIN azure_group_members m ON m.group_id = ra.principal_id WHERE ra.principal_type = 'Group'
    UNION SELECT b.role_group, m.member_id, m.member_type, b.depth + 1 FROM below b
    JOIN azure_group_members m ON m.group_id = b.member_id WHERE b.member_type = 'group')
  SELECT b.*, ra.assignment_type, u.account_enabled FROM below b
  JOIN azure_role_assignments ra ON ra.principal_id = b.role_group JOIN azure_users u ON u.id = b.member_id
"""
LUMEN_TWIN = """
  SELECT o.login, o.status, o.status_changed, h.email, h.status AS hr_status, c.status AS corvid_status,
         EXISTS (SELECT 1 FROM gws_users g WHERE g.primary_email = h.email) AS in_workspace
  FROM okta_users o
  JOIN hibob_people h ON h.legal_entity = 'Lumen Analytics Ltd.' AND h.first_name = o.first_name
   AND h.surname = o.last_name AND lower(o.login) = lower(substr(h.first_name, 1, 1) || h.surname) || '@lumenanalytics.com'
  LEFT JOIN okta_users c ON lower(c.login) = h.email
"""
ALIAS_IDENTITY = """
  SELECT x.address, h.status AS hr_status, g.suspended,
         x.address = lower(substr(h.first_name, 1, 1) || h.surname) || '@lumenanalytics.com' AS follows_pattern
  FROM (SELECT lower(substr(member, 6)) AS address FROM gcp_iam_bindings WHERE member LIKE 'user:%'
        UNION ALL SELECT lower(username) FROM atlas_org_users) x
  JOIN gws_user_aliases a ON lower(a.alias) = x.address JOIN gws_users g ON g.id = a.user_id
  JOIN hibob_people h ON h.email = g.primary_email
  WHERE x.address LIKE '%@lumenanalytics.com'
"""

FAMILIES = [
    (
        "1 leavers active in Okta",
        f"SELECT * FROM ({OKTA_PERSON}) WHERE status = 'terminated' AND okta_status = 'ACTIVE'",
        f"SELECT * FROM ({OKTA_PERSON}) WHERE status = 'terminated' AND okta_status = 'DEPROVISIONED'",
        5,
        50,
    ),
    (
        "1 leavers enabled in Azure AD",
        "SELECT * FROM azure_users a JOIN hibob_people h ON h.email = a.mail "
        "WHERE h.status = 'terminated' AND a.account_enabled = 1",
        "SELECT * FROM azure_users a JOIN hibob_people h ON h.email = a.mail "
        "WHERE h.status = 'terminated' AND a.account_enabled = 0",
        4,
        5,
    ),
    (
        "1 leavers unsuspended in Workspace",
        "SELECT * FROM gws_users g JOIN hibob_people h ON h.email = g.primary_email "
        "WHERE h.status = 'terminated' AND g.suspended = 0",
        "SELECT * FROM gws_users g JOIN hibob_people h ON h.email = g.primary_email "
        "WHERE h.status = 'terminated' AND g.suspended = 1",
        4,
        10,
    ),
    (
        "1 leavers' AWS keys used after termination",
        "SELECT * FROM aws_iam_access_keys k JOIN hibob_people h ON lower(k.user_name) IN "
        "(lower(substr(h.first_name, 1, 1) || h.surname) || '-dev', lower(h.first_name || '.' || h.surname)) "
        "WHERE h.status = 'terminated' AND k.status = 'Active' AND k.last_used_date > h.termination_date",
        "SELECT * FROM aws_iam_access_keys k JOIN hibob_people h ON lower(k.user_name) IN "
        "(lower(substr(h.first_name, 1, 1) || h.surname) || '-dev', lower(h.first_name || '.' || h.surname)) "
        "WHERE h.status = 'terminated' AND k.last_used_date < h.termination_date",
        2,
        1,
    ),
    (
        "1 leavers with AWS admin through Identity Center",
        f"SELECT * FROM ({AWS_ADMIN_VIA_SSO}) s JOIN ({OKTA_PERSON}) p ON p.okta_id = s.external_id "
        "WHERE p.status = 'terminated'",
        f"SELECT * FROM ({AWS_ADMIN_VIA_SSO}) s JOIN ({OKTA_PERSON}) p ON p.okta_id = s.external_id "
        "WHERE p.status = 'active'",
        3,
        5,
    ),
    (
        "1 leavers still GitHub members",
        f"SELECT * FROM github_saml_identities s JOIN ({OKTA_PERSON}) p ON p.login = s.name_id "
        "WHERE p.status = 'terminated'",
        f"SELECT * FROM ({OKTA_PERSON}) p WHERE p.status = 'terminated' AND p.department = 'Engineering' "
        "AND p.login NOT IN (SELECT name_id FROM github_saml_identities)",
        5,
        20,
    ),
    (
        "2 contractors past contract end still active",
        f"SELECT * FROM ({OKTA_PERSON}) WHERE employment_type = 'Contractor' AND status = 'active' "
        f"AND contract_end_date < substr({AS_OF}, 1, 10) AND okta_status = 'ACTIVE'",
        f"SELECT * FROM ({OKTA_PERSON}) WHERE employment_type = 'Contractor' AND status = 'active' "
        f"AND contract_end_date >= substr({AS_OF}, 1, 10)",
        5,
        10,
    ),
    (
        "3 Okta admins without a strong active factor",
        "SELECT r.assignee_id FROM okta_admin_role_assignments r WHERE r.assignee_type = 'USER' "
        "AND r.status = 'ACTIVE' AND NOT EXISTS (SELECT 1 FROM okta_factors f WHERE f.user_id = r.assignee_id "
        "AND f.status = 'ACTIVE' AND f.factor_type IN ('push', 'token:software:totp', 'signed_nonce', 'webauthn'))",
        "SELECT r.assignee_id FROM okta_admin_role_assignments r JOIN okta_factors f ON f.user_id = r.assignee_id "
        "WHERE f.factor_type = 'webauthn' AND f.status = 'ACTIVE'",
        3,
        3,
    ),
    (
        "3 privileged Azure users with no MFA method",
        f"SELECT * FROM ({PRIVILEGED_AZURE}) p JOIN azure_user_registration_details d ON d.id = p.principal_id "
        "WHERE d.is_mfa_registered = 0",
        "SELECT * FROM azure_user_registration_details d WHERE d.is_mfa_registered = 0 "
        f"AND d.id NOT IN ({PRIVILEGED_AZURE})",
        1,
        20,
    ),
    (
        "3 Workspace super admins not enrolled in 2SV, and GitHub owners without 2FA",
        "SELECT primary_email FROM gws_users WHERE is_admin = 1 AND is_enrolled_in_2sv = 0 "
        "UNION ALL SELECT login FROM github_org_members WHERE role = 'admin' AND two_factor_enabled = 0",
        "SELECT primary_email FROM gws_users WHERE is_admin = 0 AND is_enrolled_in_2sv = 0 AND suspended = 0",
        2,
        20,
    ),
    (
        "3 AWS console admins without MFA",
        "SELECT u.user_name FROM aws_iam_users u JOIN aws_iam_policy_attachments a ON a.account_id = u.account_id "
        "AND a.principal_type = 'user' AND a.principal_name = u.user_name "
        "AND a.policy_arn = 'arn:aws:iam::aws:policy/AdministratorAccess' WHERE u.password_enabled = 1 "
        "AND NOT EXISTS (SELECT 1 FROM aws_iam_mfa_devices m WHERE m.account_id = u.account_id "
        "AND m.user_name = u.user_name)",
        "SELECT u.user_name FROM aws_iam_users u JOIN aws_iam_mfa_devices m USING (account_id, user_name) "
        "WHERE u.password_enabled = 1",
        3,
        5,
    ),
    (
        "3 same person privileged in Okta and Azure AD",
        f"SELECT DISTINCT p.email FROM ({OKTA_PERSON}) p JOIN okta_admin_role_assignments r ON r.assignee_id = "
        "p.okta_id AND r.role_type IN ('SUPER_ADMIN', 'ORG_ADMIN') AND r.status = 'ACTIVE' JOIN azure_users a ON "
        f"a.mail = p.email WHERE a.id IN ({PRIVILEGED_AZURE})",
        "SELECT 1 FROM okta_admin_role_assignments WHERE status = 'INACTIVE'",
        2,
        1,
    ),
    (
        "4 privileged users excluded from an enforced MFA or block policy",
        f"SELECT * FROM ({EXCLUDED_FROM_MFA}) x WHERE x.user_id IN ({PRIVILEGED_AZURE})",
        f"SELECT * FROM ({EXCLUDED_FROM_MFA}) x WHERE x.user_id NOT IN ({PRIVILEGED_AZURE})",
        3,
        5,
    ),
    (
        "4 report-only and disabled policies (decoys for coverage questions)",
        "SELECT * FROM azure_conditional_access_policies WHERE state = 'enabled' AND grant_controls = 'mfa'",
        "SELECT * FROM azure_conditional_access_policies WHERE state <> 'enabled'",
        2,
        2,
    ),
    (
        "5 Okta accounts matching no person",
        f"SELECT login FROM okta_users WHERE id NOT IN (SELECT okta_id FROM ({OKTA_PERSON}))",
        f"SELECT login FROM ({OKTA_PERSON}) WHERE login LIKE '%@lumenanalytics.com'",
        4,
        5,
    ),
    (
        "5 GitHub members with no SAML identity",
        "SELECT login FROM github_org_members WHERE login NOT IN (SELECT login FROM github_saml_identities)",
        "SELECT login FROM github_saml_identities WHERE name_id LIKE '%@lumenanalytics.com'",
        3,
        3,
    ),
    (
        "6 GCP service accounts owned by leavers",
        "SELECT s.email FROM gcp_service_accounts s JOIN hibob_people h ON s.description = 'owner: ' || h.email "
        "WHERE h.status = 'terminated'",
        "SELECT s.email FROM gcp_service_accounts s JOIN hibob_people h ON s.description = 'owner: ' || h.email "
        "WHERE h.status = 'active'",
        3,
        3,
    ),
    (
        "6 Azure service principals owned only by leavers",
        "SELECT o.service_principal_id FROM azure_service_principal_owners o JOIN azure_users u ON u.id = o.owner_id "
        "JOIN hibob_people h ON h.email = u.mail WHERE h.status = 'terminated'",
        "SELECT o.service_principal_id FROM azure_service_principal_owners o JOIN azure_users u ON u.id = o.owner_id "
        "JOIN hibob_people h ON h.email = u.mail WHERE h.status = 'active'",
        3,
        10,
    ),
    (
        "6 stale active keys (AWS > 1 year, GCP user-managed > 1 year)",
        f"SELECT access_key_id FROM aws_iam_access_keys WHERE status = 'Active' AND create_date < "
        f"datetime({AS_OF}, '-365 days') UNION ALL SELECT key_id FROM gcp_service_account_keys "
        f"WHERE key_type = 'USER_MANAGED' AND disabled = 0 AND valid_after_time < strftime('%Y-%m-%dT%H:%M:%SZ', "
        f"{AS_OF}, '-365 days')",
        "SELECT access_key_id FROM aws_iam_access_keys WHERE status = 'Inactive' UNION ALL "
        "SELECT key_id FROM gcp_service_account_keys WHERE disabled = 1",
        5,
        3,
    ),
    (
        "6 Azure secrets valid for more than two years",
        "SELECT key_id FROM azure_service_principal_credentials WHERE type = 'Password' AND "
        "julianday(end_date_time) - julianday(start_date_time) > 731",
        "SELECT key_id FROM azure_service_principal_credentials WHERE end_date_time < " + AS_OF,
        3,
        2,
    ),
    (
        "7 AWS roles trusting principals outside the organization",
        "SELECT r.role_name FROM aws_iam_roles r, json_each(r.trust_policy, '$.Statement') s "
        "WHERE json_extract(s.value, '$.Principal.AWS') = '*' OR (json_extract(s.value, '$.Principal.AWS') LIKE "
        "'arn:aws:iam::%' AND substr(json_extract(s.value, '$.Principal.AWS'), 14, 12) NOT IN "
        "(SELECT id FROM aws_accounts))",
        "SELECT r.role_name FROM aws_iam_roles r, json_each(r.trust_policy, '$.Statement') s "
        "WHERE substr(json_extract(s.value, '$.Principal.AWS'), 14, 12) IN (SELECT id FROM aws_accounts)",
        4,
        10,
    ),
    (
        "7 GCP bindings to the public or outside domains",
        "SELECT * FROM gcp_iam_bindings WHERE member IN ('allUsers', 'allAuthenticatedUsers') "
        "OR (member LIKE 'domain:%' AND member <> 'domain:corvid.io') OR member LIKE 'user:%@gmail.com'",
        "SELECT * FROM gcp_iam_bindings WHERE member = 'domain:corvid.io' OR member LIKE 'user:%@lumenanalytics.com'",
        4,
        2,
    ),
    (
        "7 Workspace group members outside both company domains",
        "SELECT * FROM gws_group_members WHERE type = 'USER' AND member_email NOT LIKE '%@corvid.io' "
        "AND member_email NOT LIKE '%@lumenanalytics.com'",
        "SELECT * FROM gws_group_members WHERE member_email LIKE '%@lumenanalytics.com'",
        5,
        10,
    ),
    (
        "7 GitHub outside collaborators with admin",
        "SELECT * FROM github_repo_collaborators WHERE affiliation = 'outside' AND permission = 'admin'",
        "SELECT * FROM github_repo_collaborators WHERE affiliation = 'outside' AND permission = 'pull'",
        3,
        5,
    ),
    (
        "7 Azure guests holding directory roles",
        "SELECT * FROM azure_role_assignments ra JOIN azure_users u ON u.id = ra.principal_id "
        "WHERE u.user_type = 'Guest'",
        "SELECT * FROM azure_users WHERE user_type = 'Guest' AND id NOT IN "
        "(SELECT principal_id FROM azure_role_assignments)",
        3,
        20,
    ),
    (
        "8 admin through an Okta group pushed to AWS, held by people outside platform engineering",
        f"SELECT * FROM ({AWS_ADMIN_VIA_SSO}) s JOIN ({OKTA_PERSON}) p ON p.okta_id = s.external_id "
        "WHERE p.department NOT IN ('Platform', 'Security', 'IT')",
        f"SELECT * FROM ({AWS_ADMIN_VIA_SSO}) s JOIN ({OKTA_PERSON}) p ON p.okta_id = s.external_id "
        "WHERE p.department = 'Platform'",
        3,
        3,
    ),
    (
        "8 GCP org admin through nested Workspace groups",
        "SELECT m2.member_email FROM gcp_iam_bindings b JOIN gws_groups g ON b.member = 'group:' || g.email "
        "JOIN gws_group_members m1 ON m1.group_id = g.id AND m1.type = 'GROUP' "
        "JOIN gws_group_members m2 ON m2.group_id = m1.member_id AND m2.type = 'USER' "
        "WHERE b.role = 'roles/resourcemanager.organizationAdmin'",
        # Decoy: direct (not nested) user members of the same group; a join that stops at one level finds only these.
        "SELECT m1.member_email FROM gcp_iam_bindings b JOIN gws_groups g ON b.member = 'group:' || g.email "
        "JOIN gws_group_members m1 ON m1.group_id = g.id AND m1.type = 'USER' "
        "WHERE b.role = 'roles/resourcemanager.organizationAdmin'",
        3,
        1,
    ),
    (
        "9 Atlas access lists open to the internet",
        "SELECT * FROM atlas_ip_access_list WHERE cidr_block IN ('0.0.0.0/0', '0.0.0.0/1', '128.0.0.0/1')",
        "SELECT * FROM atlas_ip_access_list WHERE cidr_block LIKE '10.%' OR cidr_block LIKE '%/32'",
        3,
        3,
    ),
    (
        "10 IdP super admin who is also AWS administrator",
        f"SELECT * FROM ({AWS_ADMIN_VIA_SSO}) s JOIN okta_admin_role_assignments r ON r.assignee_id = s.external_id "
        "AND r.role_type IN ('SUPER_ADMIN', 'ORG_ADMIN') AND r.status = 'ACTIVE'",
        "SELECT * FROM okta_admin_role_assignments WHERE role_type = 'READ_ONLY_ADMIN'",
        2,
        2,
    ),
    (
        "11 dormant privileged accounts (90+ days)",
        "SELECT u.login FROM okta_users u JOIN okta_admin_role_assignments r ON r.assignee_id = u.id "
        f"WHERE r.role_type = 'SUPER_ADMIN' AND r.status = 'ACTIVE' AND u.last_login < datetime({AS_OF}, '-90 days') "
        "UNION ALL SELECT primary_email FROM gws_users WHERE is_admin = 1 "
        f"AND last_login_time < strftime('%Y-%m-%dT%H:%M:%SZ', {AS_OF}, '-90 days') "
        f"UNION ALL SELECT u.user_principal_name FROM azure_users u WHERE u.id IN ({PRIVILEGED_AZURE}) "
        f"AND u.last_sign_in_date_time < strftime('%Y-%m-%dT%H:%M:%SZ', {AS_OF}, '-90 days')",
        "SELECT primary_email FROM gws_users WHERE is_admin = 1 AND last_login_time > "
        f"strftime('%Y-%m-%dT%H:%M:%SZ', {AS_OF}, '-30 days')",
        4,
        3,
    ),
    (
        "12 broad OAuth grants to unverified apps",
        "SELECT * FROM gws_oauth_tokens WHERE anonymous = 1 AND (scopes LIKE '%https://mail.google.com/%' "
        "OR scopes LIKE '%auth/drive %' OR scopes LIKE '%auth/drive' OR scopes LIKE '%admin.directory%')",
        "SELECT * FROM gws_oauth_tokens WHERE anonymous = 0 AND scopes = 'openid email profile'",
        8,
        100,
    ),
    (
        "13 Azure AD roles held through two or more levels of nesting",
        f"SELECT * FROM ({AZURE_ROLE_DEPTH}) WHERE depth >= 3 AND assignment_type = 'Active' AND account_enabled = 1",
        # Decoys: a disabled account down the same chain, and members of a group that contains a role group
        # (reading nesting backwards would give them the role).
        f"SELECT member_id FROM ({AZURE_ROLE_DEPTH}) WHERE depth >= 3 AND account_enabled = 0 "
        "UNION ALL SELECT m.member_id FROM azure_group_members m WHERE m.member_type = 'user' AND m.group_id IN "
        "(SELECT c.group_id FROM azure_group_members c JOIN azure_role_assignments ra ON ra.principal_id = c.member_id)",
        3,
        2,
    ),
    (
        "14 PIM-eligible Global Administrator through a nested group",
        f"SELECT * FROM ({AZURE_ROLE_DEPTH}) WHERE depth >= 2 AND assignment_type = 'Eligible'",
        f"SELECT * FROM ({AZURE_ROLE_DEPTH}) WHERE depth >= 2 AND assignment_type = 'Active'",
        1,
        3,
    ),
    (
        "15 leavers active in Okta only under a Lumen login, with no Workspace alias left",
        f"SELECT * FROM ({LUMEN_TWIN}) WHERE hr_status = 'terminated' AND status = 'ACTIVE' "
        "AND corvid_status = 'DEPROVISIONED' AND in_workspace = 0",
        # Decoy: a current employee whose old-login twin is the deactivated one.
        f"SELECT * FROM ({LUMEN_TWIN}) WHERE hr_status = 'active' AND status = 'DEPROVISIONED' "
        "AND corvid_status = 'ACTIVE'",
        2,
        1,
    ),
    (
        "16 leavers' access under an old address that a Workspace alias resolves (once off the login pattern)",
        f"SELECT * FROM ({ALIAS_IDENTITY}) WHERE hr_status = 'terminated' AND suspended = 1 "
        f"AND (SELECT count(*) FROM ({ALIAS_IDENTITY}) WHERE hr_status = 'terminated' AND NOT follows_pattern) >= 1",
        # Decoy: current staff whose old address is in use (the pattern and the alias agree on them).
        f"SELECT * FROM ({ALIAS_IDENTITY}) WHERE hr_status = 'active'",
        2,
        1,
    ),
    (
        "18 federated Atlas sign-in after the person's only Okta account, under a Lumen login, was deactivated",
        f"SELECT * FROM ({LUMEN_TWIN}) t JOIN atlas_org_users a ON lower(a.username) = t.email "
        "WHERE a.federated = 1 AND t.status = 'DEPROVISIONED' AND t.corvid_status IS NULL "
        "AND a.last_auth > t.status_changed",
        # Decoy: federated Atlas users whose Okta account (by email) is still active.
        "SELECT * FROM atlas_org_users a JOIN okta_users o ON lower(o.login) = lower(a.username) "
        "WHERE a.federated = 1 AND o.status = 'ACTIVE'",
        1,
        5,
    ),
    (
        "17 revoked Okta admin roles on accounts that can sign in",
        "SELECT * FROM okta_admin_role_assignments r JOIN okta_users u ON u.id = r.assignee_id "
        "WHERE r.status = 'INACTIVE' AND u.status = 'ACTIVE'",
        "SELECT * FROM okta_admin_role_assignments r JOIN okta_users u ON u.id = r.assignee_id "
        "WHERE r.status = 'ACTIVE' AND u.status = 'ACTIVE'",
        2,
        5,
    ),
]


@pytest.mark.parametrize(
    ("findings", "decoys", "min_findings", "min_decoys"),
    [f[1:] for f in FAMILIES],
    ids=[f[0] for f in FAMILIES],
)
def test_family_is_planted_with_decoys(
    world_db: sqlite3.Connection, findings: str, decoys: str, min_findings: int, min_decoys: int
) -> None:
    found = world_db.execute(f"SELECT count(*) FROM ({findings})").fetchone()[0]
    decoy = world_db.execute(f"SELECT count(*) FROM ({decoys})").fetchone()[0]
    assert found >= min_findings, f"{found} findings"
    assert decoy >= min_decoys, f"{decoy} decoys"
