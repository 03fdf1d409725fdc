"""The role matrix in docs/roles.md is the one the code enforces."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchroute.domain.accounts.access import (
    PERMISSIONS,
    ROLE_PERMISSIONS,
    ROLES,
    Principal,
    authorize,
    authorize_grant,
    grantable_roles,
    require_same_org,
    require_user,
    require_user_session,
)
from batchroute.errors import Forbidden

DOC = Path(__file__).resolve().parents[2] / "docs" / "roles.md"


def may_grant(principal: Principal, role: str) -> bool:
    """Whether `authorize_grant` lets the caller create or revoke a key of `role`."""
    try:
        authorize_grant(principal, role)  # type: ignore[arg-type]
    except Forbidden:
        return False
    return True


def _documented_matrix() -> dict[str, dict[str, bool]]:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `")]
    header = next(line for line in DOC.read_text().splitlines() if line.startswith("| Permission"))
    roles = [cell.strip() for cell in header.strip("|").split("|")][2:]
    matrix: dict[str, dict[str, bool]] = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        permission = cells[0].strip("`")
        matrix[permission] = {role: cells[2 + i] == "yes" for i, role in enumerate(roles)}
    return matrix


def test_documented_matrix_matches_the_code() -> None:
    documented = _documented_matrix()
    assert set(documented) == set(PERMISSIONS)
    for permission, by_role in documented.items():
        for role in ROLES:
            assert (permission in ROLE_PERMISSIONS[role]) is by_role[role], (role, permission)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("permission", PERMISSIONS)
def test_authorize_every_role_for_every_permission(role: str, permission: str) -> None:
    principal = Principal(org_id="org_1", role=role, via="api_key")  # type: ignore[arg-type]
    if permission in ROLE_PERMISSIONS[role]:  # type: ignore[index]
        authorize(principal, permission)  # type: ignore[arg-type]
    else:
        with pytest.raises(Forbidden) as caught:
            authorize(principal, permission)  # type: ignore[arg-type]
        assert caught.value.code == "permission_denied"


def test_user_session_required_refuses_keys_even_owner_keys() -> None:
    with pytest.raises(Forbidden) as caught:
        require_user_session(Principal(org_id="org_1", role="owner", via="api_key", key_id="key_1"))
    assert caught.value.code == "user_session_required"
    require_user_session(Principal(org_id="org_1", role="member", via="session", user_id="user_1"))


def test_require_user_names_the_session_user_or_the_keys_user() -> None:
    # A session acts as its user; a key as the user it belongs to, never as a signed-in user
    session = Principal(org_id="org_1", role="member", via="session", user_id="user_1")
    owned_key = Principal(org_id="org_1", role="owner", via="api_key", key_id="key_1", key_user_id="user_2")
    assert require_user(session) == "user_1" and require_user(owned_key) == "user_2"
    assert not owned_key.has_user_session
    with pytest.raises(Forbidden) as caught:
        require_user_session(owned_key)
    assert caught.value.code == "user_session_required"
    # A key with no user has none
    with pytest.raises(Forbidden) as caught:
        require_user(Principal(org_id="org_1", role="owner", via="api_key", key_id="key_1"))
    assert caught.value.code == "user_session_required"


def test_another_orgs_resource_is_forbidden() -> None:
    with pytest.raises(Forbidden):
        require_same_org(Principal(org_id="org_1", role="owner", via="api_key"), "org_2")


@pytest.mark.parametrize("caller", ROLES)
@pytest.mark.parametrize("role", ROLES)
def test_a_role_is_granted_only_within_the_callers_permissions(caller: str, role: str) -> None:
    principal = Principal(org_id="org_1", role=caller, via="session", user_id="user_1")  # type: ignore[arg-type]
    within = ROLE_PERMISSIONS[role] <= ROLE_PERMISSIONS[caller]  # type: ignore[index]
    assert may_grant(principal, role) is within  # type: ignore[arg-type]
    if within:
        authorize_grant(principal, role)  # type: ignore[arg-type]
    else:
        with pytest.raises(Forbidden) as caught:
            authorize_grant(principal, role)  # type: ignore[arg-type]
        assert caught.value.code == "permission_denied"
        details = caught.value.details or {}
        assert details["role"] == caller and details["target_role"] == role
        assert details["permission"] not in ROLE_PERMISSIONS[caller]  # type: ignore[index]


def test_an_admin_grants_neither_owner_nor_billing() -> None:
    admin = Principal(org_id="org_1", role="admin", via="session", user_id="user_1")
    assert [role for role in ROLES if may_grant(admin, role)] == ["admin", "member"]
    owner = Principal(org_id="org_1", role="owner", via="session", user_id="user_1")
    assert all(may_grant(owner, role) for role in ROLES)


@pytest.mark.parametrize("caller", ROLES)
def test_grantable_roles_are_the_roles_authorize_grant_allows(caller: str) -> None:
    principal = Principal(org_id="org_1", role=caller, via="session", user_id="user_1")  # type: ignore[arg-type]
    assert grantable_roles(principal) == [role for role in ROLES if may_grant(principal, role)]
    admin = Principal(org_id="org_1", role="admin", via="session", user_id="user_1")
    assert grantable_roles(admin) == ["admin", "member"]


def test_documented_grant_table_matches_the_code() -> None:
    """docs/roles.md, Granting roles: the key roles owner and admin may create and revoke."""
    text = DOC.read_text().split("## Granting roles", 1)[1].split("\n## ", 1)[0]
    for caller in ("owner", "admin"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {caller} |"))
        listed = row.split("|")[2].split("(")[0]
        documented = [role.strip() for role in listed.split(",")]
        principal = Principal(org_id="org_1", role=caller, via="session", user_id="user_1")
        assert documented == [role for role in ROLES if may_grant(principal, role)], caller
