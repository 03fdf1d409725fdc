"""Accounts: organizations, users, API keys and sessions as domain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from batchroute.domain.accounts.access import Role

# The console session's cookie (docs/auth.md).
SESSION_COOKIE = "service_ui_session"


def normalize_email(email: str) -> str:
    """One spelling per address: trimmed and lower-cased (the whole address, as providers treat it)."""
    return email.strip().lower()


class DeliveryWebhookConfig(TypedDict):
    """The org's default delivery webhook as stored (the secret KMS-sealed)."""

    url: str
    secret_ciphertext: str
    updated_at: str


@dataclass(frozen=True)
class Org:
    org_id: str
    display_name: str
    plan: str
    owner_user_id: str
    created_at: str
    delivery_webhook: DeliveryWebhookConfig | None = None


@dataclass(frozen=True)
class User:
    user_id: str
    org_id: str
    email: str
    password_hash: str
    role: Role
    created_at: str
    # Counts the password's changes (a reset adds one): a session is good only while its
    # user's count is the one it was signed in under (`Session.signed_in_as`). Items stored
    # before it read 0.
    credentials_version: int = 0
    full_name: str | None = None
    display_name: str | None = None
    email_verified_at: str | None = None


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    org_id: str
    key_hash: str
    label: str
    role: Role
    display_prefix: str
    created_at: str
    created_by_user_id: str | None = None
    revoked_at: str | None = None


@dataclass(frozen=True)
class Session:
    session_id: str
    token_hash: str
    user_id: str
    org_id: str
    created_at: str
    expires_at: str
    # The user's credentials_version when the password signed it in.
    credentials_version: int = 0
    revoked_at: str | None = None

    def signed_in_as(self, user: User) -> bool:
        """The session is still the user's: signed in under the password they have now (a
        reset since ends it, even one that raced the sign-in or a session the reset's
        revocation did not see)."""
        return user.user_id == self.user_id and user.credentials_version == self.credentials_version


@dataclass(frozen=True)
class SpentToken:
    """A single-use link's token, spent: whose it was, and the user's credentials_version
    when it was issued (a reset link issued before the password last changed is no good)."""

    user_id: str
    credentials_version: int = 0
