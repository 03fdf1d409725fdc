"""What the accounts context reads and writes of its users and credentials, declared once
(adapters/dynamo/identity.py:IdentityStore implements every one)."""

from __future__ import annotations

from typing import Protocol

from batchroute.domain.accounts.accounts import ApiKey, Session, User


class UserReader(Protocol):
    def get_user(self, user_id: str) -> User | None: ...

    def user_by_email(self, email: str) -> User | None: ...


class UserRecords(UserReader, Protocol):
    def update_user(self, user_id: str, **changes: object) -> None: ...


class CredentialStore(UserReader, Protocol):
    """An API key or a session by the keyed hash of its secret, and the user behind it."""

    def key_by_hash(self, key_hash: str) -> ApiKey | None: ...

    def session_by_hash(self, token_hash: str) -> Session | None: ...
