"""No secret in clear at rest or in logs; one account per address under concurrency."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from batchroute.adapters.app_secret import app_secret
from batchroute.adapters.aws import client
from batchroute.adapters.dynamo.identity import EmailTaken
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.adapters.email import MemoryOutbox
from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.money import Money
from batchroute.services.accounts.accounts import Registration
from batchroute.services.accounts.authentication import SESSION_COOKIE
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.verification import EmailVerification
from batchroute_tools.local.provision import LocalStack
from functions.api.auth import identity_store
from functions.api.deps import get_passwords
from tests.integration.accounts_harness import PASSWORD, Harness, make_harness


def _scan_all_tables() -> str:
    dynamodb = client("dynamodb")
    dump: list[str] = []
    for table in dynamodb.list_tables()["TableNames"]:
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            dump.extend(str(item) for item in page["Items"])
    return "\n".join(dump)


def test_no_password_key_or_token_in_clear_at_rest_or_in_logs(
    local_aws: LocalStack, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the real (OWASP-cost) hasher, and everything logged captured
    harness = make_harness()
    harness.client.app.dependency_overrides.pop(get_passwords)  # type: ignore[attr-defined]
    caplog.set_level(logging.DEBUG)
    # When accounts are registered, an agent gets a key, users sign in, and reset a password
    harness.register("ann@example.com", password="ann-password-1")
    agent = harness.agent("bot@example.com", password="bot-password-2")
    browser = harness.login("ann@example.com", "ann-password-1")
    harness.client.post("/v1/auth/password/forgot", json={"email": "ann@example.com"})
    reset_token = harness.token_in(harness.link_to("ann@example.com", "reset-password?token="))
    harness.client.post("/v1/auth/password/reset", json={"token": reset_token, "password": "ann-password-3"})
    browser = harness.login("ann@example.com", "ann-password-3")
    secrets = {
        "ann-password-1",
        "bot-password-2",
        "ann-password-3",
        agent["api_key"],
        reset_token,
        browser.cookies[SESSION_COOKIE],
        harness.token_in(harness.link_to("ann@example.com", "verify-email?token=")),
        harness.token_in(harness.link_to("bot@example.com", "verify-email?token=")),
    }
    # Then no table item holds any of them in clear
    stored = _scan_all_tables()
    assert "$argon2id$v=19$m=19456,t=2,p=1$" in stored
    assert [s for s in secrets if s in stored] == []
    # And no log line does either
    logged = caplog.text + "\n".join(str(r.__dict__) for r in caplog.records) + "".join(capsys.readouterr())
    assert "request" in logged  # the access log did run
    assert [s for s in secrets if s in logged] == []


@pytest.mark.usefixtures("serializable_transactions")  # DynamoDB isolates them; moto in-process does not
def test_concurrent_registrations_of_one_address_create_one_account(local_aws: LocalStack) -> None:
    # Given the registration service on the real tables, and eight callers at a barrier
    settings = get_settings()
    identity_store.cache_clear()
    store = identity_store()
    outbox = MemoryOutbox()
    registration = Registration(
        store,
        LedgerStore(settings.table_name("ledger")),
        Argon2Passwords.cheap(),
        EmailVerification(
            store, outbox, secret=app_secret, clock=SystemClock(), public_base_url=settings.public_base_url
        ),
        environment=settings.environment,
        secret=app_secret,
        signup_credit=Money.usd("25"),
        clock=SystemClock(),
    )
    callers = 8
    barrier = threading.Barrier(callers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def attempt(spelling: str) -> None:
        barrier.wait()
        try:
            registration.register(email=spelling, password=PASSWORD)
            outcome = "created"
        except EmailTaken:
            outcome = "taken"
        with lock:
            outcomes.append(outcome)

    spellings = ["ann@example.com", "ANN@example.com", " ann@Example.com "] * 3
    threads = [threading.Thread(target=attempt, args=(spellings[i],)) for i in range(callers)]
    # When they all register at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # Then exactly one account exists and every other caller was told the address is taken
    assert sorted(outcomes) == ["created"] + ["taken"] * (callers - 1)
    owner = store.user_by_email("ann@example.com")
    assert owner is not None
    users = _items_of_kind("user")
    orgs = _items_of_kind("org")
    assert len(users) == 1 and len(orgs) == 1
    assert LedgerStore(settings.table_name("ledger")).wallet(owner.org_id) is not None
    assert len(outbox.messages) == 1


@pytest.mark.usefixtures("serializable_transactions")
def test_concurrent_http_registrations_answer_one_200_and_409s(local_aws: LocalStack) -> None:
    harness: Harness = make_harness()
    barrier = threading.Barrier(4)
    statuses: list[int] = []

    def attempt() -> None:
        barrier.wait()
        response = harness.fresh_client().post(
            "/v1/auth/register", json={"email": "race@example.com", "password": PASSWORD}
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=attempt) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(statuses) == [200, 409, 409, 409]


def _items_of_kind(kind: str) -> list[dict[str, Any]]:
    table = get_settings().table_name("identity")
    pages = (
        client("dynamodb")
        .get_paginator("scan")
        .paginate(
            TableName=table, FilterExpression="kind = :k", ExpressionAttributeValues={":k": {"S": kind}}
        )
    )
    return [item for page in pages for item in page["Items"]]
