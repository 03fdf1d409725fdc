"""Listing, creating and revoking API keys. The key value is returned once and never stored.

A caller creates or revokes only keys whose role can do nothing the caller's own role cannot
(`authorize_grant`, docs/roles.md): an admin may not mint an owner or billing key and so gain
`billing:manage`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import (
    Principal,
    Role,
    authorize,
    authorize_grant,
    require_user_session,
)
from batchroute.domain.accounts.accounts import ApiKey
from batchroute.domain.accounts.credentials import issue_api_key
from batchroute.errors import NotFound
from batchroute.ids import new_id


class KeyStore(Protocol):
    def put_key(self, key: ApiKey) -> None: ...

    def keys_of(self, org_id: str) -> list[ApiKey]: ...

    def key_of(self, org_id: str, key_id: str) -> ApiKey | None: ...

    def revoke_key(self, key: ApiKey, at: str) -> bool: ...


@dataclass(frozen=True)
class CreatedKey:
    key: ApiKey
    value: str  # shown once


@dataclass(eq=False)
class ApiKeys:
    store: KeyStore
    _: KW_ONLY
    environment: str
    secret: Callable[[], bytes]
    clock: Clock

    def create(self, principal: Principal, *, label: str, role: Role) -> CreatedKey:
        require_user_session(principal)
        authorize(principal, "keys:manage")
        authorize_grant(principal, role)
        issued = issue_api_key(self.environment, self.secret())
        key = ApiKey(
            key_id=new_id("key"),
            org_id=principal.org_id,
            key_hash=issued.key_hash,
            label=label,
            role=role,
            display_prefix=issued.display_prefix,
            created_at=isoformat(self.clock.now()),
            created_by_user_id=principal.user_id,
        )
        self.store.put_key(key)
        return CreatedKey(key=key, value=issued.value)

    def list(self, principal: Principal) -> list[ApiKey]:
        """The org's keys, newest first, revoked ones included (with `revoked_at`); never a value."""
        require_user_session(principal)
        authorize(principal, "keys:manage")
        return sorted(self.store.keys_of(principal.org_id), key=lambda k: k.created_at, reverse=True)

    def revoke(self, principal: Principal, key_id: str) -> None:
        require_user_session(principal)
        authorize(principal, "keys:manage")
        # Keys are found within the caller's org only: another org's key id is simply unknown.
        key = self.store.key_of(principal.org_id, key_id)
        if key is None:
            raise NotFound("No such API key.", code="api_key_not_found")
        authorize_grant(principal, key.role)
        self.store.revoke_key(key, isoformat(self.clock.now()))
