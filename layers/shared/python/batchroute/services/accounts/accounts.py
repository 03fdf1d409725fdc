"""Registration: a new org with its owner user, its wallet (with the signup credit) and, for
agents, a first API key, written in one transaction.

The email claim is a conditional put inside that transaction, so of two concurrent
registrations of one address exactly one succeeds; the other gets 409 `email_taken` from
the store. The verification email is sent after the commit; if it cannot be sent the
account still exists and the user can ask for a new link.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.accounts import ApiKey, Org, User
from batchroute.domain.accounts.credentials import issue_api_key
from batchroute.domain.accounts.passwords import check_password, checked_email
from batchroute.errors import InvalidRequest
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.transactions import TransactItem

DEFAULT_PLAN = "prepaid"
AGENT_KEY_LABEL = "agent"
MAX_DISPLAY_NAME = 128
MAX_FULL_NAME = 256


class AccountStore(Protocol):
    def create_account(
        self,
        *,
        org: Org,
        user: User,
        api_key: ApiKey | None = None,
        extra: list[TransactItem] | None = None,
    ) -> None: ...


class Wallets(Protocol):
    def open_wallet_items(self, org_id: str, *, signup_credit: Money, at: str) -> list[TransactItem]: ...


class VerificationLinks(Protocol):
    def send_link(self, user: User) -> None: ...


@dataclass(frozen=True)
class NewAccount:
    org: Org
    user: User
    credit_balance: Money
    verification_email_sent: bool
    api_key: ApiKey | None = None
    api_key_value: str | None = field(default=None, repr=False)  # shown once, never stored


def clean_display_name(value: str | None) -> str | None:
    """Trimmed; None when absent; 400 when blank or longer than 128 characters."""
    if value is None:
        return None
    cleaned = value.strip()
    if not 1 <= len(cleaned) <= MAX_DISPLAY_NAME or not cleaned.isprintable():
        raise InvalidRequest(
            f"display_name must be 1 to {MAX_DISPLAY_NAME} printable characters.", code="invalid_display_name"
        )
    return cleaned


def clean_full_name(value: str | None) -> str | None:
    """Trimmed; None when absent or blank; 400 when longer than 256 characters."""
    if value is None:
        return None
    cleaned = value.strip()
    if len(cleaned) > MAX_FULL_NAME:
        raise InvalidRequest(
            f"full_name must be at most {MAX_FULL_NAME} characters.", code="invalid_full_name"
        )
    return cleaned or None


@dataclass(eq=False)
class Registration:
    store: AccountStore
    wallets: Wallets
    passwords: Argon2Passwords
    verification: VerificationLinks
    _: KW_ONLY
    environment: str
    secret: Callable[[], bytes]
    signup_credit: Money
    clock: Clock

    def register(
        self, *, email: str, password: str, full_name: str | None = None, display_name: str | None = None
    ) -> NewAccount:
        return self._create(
            email=email, password=password, full_name=full_name, display_name=display_name, with_key=False
        )

    def register_agent(self, *, email: str, password: str, display_name: str | None = None) -> NewAccount:
        """Like `register`, plus an owner API key usable at once (its value is returned once)."""
        return self._create(
            email=email, password=password, full_name=None, display_name=display_name, with_key=True
        )

    def _create(
        self,
        *,
        email: str,
        password: str,
        full_name: str | None,
        display_name: str | None,
        with_key: bool,
    ) -> NewAccount:
        address = checked_email(email)
        check_password(password)
        org_name = clean_display_name(display_name) or address.split("@")[0][:MAX_DISPLAY_NAME]
        full_name = clean_full_name(full_name)
        now = self.clock.now()
        at = isoformat(now)
        org_id, user_id = new_id("org", now), new_id("user", now)
        user = User(
            user_id=user_id,
            org_id=org_id,
            email=address,
            password_hash=self.passwords.hash(password),
            role="owner",
            created_at=at,
            full_name=full_name,
        )
        org = Org(
            org_id=org_id, display_name=org_name, plan=DEFAULT_PLAN, owner_user_id=user_id, created_at=at
        )
        api_key, key_value = self._agent_key(org_id, user_id, at) if with_key else (None, None)
        wallet = self.wallets.open_wallet_items(org_id, signup_credit=self.signup_credit, at=at)
        self.store.create_account(org=org, user=user, api_key=api_key, extra=wallet)
        return NewAccount(
            org=org,
            user=user,
            credit_balance=self.signup_credit,
            verification_email_sent=self._send_verification(user),
            api_key=api_key,
            api_key_value=key_value,
        )

    def _agent_key(self, org_id: str, user_id: str, at: str) -> tuple[ApiKey, str]:
        issued = issue_api_key(self.environment, self.secret())
        key = ApiKey(
            key_id=new_id("key"),
            org_id=org_id,
            key_hash=issued.key_hash,
            label=AGENT_KEY_LABEL,
            role="owner",
            display_prefix=issued.display_prefix,
            created_at=at,
            created_by_user_id=user_id,
        )
        return key, issued.value

    def _send_verification(self, user: User) -> bool:
        try:
            self.verification.send_link(user)
        except Exception:
            # The account is committed; failing now would only make the client retry into 409.
            logger.exception("verification email not sent", extra={"user_id": user.user_id})
            return False
        return True
