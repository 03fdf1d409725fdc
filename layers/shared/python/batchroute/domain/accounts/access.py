"""Who may do what: roles, permissions, the principal of a request, and the one check.

The role matrix is documented in docs/roles.md; tests/unit/test_access.py checks every
role against every guarded action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from batchroute.errors import Forbidden

Role = Literal["owner", "admin", "member", "billing"]
ROLES: tuple[Role, ...] = get_args(Role)

Permission = Literal[
    "account:read",  # GET account, runtime details
    "account:manage",  # profile
    "keys:manage",  # create and revoke API keys
    "delivery:manage",  # org delivery webhook, delivery targets
    "retention:manage",  # retention settings
    "billing:read",  # controls, audit, usage, auto top-up, receipts
    "billing:manage",  # billing controls, auto top-up
    "batches:read",  # quotes, batches, results, files
    "batches:create",  # quotes, batches, files, chat completions, cancel, retry
    "routing:read",  # the org's route policy and its history
    "routing:manage",  # PUT the org's route policy
]
PERMISSIONS: tuple[Permission, ...] = get_args(Permission)

ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    "owner": frozenset(PERMISSIONS),
    "admin": frozenset(PERMISSIONS) - {"billing:manage"},
    "member": frozenset({"account:read", "batches:read", "batches:create", "routing:read"}),
    "billing": frozenset({"account:read", "billing:read", "billing:manage", "batches:read", "routing:read"}),
}


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: a user through a session, or an API key of an org.

    `user_id` is set only for a session. A key acts for its org with its own role, but it
    may belong to a user (`key_user_id`: who created it, or the user `agent-register`
    registered); that user is who a key edits "their own" profile for."""

    org_id: str
    role: Role
    via: Literal["session", "api_key"]
    user_id: str | None = None
    key_id: str | None = None
    session_id: str | None = None
    key_user_id: str | None = None

    @property
    def has_user_session(self) -> bool:
        return self.via == "session" and self.user_id is not None

    @property
    def acting_user_id(self) -> str | None:
        """The user this caller acts as: the session's user, or the user a key belongs to."""
        return self.user_id if self.via == "session" else self.key_user_id


def may(principal: Principal, permission: Permission) -> bool:
    return permission in ROLE_PERMISSIONS[principal.role]


def authorize(principal: Principal, permission: Permission) -> None:
    if not may(principal, permission):
        raise Forbidden(
            f"The {principal.role} role may not do this ({permission}).",
            code="permission_denied",
            details={"permission": permission, "role": principal.role},
        )


def authorize_grant(principal: Principal, role: Role) -> None:
    """The caller may hand out (or take back) only a role that can do nothing its own role
    cannot, so no one gains a permission by creating a credential: 403 `permission_denied`
    when `role` has a permission the caller's role lacks (an admin
    creating or revoking an owner or billing key: `billing:manage`). The details name the
    first missing permission and the caller's role, as `authorize` does, plus the role asked
    for (`target_role`) and every missing permission."""
    missing = _missing_to_grant(principal.role, role)
    if missing:
        raise Forbidden(
            f"The {principal.role} role may not manage a credential of the {role} role, which "
            f"may do what the {principal.role} role may not ({', '.join(missing)}).",
            code="permission_denied",
            details={
                "permission": missing[0],
                "role": principal.role,
                "target_role": role,
                "missing_permissions": missing,
            },
        )


def grantable_roles(principal: Principal) -> list[Role]:
    """The roles `authorize_grant` lets the caller hand out (create or revoke a key of), in
    `ROLES` order: every role for an owner, admin and member for an admin. The keys page
    offers only these (`GET /v1/auth/account/api-keys`, `grantable_roles`)."""
    return [role for role in ROLES if not _missing_to_grant(principal.role, role)]


def _missing_to_grant(caller: Role, role: Role) -> list[Permission]:
    """The permissions `role` has and `caller` lacks, in `PERMISSIONS` order."""
    return [p for p in PERMISSIONS if p in ROLE_PERMISSIONS[role] - ROLE_PERMISSIONS[caller]]


def require_same_org(principal: Principal, org_id: str) -> None:
    """Another org's resource is forbidden (403), not hidden."""
    if principal.org_id != org_id:
        raise Forbidden("This resource belongs to another organization.", code="forbidden")


def require_user(principal: Principal) -> str:
    """The user a caller acts as (a session's user, or a key's user); a key with no user
    gets the same 403 as a user-session-only action."""
    user_id = principal.acting_user_id
    if user_id is None:
        raise no_user()
    return user_id


def no_user() -> Forbidden:
    return Forbidden(
        "This action needs a user: sign in, or use an API key that belongs to a user.",
        code="user_session_required",
    )


def require_user_session(principal: Principal) -> None:
    if not principal.has_user_session:
        raise Forbidden(
            "This action needs a signed-in user session; API keys cannot perform it.",
            code="user_session_required",
        )
