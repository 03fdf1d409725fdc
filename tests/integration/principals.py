"""Authenticated callers for API tests, made directly with the stores (no sign-up flow):
an org with its owner and wallet, then API keys and user sessions of any role.

    org = new_org()
    client.get("/v1/billing/controls", headers=org.key_headers("billing"))
    client.put("/v1/billing/controls", json={...}, headers=org.session_headers("billing"))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.config import get_settings
from batchroute.domain.access import Role
from batchroute.domain.accounts import ApiKey, Org, Session, User
from batchroute.domain.credentials import issue_api_key, keyed_hash, new_opaque_token
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.services.accounts.app_secret import app_secret
from batchroute.services.accounts.authentication import SESSION_COOKIE
from functions.api.auth import identity_store

CREATED_AT = "2026-01-01T00:00:00.000Z"
EXPIRES_AT = "2999-01-01T00:00:00.000Z"


def ledger_store() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


@dataclass
class TestOrg:
    __test__ = False  # not a test class, whatever pytest thinks of the name

    org_id: str
    owner_user_id: str
    key_ids: dict[str, str] = field(default_factory=dict)  # key value -> key id

    def api_key(self, role: Role = "owner", *, legacy: bool = False) -> str:
        """A new bearer key of this org with `role` (no associated user, like every key)."""
        issued = issue_api_key(get_settings().environment, app_secret(), legacy=legacy)
        key_id = new_id("key")
        identity_store().put_key(
            ApiKey(
                key_id=key_id,
                org_id=self.org_id,
                key_hash=issued.key_hash,
                label=f"{role} key",
                role=role,
                display_prefix=issued.display_prefix,
                created_at=CREATED_AT,
            )
        )
        self.key_ids[issued.value] = key_id
        return issued.value

    def key_headers(self, role: Role = "owner") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key(role)}"}

    def session_token(self, role: Role = "owner") -> str:
        """A signed-in session of a user with `role` (the owner for owner, a new member otherwise)."""
        store = identity_store()
        user_id = self.owner_user_id
        if role != "owner":
            user_id = new_id("user")
            store.dynamodb.put_item(**store.user_item(_user(user_id, self.org_id, role))["Put"])
        token = new_opaque_token()
        store.put_session(
            Session(
                session_id=new_id("sess"),
                token_hash=keyed_hash(app_secret(), token),
                user_id=user_id,
                org_id=self.org_id,
                created_at=CREATED_AT,
                expires_at=EXPIRES_AT,
            )
        )
        return token

    def session_headers(self, role: Role = "owner") -> dict[str, str]:
        """The session cookie as a header: per request, unlike the client's cookie jar."""
        return {"Cookie": f"{SESSION_COOKIE}={self.session_token(role)}"}


def new_org(*, credit_usd: str = "0") -> TestOrg:
    """An org, its owner user and its wallet (with `credit_usd` of signup credit)."""
    org_id, user_id = new_id("org"), new_id("user")
    identity_store().create_account(
        org=Org(
            org_id=org_id, display_name="Acme", plan="prepaid", owner_user_id=user_id, created_at=CREATED_AT
        ),
        user=_user(user_id, org_id, "owner"),
        extra=ledger_store().open_wallet_items(org_id, signup_credit=Money.usd(credit_usd), at=CREATED_AT),
    )
    return TestOrg(org_id=org_id, owner_user_id=user_id)


def _user(user_id: str, org_id: str, role: Role) -> User:
    return User(
        user_id=user_id,
        org_id=org_id,
        email=f"{user_id}@example.com",
        password_hash="not-a-real-hash",
        role=role,
        created_at=CREATED_AT,
    )
