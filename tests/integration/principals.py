"""Authenticated callers for API tests, made directly with the stores (no sign-up flow):
an org with its owner and wallet, then API keys and user sessions of any role.

    org = new_org()
    client.get("/v1/billing/controls", headers=org.key_headers("billing"))
    client.put("/v1/billing/controls", json={...}, headers=org.session_headers("billing"))

And the fixtures API test modules share (import them by name, `org as org`): `org`, a funded
org with its keys; `stack` + `client` for a module that runs batches on the fast local
pipeline and instant chat (`pipeline_stack`, `pipeline_client`); `clock` + `client` for one
that runs at a fixed, injected time with every lane's heartbeat fresh (`fixed_clock`,
`clocked_client`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.app_secret import app_secret
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.accounts.access import Role
from batchroute.domain.accounts.accounts import ApiKey, Org, Session, User
from batchroute.domain.accounts.credentials import issue_api_key, keyed_hash, new_opaque_token
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.batch_pipeline_support import fast_pipeline, heartbeat_all_lanes, instant_chat_app

CREATED_AT = "2026-01-01T00:00:00.000Z"
START = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)  # `fixed_clock`'s time
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


# -- fixtures shared by API test modules -------------------------------------------------------
@pytest.fixture
def org(client: TestClient) -> TestOrg:
    """An org with $10 of credit, its owner and its keys (made once the module's client is up)."""
    return new_org(credit_usd="10")


@pytest.fixture(name="stack")
def pipeline_stack(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[LocalStack]:
    """The local stack with the fast pipeline (no latency, no backoff, an outbox for webhooks)."""
    with fast_pipeline(monkeypatch, tmp_path / "outbox"):
        yield local_aws


@pytest.fixture(name="client")
def pipeline_client(stack: LocalStack) -> Iterator[TestClient]:
    """The API whose chat completions answer at once, over `pipeline_stack`."""
    with TestClient(instant_chat_app(), raise_server_exceptions=False) as test_client:
        yield test_client


@contextmanager
def instant_chat_client() -> Iterator[TestClient]:
    """The API whose chat completions answer at once, every lane's heartbeat fresh, over the
    module's local stack (for chat modules with fixtures of their own)."""
    identity_store.cache_clear()
    heartbeat_all_lanes()
    with TestClient(instant_chat_app(), raise_server_exceptions=False) as test_client:
        yield test_client


def chat_sdk(client: TestClient, org: TestOrg, *, max_retries: int = 0) -> openai.OpenAI:
    """The official SDK as `org`'s owner key, through the in-process `client`."""
    return openai.OpenAI(
        base_url="http://testserver/v1", api_key=org.api_key(), http_client=client, max_retries=max_retries
    )


@pytest.fixture(name="clock")
def fixed_clock() -> FixedClock:
    return FixedClock(START)


@pytest.fixture(name="client")
def clocked_client(local_aws: LocalStack, clock: FixedClock) -> TestClient:
    """The API on the injected `clock`, every lane's heartbeat fresh at its time."""
    identity_store.cache_clear()
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: clock
    heartbeat_all_lanes(clock)
    return TestClient(app, raise_server_exceptions=False)
