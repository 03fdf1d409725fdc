"""The batch API: create (idempotent, funded in one transaction), reads, cancel, limits."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.batches.record import IdempotencyRecord
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import TestOrg, new_org
from tests.integration.test_quotes import _item


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


def _create(client: TestClient, org: TestOrg, body: dict[str, Any], key: str = "key-00000001") -> Any:
    return client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


def test_create_answers_202_priced_and_reserves_the_total(client: TestClient, org: TestOrg) -> None:
    # Given a quote for two items
    quote = client.post(
        "/v1/quotes/model", json={"items": [_item(0), _item(1)]}, headers=org.key_headers()
    ).json()
    # When a batch is created from it
    response = _create(client, org, {"quote_id": quote["quote_id"], "items": [_item(0), _item(1)]})
    # Then 202 with the batch already priced, and the quoted total reserved
    assert response.status_code == 202, response.text
    batch = response.json()["batch"]
    assert batch["id"].startswith("batch_") and batch["state"] == "priced"
    assert batch["counts"] == {
        "total": 2,
        "pending": 2,
        "running": 0,
        "completed": 0,
        "failed": 0,
        "canceled": 0,
    }
    state = _ledger().state(org.org_id)
    assert state.reserved == Money.usd(quote["pricing_estimate"]["total"]["amount"])
    assert state.available == Money.usd("10") - state.reserved


def test_a_key_whose_24_hours_passed_may_be_used_again(local_aws: LocalStack) -> None:
    # Given a batch created under a key, on a movable clock
    identity_store.cache_clear()
    clock = FixedClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: clock
    client = TestClient(app, raise_server_exceptions=False)
    heartbeat_all_lanes(clock)
    org = new_org(credit_usd="10")
    first = _create(client, org, {"items": [_item(0)]}, key="reused-key-1")
    assert first.status_code == 202, first.text
    # When the key comes again with another body a day and a second later (its record still
    # there: DynamoDB deletes expired items up to two days late)
    clock.advance(hours=24, seconds=1)
    heartbeat_all_lanes(clock)
    later = _create(client, org, {"items": [_item(1)]}, key="reused-key-1")
    # Then it is a new request: a new batch, not 409 idempotency_conflict
    assert later.status_code == 202, later.text
    assert later.json()["batch"]["id"] != first.json()["batch"]["id"]
    assert later.headers.get("idempotent-replayed") is None
    # And from then on the key replays that new batch
    again = _create(client, org, {"items": [_item(1)]}, key="reused-key-1")
    assert again.status_code == 202 and again.content == later.content


def test_create_from_the_quote_alone_and_without_a_quote(client: TestClient, org: TestOrg) -> None:
    quote = client.post("/v1/quotes/model", json={"items": [_item(0)]}, headers=org.key_headers()).json()
    alone = _create(client, org, {"quote_id": quote["quote_id"]}, key="key-quote-alone")
    assert alone.status_code == 202, alone.text
    internal = _create(client, org, {"items": [_item(1)], "routing_mode": "cheapest"}, key="key-internal-1")
    assert internal.status_code == 202, internal.text
    assert internal.json()["batch"]["quote_id"] is None


def test_replay_is_byte_for_byte_and_a_different_body_conflicts(client: TestClient, org: TestOrg) -> None:
    body = {"items": [_item(0)]}
    first = _create(client, org, body, key="same-key-123")
    again = _create(client, org, body, key="same-key-123")
    assert again.status_code == 202 and again.content == first.content
    assert again.headers.get("idempotent-replayed") == "true"
    other = _create(client, org, {"items": [_item(1)]}, key="same-key-123")
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_conflict"
    assert len(_ledger().reservations(org.org_id)) == 1


def _key_unseen_before_commit(monkeypatch: pytest.MonkeyPatch, *, reads: int) -> None:
    """The race of two requests with one key, made deterministic: this request's first `reads`
    reads of its idempotency record find nothing (the other request had not committed yet;
    the route reads it, then create), so it reaches the create transaction, which finds the
    record there."""
    real = BatchRecords.idempotency_record
    left = [reads]

    def unseen(self: BatchRecords, org_id: str, key: str) -> IdempotencyRecord | None:
        if left[0] > 0:
            left[0] -= 1
            return None
        return real(self, org_id, key)

    monkeypatch.setattr(BatchRecords, "idempotency_record", unseen)


def test_a_key_committed_by_a_concurrent_request_replays_its_answer(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"items": [_item(0)]}
    first = _create(client, org, body, key="raced-key-01")
    _key_unseen_before_commit(monkeypatch, reads=2)
    second = _create(client, org, body, key="raced-key-01")
    assert second.status_code == 202 and second.content == first.content
    assert second.headers.get("idempotent-replayed") == "true"
    assert len(_ledger().reservations(org.org_id)) == 1
    assert client.get("/v1/batches", headers=org.key_headers()).json()["workspace_total_count"] == 1


def test_a_key_still_being_processed_is_409_in_progress(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"items": [_item(0)]}
    _create(client, org, body, key="raced-key-02")
    _key_unseen_before_commit(monkeypatch, reads=3)  # nor at the read after the refused commit
    second = _create(client, org, body, key="raced-key-02")
    assert second.status_code == 409 and second.json()["error"]["code"] == "idempotency_in_progress"
    assert len(_ledger().reservations(org.org_id)) == 1


@pytest.mark.usefixtures("serializable_transactions")
def test_concurrent_duplicates_create_one_batch(client: TestClient, org: TestOrg) -> None:
    body = {"items": [_item(0)]}
    answers: list[Any] = []

    def submit() -> None:
        answers.append(_create(client, org, body, key="concurrent-key-1"))

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = {a.json()["batch"]["id"] for a in answers if a.status_code == 202}
    assert len(ids) == 1, [a.text for a in answers]
    assert all(a.status_code == 202 for a in answers), [a.text for a in answers]
    listed = client.get("/v1/batches", headers=org.key_headers()).json()
    assert listed["workspace_total_count"] == 1


def test_idempotency_key_is_required_and_bounded(client: TestClient, org: TestOrg) -> None:
    missing = client.post("/v1/batches", json={"items": [_item(0)]}, headers=org.key_headers())
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "idempotency_key_required"
    short = _create(client, org, {"items": [_item(0)]}, key="short")
    assert short.status_code == 400 and short.json()["error"]["code"] == "invalid_idempotency_key"


def test_insufficient_credits_is_402_and_reserves_nothing(client: TestClient, local_aws: LocalStack) -> None:
    broke = new_org(credit_usd="0")
    response = _create(client, broke, {"items": [_item(0)]})
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "insufficient_credits"
    assert _ledger().state(broke.org_id).reserved == Money.zero()


def test_hard_spending_limit_is_402_with_details(client: TestClient, org: TestOrg) -> None:
    # Given a hard daily limit far below one batch's estimate
    controls = {
        "limit_enabled": True,
        "limit_period": "daily",
        "limit_amount": 0.000001,
        "limit_mode": "hard",
    }
    saved = client.put("/v1/billing/controls", json=controls, headers=org.session_headers())
    assert saved.status_code == 200, saved.text
    # When a batch is submitted / Then 402 with the limit's figures as decimal strings
    response = _create(client, org, {"items": [_item(0)]})
    assert response.status_code == 402
    error = response.json()["error"]
    assert error["code"] == "insufficient_credits"
    assert {"limit", "period", "spent", "projected"} <= set(error["details"])
    assert all(isinstance(error["details"][k], str) for k in ("limit", "spent", "projected"))


def test_soft_limit_never_blocks(client: TestClient, org: TestOrg) -> None:
    controls = {
        "limit_enabled": True,
        "limit_period": "monthly",
        "limit_amount": 0.000001,
        "limit_mode": "soft",
    }
    assert client.put("/v1/billing/controls", json=controls, headers=org.session_headers()).status_code == 200
    assert _create(client, org, {"items": [_item(0)]}).status_code == 202


def test_preflight_and_webhook_errors(client: TestClient, org: TestOrg) -> None:
    bad = _create(client, org, {"items": [_item(0, model="nope")]}, key="key-bad-model")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "batch_preflight_failed"
    hook = _create(
        client,
        org,
        {"items": [_item(0)], "webhook": {"url": "http://x.example/h", "secret": "s"}},
        key="key-hook-1",
    )
    assert hook.status_code == 400
    codes = {issue["code"] for issue in hook.json()["error"]["details"]["preflight"]["errors"]}
    assert {"https_required", "invalid_webhook_secret"} <= codes
    both = _create(client, org, {"items": [_item(0)], "input_file_id": "file_x"}, key="key-both-1")
    assert both.status_code == 400


def test_quote_mismatch_and_expiry(client: TestClient, org: TestOrg) -> None:
    quote = client.post("/v1/quotes/model", json={"items": [_item(0)]}, headers=org.key_headers()).json()
    mismatch = _create(client, org, {"quote_id": quote["quote_id"], "items": [_item(5)]}, key="key-mismatch")
    assert mismatch.status_code == 409 and mismatch.json()["error"]["code"] == "quote_mismatch"
    foreign = new_org(credit_usd="5")
    stolen = _create(client, foreign, {"quote_id": quote["quote_id"]}, key="key-foreign1")
    assert stolen.status_code == 403


def test_a_create_that_asks_other_routing_than_its_quote_is_refused(client: TestClient, org: TestOrg) -> None:
    # Given a quote made without routing constraints, and one made in region "us"
    items = [_item(0), _item(1)]
    plain = client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers()).json()
    in_us = client.post(
        "/v1/quotes/model", json={"items": items, "regions": ["us"]}, headers=org.key_headers()
    ).json()
    balance = _ledger().balance(org.org_id)
    # When a create names the quote but asks a stricter privacy tier, another region or mode,
    # tools or a price cap the quote was not made with: 409, nothing reserved (the batch
    # would run on the quote's plan, sending the items where the body forbade)
    for key, changes, field in (
        ("key-tier-0001", {"privacy_tier": "confidential"}, "privacy_tier"),
        ("key-region-01", {"regions": ["eu"]}, "regions"),
        ("key-mode-0001", {"routing_mode": "public_only"}, "routing_mode"),
        ("key-tools-001", {"required_tools": ["web_search"]}, "required_tools"),
        ("key-price-001", {"max_price": {"input_per_mtok": "0.01"}}, "max_price"),
    ):
        refused = _create(client, org, {"quote_id": plain["quote_id"], "items": items, **changes}, key=key)
        assert refused.status_code == 409, (changes, refused.text)
        error = refused.json()["error"]
        assert error["code"] == "quote_mismatch" and error["details"]["field"] == field, error
    moved = _create(client, org, {"quote_id": in_us["quote_id"], "region": "eu"}, key="key-region-02")
    assert moved.status_code == 409 and moved.json()["error"]["details"]["field"] == "regions"
    assert _ledger().balance(org.org_id) == balance
    # And the fields the quote was made with (or their defaults) may be repeated
    # (sla_tier too: every tier is served as standard)
    same = {"privacy_tier": "standard", "routing_mode": "cheapest", "required_tools": [], "sla_tier": "flex"}
    accepted = _create(
        client, org, {"quote_id": plain["quote_id"], "items": items, **same}, key="key-same-0002"
    )
    assert accepted.status_code == 202, accepted.text
    repeated = _create(client, org, {"quote_id": in_us["quote_id"], "regions": ["us"]}, key="key-same-0003")
    assert repeated.status_code == 202, repeated.text
    # And a price cap is the same cap however its number is written (5, "5.00", 5.0)
    capped = client.post(
        "/v1/quotes/model",
        json={"items": items, "max_price": {"output_per_mtok": 5}},
        headers=org.key_headers(),
    ).json()
    for n, written in enumerate((5, "5", "5.00", 5.0)):
        body = {"quote_id": capped["quote_id"], "items": items, "max_price": {"output_per_mtok": written}}
        same_cap = _create(client, org, body, key=f"key-cap-{n:05d}")
        assert same_cap.status_code == 202, (written, same_cap.text)


def test_reads_list_get_and_other_orgs(client: TestClient, org: TestOrg) -> None:
    created = [
        _create(client, org, {"items": [_item(n)]}, key=f"key-list-{n:04d}").json()["batch"] for n in range(3)
    ]
    page = client.get("/v1/batches?limit=2", headers=org.key_headers()).json()
    assert [b["id"] for b in page["data"]] == [created[2]["id"], created[1]["id"]]
    assert page["workspace_total_count"] == 3 and page["next_cursor"]
    rest = client.get(f"/v1/batches?limit=2&cursor={page['next_cursor']}", headers=org.key_headers()).json()
    assert [b["id"] for b in rest["data"]] == [created[0]["id"]] and rest["next_cursor"] is None
    active = client.get("/v1/batches?status=active", headers=org.key_headers()).json()
    assert len(active["data"]) == 3
    assert client.get("/v1/batches?state=completed", headers=org.key_headers()).json()["data"] == []
    bogus = client.get("/v1/batches?state=bogus", headers=org.key_headers())
    assert bogus.status_code == 400
    assert bogus.json()["error"]["code"] == "invalid_request"
    assert bogus.json()["error"]["details"] == {"field": "state"}
    assert client.get("/v1/batches?limit=101", headers=org.key_headers()).status_code == 400
    one = client.get(
        f"/v1/batches/{created[0]['id']}?include_details=true&include_billing_receipt=true",
        headers=org.key_headers(),
    ).json()
    assert one["batch"]["id"] == created[0]["id"] and one["billing_receipt"] is None
    assert "details" in one["batch"] and "lane_statuses" in one["batch"]
    unsettled = client.get(f"/v1/batches/{created[0]['id']}/billing-receipt", headers=org.key_headers())
    assert unsettled.status_code == 409
    assert unsettled.json()["error"]["code"] == "receipt_not_ready"
    assert set(unsettled.json()["error"]["details"]) == {"state"}
    assert client.get("/v1/batches/batch_nope", headers=org.key_headers()).status_code == 404
    other = new_org()
    assert client.get(f"/v1/batches/{created[0]['id']}", headers=other.key_headers()).status_code == 403
    items = client.get(f"/v1/batches/{created[0]['id']}/items", headers=org.key_headers()).json()
    assert (
        items["data"][0]["status"] in {"pending", "processing"} and items["data"][0]["sequence_number"] == 0
    )
    not_ready = client.get(f"/v1/batches/{created[0]['id']}/results", headers=org.key_headers())
    assert not_ready.status_code == 409


def test_cancel_then_cancel_again_is_409(client: TestClient, org: TestOrg) -> None:
    batch = _create(client, org, {"items": [_item(0)]}).json()["batch"]
    long_reason = client.post(
        f"/v1/batches/{batch['id']}/cancel", json={"reason": "x" * 501}, headers=org.key_headers()
    )
    assert long_reason.status_code == 400
    first = client.post(
        f"/v1/batches/{batch['id']}/cancel", json={"reason": "changed my mind"}, headers=org.key_headers()
    )
    assert first.status_code == 200 and first.json()["batch"]["state"] == "canceled"
    second = client.post(f"/v1/batches/{batch['id']}/cancel", headers=org.key_headers())
    assert second.status_code == 409
    retry = client.post(f"/v1/batches/{batch['id']}/retry", headers=org.key_headers())
    assert retry.status_code == 409


def test_member_may_create_billing_may_not(client: TestClient, org: TestOrg) -> None:
    headers = {**org.key_headers("billing"), "Idempotency-Key": "key-billing-1"}
    assert client.post("/v1/batches", json={"items": [_item(0)]}, headers=headers).status_code == 403
    assert json.loads(_create(client, org, {"items": [_item(0)]}, key="key-member-1").content)["batch"]


# -- a quote warns when its create would pass the hard limit (docs/billing-controls.md) ----
def _limit(client: TestClient, org: TestOrg, amount: str, mode: str) -> None:
    controls = {"limit_enabled": True, "limit_period": "daily", "limit_amount": amount, "limit_mode": mode}
    saved = client.put("/v1/billing/controls", json=controls, headers=org.session_headers())
    assert saved.status_code == 200, saved.text


def _quote(client: TestClient, org: TestOrg) -> dict[str, Any]:
    body = {"items": [_item(0), _item(1)]}
    response = client.post("/v1/quotes/model", json=body, headers=org.key_headers())
    assert response.status_code == 200, response.text
    quote: dict[str, Any] = response.json()
    return quote


def _limit_warnings(quote: dict[str, Any]) -> list[dict[str, Any]]:
    return [w for w in quote["preflight"]["warnings"] if w["code"] == "spending_limit_exceeded"]


def test_a_quote_past_the_hard_limit_warns_and_the_create_is_then_refused(
    client: TestClient, org: TestOrg
) -> None:
    # Given a hard daily limit far below the batch's estimate
    _limit(client, org, "0.000001", "hard")
    # When the batch is quoted
    quote = _quote(client, org)
    # Then the quote is given, ok, with one warning in the preflight issue shape and the 402's figures
    assert quote["preflight"]["ok"] is True and quote["preflight"]["errors"] == []
    (warning,) = _limit_warnings(quote)
    assert warning["category"] == "spending_limit"
    assert "hard spending limit" in warning["message"] and warning["action"]
    assert warning["details"]["period"] == "daily"
    assert warning["details"]["limit"] == "0.000001"
    # And creating it is refused with the same figures
    created = client.post(
        "/v1/batches",
        json={"quote_id": quote["quote_id"]},
        headers={**org.key_headers(), "Idempotency-Key": "key-limit-warned"},
    )
    assert created.status_code == 402
    error = created.json()["error"]
    assert error["code"] == "insufficient_credits"
    assert {k: error["details"][k] for k in ("limit", "period", "spent", "projected")} == warning["details"]


def test_no_warning_under_a_soft_limit_or_a_hard_limit_with_room(client: TestClient, org: TestOrg) -> None:
    # A soft limit never refuses, so it never warns
    _limit(client, org, "0.000001", "soft")
    assert _limit_warnings(_quote(client, org)) == []
    # A hard limit the batch fits under does not warn either, and the create goes through
    _limit(client, org, "5", "hard")
    quote = _quote(client, org)
    assert _limit_warnings(quote) == []
    created = client.post(
        "/v1/batches",
        json={"quote_id": quote["quote_id"]},
        headers={**org.key_headers(), "Idempotency-Key": "key-limit-room"},
    )
    assert created.status_code == 202, created.text


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b"hello"),
        ("application/json", b"{not json"),
        ("application/octet-stream", b"hello"),
        ("application/jsonl", b'{"items": []}'),
        ("multipart/form-data", b'{"items": []}'),
    ],
)
def test_a_body_that_is_not_json_is_a_400_whatever_its_content_type(
    client: TestClient, org: TestOrg, content_type: str, body: bytes
) -> None:
    headers = {**org.key_headers(), "Idempotency-Key": "key-00000009", "content-type": content_type}
    response = client.post("/v1/batches", content=body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert client.get("/v1/batches", headers=org.key_headers()).json()["data"] == []
