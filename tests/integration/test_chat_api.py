"""POST /v1/chat/completions on moto, through the official `openai` SDK and over plain HTTP:
direct answers, streams with usage, failover before the first byte, holds and their
settlement, spending limits, queued jobs, and the errors the spec names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.adapters.dynamo.billing_events import BillingEvents
from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.catalog import builtin_catalog
from batchroute.config import get_settings
from batchroute.domain.batches.record import batch_id_for
from batchroute.money import Money
from batchroute_tools.local.provision import LocalStack
from tests.integration.batch_pipeline_support import run_until_done, vendor_reports_tool_uses
from tests.integration.principals import TestOrg, chat_sdk, instant_chat_client, new_org

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # lanes on edge-eu (cheapest), deepinfra, groq, ...
MINI = "gpt-4o-mini"  # one lane: openai


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


@pytest.fixture
def client(local_aws: LocalStack) -> Iterator[TestClient]:
    with instant_chat_client() as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="5")


def _messages(text: str = "Say hello.") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _post(client: TestClient, org: TestOrg, body: dict[str, Any]) -> httpx.Response:
    return client.post("/v1/chat/completions", json=body, headers=org.key_headers())


# -- direct ----------------------------------------------------------------------------------------
def test_sdk_direct_completion_has_usage_and_names_the_provider(client: TestClient, org: TestOrg) -> None:
    # Given the official SDK pointed at the service
    sdk = chat_sdk(client, org)
    # When it asks for a completion
    raw = sdk.chat.completions.with_raw_response.create(model=LLAMA, messages=_messages(), max_tokens=32)
    completion = raw.parse()
    # Then a chat.completion with usage, served by the cheapest lane, named in header and body
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    assert (
        completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert raw.headers["x-service-provider"] == "edge-eu"
    assert (completion.model_extra or {}).get("provider") == "edge-eu"


def test_the_sdk_lists_and_retrieves_the_chat_models(client: TestClient, org: TestOrg) -> None:
    # Given the official SDK pointed at the service
    sdk = chat_sdk(client, org)
    # When it lists the models (as tools built on it do first)
    listed = sdk.models.list()
    # Then it gets every catalog model a chat completion may name, in OpenAI's Model shape:
    # the maker as owned_by, the release date as created; no embedding model
    catalog = builtin_catalog()
    chat = [m.id for m in catalog.models if any("responses" in x.operations for x in catalog.lanes_for(m.id))]
    assert [model.id for model in listed.data] == chat
    assert "text-embedding-3-small" not in chat and LLAMA in chat
    by_id = {model.id: model for model in listed.data}
    assert (by_id[MINI].owned_by, by_id[MINI].created) == ("openai", 1721260800)  # 2024-07-18
    assert by_id[LLAMA].owned_by == "meta-llama" and all(m.object == "model" for m in listed.data)
    # And it retrieves one by its id, slashes and all
    assert sdk.models.retrieve(LLAMA) == by_id[LLAMA]
    # And a model that is no chat model is a 404 in the spec's envelope
    with pytest.raises(openai.NotFoundError) as missing:
        sdk.models.retrieve("text-embedding-3-small")
    assert missing.value.status_code == 404
    assert missing.value.response.json()["error"]["code"] == "model_not_found"


def test_direct_charges_actual_usage_and_releases_the_rest(client: TestClient, org: TestOrg) -> None:
    # Given 5 USD and a request for gpt-4o-mini with max_tokens 1000
    before = _ledger().state(org.org_id)
    response = _post(client, org, {"model": MINI, "messages": _messages(), "max_tokens": 1000})
    # Then it answered, and the hold settled exactly once at direct prices
    assert response.status_code == 200, response.text
    usage = response.json()["usage"]
    expected = Money.usd_ceil(
        (
            Decimal(usage["prompt_tokens"]) * Decimal("0.15")
            + Decimal(usage["completion_tokens"]) * Decimal("0.60")
        )
        / 1_000_000
    )
    after = _ledger().state(org.org_id)
    assert before.balance - after.balance == expected
    assert after.reserved == Money.zero()
    assert _ledger().violations(org.org_id) == []
    hold = next(r for r in _ledger().reservations(org.org_id) if r.purpose == "chat_hold")
    assert hold.status == "settled" and hold.charged == expected
    # the hold covered prompt + max_tokens at output price
    assert hold.amount.micros >= Money.usd_ceil(Decimal(1000) * Decimal("0.60") / 1_000_000).micros


def test_direct_holds_for_and_charges_the_web_searches_of_a_request_that_asks_for_them(
    client: TestClient, org: TestOrg, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a vendor that runs two web searches for the answer
    vendor_reports_tool_uses(monkeypatch, (("web_search", 2),))
    # When a request for gpt-4o-mini asks for web search (OpenAI: 10.00 USD per 1,000 calls, a
    # request counted as 3 in its hold)
    body = {"model": MINI, "messages": _messages(), "max_tokens": 100, "tools": [{"type": "web_search"}]}
    response = _post(client, org, body)
    assert response.status_code == 200, response.text
    # Then the hold covered the tokens and three searches, and the charge is the tokens at
    # direct prices and the two searches, settled once
    usage = response.json()["usage"]
    tokens = Decimal(usage["prompt_tokens"]) * Decimal("0.15") + Decimal(
        usage["completion_tokens"]
    ) * Decimal("0.60")
    expected = Money.usd_ceil(tokens / 1_000_000 + Decimal("0.02"))
    hold = next(r for r in _ledger().reservations(org.org_id) if r.purpose == "chat_hold")
    assert hold.status == "settled" and hold.charged == expected
    assert hold.amount >= Money.usd_ceil(Decimal(100) * Decimal("0.60") / 1_000_000 + Decimal("0.03"))
    assert _ledger().violations(org.org_id) == []
    # And its receipt shows the calls beside the locked price
    receipt = client.get(
        f"/v1/batches/{response.headers['x-service-batch-id']}/billing-receipt", headers=org.key_headers()
    ).json()
    (ran,) = receipt["provider_lanes"]
    assert ran["usage"]["tool_uses"] == {"web_search": 2}
    assert ran["unit_prices"]["web_search_per_1k_calls"] == "10.00"
    assert ran["cost"] == expected.to_api()


def test_a_direct_receipt_names_the_lanes_not_chosen_and_the_answers_cost(
    client: TestClient, org: TestOrg
) -> None:
    # Given a direct answer from the cheapest of the model's lanes
    response = _post(client, org, {"model": LLAMA, "messages": _messages(), "max_tokens": 8})
    assert response.status_code == 200, response.text
    batch_id = response.headers["x-service-batch-id"]
    # When its receipt is read
    receipt = client.get(f"/v1/batches/{batch_id}/billing-receipt", headers=org.key_headers()).json()
    # Then the lane that answered shows its cost (the charge), and every other lane of the
    # model is named with why it was not chosen (those ranked after it: outranked), in a batch
    # receipt's shape (the console reads both alike)
    (ran,) = receipt["provider_lanes"]
    assert ran["provider"] == "edge-eu" and ran["cost"] == receipt["credit_charged"]
    others = {lane.lane_id: lane.provider for lane in builtin_catalog().lanes_for(LLAMA)}
    del others[ran["lane_id"]]
    rejected = receipt["rejected_lanes"]
    assert {lane["lane_id"]: lane["provider"] for lane in rejected} == others
    assert {lane["model"] for lane in rejected} == {LLAMA}
    outranked = [lane["rejection"] for lane in rejected if lane["rejection"]["code"] == "outranked"]
    assert outranked and all(
        ran["lane_id"] in r["message"] and r["reasons"] == ["outranked"] for r in outranked
    )
    # And every lane carries its data/privacy proof as the plan saw it (as a batch receipt's)
    for lane in [ran, *rejected]:
        proof = lane["proof"]
        provider = builtin_catalog().provider(lane["provider"])
        assert provider is not None and proof["provider"] == lane["provider"]
        assert proof["privacy_tiers"] == list(provider.privacy_tiers)
        assert proof["zero_data_retention"] == (provider.data_retention_days == 0)
        assert proof["catalog_version"] == builtin_catalog().version


def test_a_direct_request_no_lane_answered_keeps_the_plans_refusals_on_its_receipt(
    client: TestClient, org: TestOrg
) -> None:
    # Given a request only edge-eu may serve (the others refused by the caller's preferences),
    # and edge-eu down
    body = {
        "model": LLAMA,
        "messages": _messages("hi [simulate:down:edge-eu]"),
        "provider_preferences": {"only": ["edge-eu"]},
    }
    assert _post(client, org, body).status_code == 503
    # Then its record's receipt still names every lane not chosen, and why
    (record,) = client.get("/v1/batches", headers=org.key_headers()).json()["data"]
    receipt = client.get(f"/v1/batches/{record['id']}/billing-receipt", headers=org.key_headers()).json()
    others = {lane.lane_id for lane in builtin_catalog().lanes_for(LLAMA) if lane.provider != "edge-eu"}
    refused = {lane["lane_id"]: lane["rejection"]["code"] for lane in receipt["rejected_lanes"]}
    assert refused == dict.fromkeys(others, "excluded_by_preferences")


def test_sdk_stream_with_usage_ends_with_done(client: TestClient, org: TestOrg) -> None:
    # Given the SDK asking for a stream with usage
    sdk = chat_sdk(client, org)
    stream = sdk.chat.completions.create(
        model=LLAMA, messages=_messages(), max_tokens=24, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    # Then chunks of deltas, the finish reason, and usage in the last chunk only
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    assert any(c.choices and c.choices[0].finish_reason in ("stop", "length") for c in chunks)


def test_raw_stream_is_server_sent_events_ending_with_done(client: TestClient, org: TestOrg) -> None:
    with client.stream(
        "POST",
        "/v1/chat/completions",
        json={"model": LLAMA, "messages": _messages(), "max_tokens": 8, "stream": True},
        headers=org.key_headers(),
    ) as response:
        body = b"".join(response.iter_bytes())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [e for e in body.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    first = json.loads(events[0].removeprefix("data: "))
    assert first["choices"][0]["delta"]["role"] == "assistant" and "usage" not in first
    assert _ledger().state(org.org_id).reserved == Money.zero()


def test_failover_to_the_next_lane_before_the_first_byte(client: TestClient, org: TestOrg) -> None:
    # Given the cheapest lane's provider answers 503 before its first byte
    response = _post(
        client, org, {"model": LLAMA, "messages": _messages("hi [simulate:5xx:edge-eu]"), "max_tokens": 8}
    )
    # Then the next lane answered
    assert response.status_code == 200, response.text
    assert response.headers["x-service-provider"] != "edge-eu"
    record = _batch(client, org, response.headers["x-service-batch-id"])
    assert record["state"] == "completed" and record["source"] == "chat_direct"


def test_no_failover_when_fallbacks_are_disallowed(client: TestClient, org: TestOrg) -> None:
    body = {
        "model": LLAMA,
        "messages": _messages("hi [simulate:down:edge-eu]"),
        "provider_preferences": {"allow_fallbacks": False},
    }
    response = _post(client, org, body)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "provider_unavailable"
    # nothing charged, nothing held
    state = _ledger().state(org.org_id)
    assert state.reserved == Money.zero() and state.balance == Money.usd("5")


def test_preferences_order_and_only(client: TestClient, org: TestOrg) -> None:
    ordered = _post(
        client, org, {"model": LLAMA, "messages": _messages(), "provider_preferences": {"order": ["groq"]}}
    )
    assert ordered.headers["x-service-provider"] == "groq"
    only = _post(
        client,
        org,
        {"model": LLAMA, "messages": _messages(), "provider_preferences": {"only": ["deepinfra"]}},
    )
    assert only.headers["x-service-provider"] == "deepinfra"


def test_timeout_before_first_byte_fails_over(client: TestClient, org: TestOrg) -> None:
    body = {"model": LLAMA, "messages": _messages("[simulate:timeout:edge-eu]"), "max_tokens": 4}
    response = _post(client, org, body)
    assert response.status_code == 200, response.text
    assert response.headers["x-service-provider"] != "edge-eu"


# -- funding and limits ----------------------------------------------------------------------------
def test_insufficient_funds_is_a_402_and_the_sdk_raises_it(client: TestClient) -> None:
    poor = new_org(credit_usd="0.000001")
    sdk = chat_sdk(client, poor)
    with pytest.raises(openai.APIStatusError) as raised:
        sdk.chat.completions.create(model=MINI, messages=_messages(), max_tokens=4000)
    assert raised.value.status_code == 402
    assert raised.value.body["code"] == "insufficient_funds"  # type: ignore[index]


def test_hard_spending_limit_is_a_403_direct_and_queued(client: TestClient, org: TestOrg) -> None:
    # Given a hard daily limit below what one hold needs
    set_limit = client.put(
        "/v1/billing/controls",
        json={"limit_enabled": True, "limit_period": "daily", "limit_amount": 0.000001, "limit_mode": "hard"},
        headers=org.session_headers(),
    )
    assert set_limit.status_code == 200, set_limit.text
    sdk = chat_sdk(client, org)
    # Then direct and queued requests are refused with spending_limit_reached
    with pytest.raises(openai.PermissionDeniedError) as direct:
        sdk.chat.completions.create(model=MINI, messages=_messages(), max_tokens=100)
    assert direct.value.body["code"] == "spending_limit_reached"  # type: ignore[index]
    queued = _post(client, org, {"model": MINI, "messages": _messages(), "batch": True})
    assert queued.status_code == 403 and queued.json()["error"]["code"] == "spending_limit_reached"
    # And lifting the limit lets the next request through (the cached limit is re-read)
    client.put("/v1/billing/controls", json={"limit_enabled": False}, headers=org.session_headers())
    assert _post(client, org, {"model": MINI, "messages": _messages(), "max_tokens": 8}).status_code == 200


def test_hard_limit_with_room_accepts_and_counts_spend(client: TestClient, org: TestOrg) -> None:
    client.put(
        "/v1/billing/controls",
        json={"limit_enabled": True, "limit_period": "monthly", "limit_amount": 1, "limit_mode": "hard"},
        headers=org.session_headers(),
    )
    for _ in range(2):
        assert (
            _post(client, org, {"model": MINI, "messages": _messages(), "max_tokens": 8}).status_code == 200
        )
    assert _ledger().violations(org.org_id) == []
    assert sum(v for k, v in _ledger().snapshot(org.org_id).spend.items() if k.startswith("M#")) > 0


def test_a_soft_limit_reached_by_direct_chat_is_reported_once_and_never_blocks(
    client: TestClient, org: TestOrg
) -> None:
    # Given a soft monthly limit of one micro-dollar
    saved = client.put(
        "/v1/billing/controls",
        json={
            "limit_enabled": True,
            "limit_period": "monthly",
            "limit_amount": "0.000001",
            "limit_mode": "soft",
        },
        headers=org.session_headers(),
    )
    assert saved.status_code == 200, saved.text
    # When two direct requests are charged past it
    for _ in range(2):
        response = _post(client, org, {"model": MINI, "messages": _messages(), "max_tokens": 8})
        assert response.status_code == 200  # soft mode never blocks
    # Then billing.limit_reached was recorded once for the period
    events = BillingEvents(get_settings().table_name("controls")).events(org.org_id)
    assert [e["type"] for e in events] == ["billing.limit_reached"]
    assert events[0]["details"]["mode"] == "soft" and events[0]["details"]["period"] == "monthly"


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"model": "GPT-4o-mini", "messages": [{"role": "user", "content": "x"}]}, 400, "model_not_found"),
        (
            {"model": MINI, "messages": [{"role": "user", "content": "x"}], "stream": True, "batch": True},
            400,
            "stream_not_supported_for_batch",
        ),
        (
            {"model": MINI, "messages": [{"role": "user", "content": "x"}], "privacy_tier": "restricted"},
            400,
            "no_direct_lane",
        ),
        ({"model": MINI, "messages": []}, 400, "invalid_request"),
    ],
)
def test_request_errors(
    client: TestClient, org: TestOrg, body: dict[str, Any], status: int, code: str
) -> None:
    response = _post(client, org, body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize(
    "content_type",
    ["application/octet-stream", "multipart/form-data", "application/jsonl", "application/x-ndjson"],
)
@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"model": LLAMA, "messages": _messages("x" * 5_000_000)}),  # over the 4 MiB cap
        "[" * 4_000 + "]" * 4_000,  # deeper than 64 levels
        json.dumps({"model": LLAMA, "messages": _messages("hi ")})[:-4] + '\\ud800"}]}',  # a lone surrogate
    ],
    ids=["large", "deep", "surrogate"],
)
def test_a_body_sent_as_an_upload_is_refused_not_parsed_unchecked(
    client: TestClient, org: TestOrg, content_type: str, body: str
) -> None:
    # Given a chat body sent with an upload's content type (the JSON guard leaves only the
    # upload routes' files to them, so this route's body is checked whatever its type)
    headers = {**org.key_headers(), "content-type": content_type}
    response = client.post("/v1/chat/completions", content=body.encode(), headers=headers)
    # Then it is refused as the JSON body it is not, or is too large to be: never routed
    expected = (413, "payload_too_large") if len(body) > 4_194_304 else (400, "invalid_json")
    assert (response.status_code, response.json()["error"]["code"]) == expected, response.text
    assert client.get("/v1/batches", headers=org.key_headers()).json()["data"] == []


def test_sdk_surfaces_a_bad_request_as_its_typed_error(client: TestClient, org: TestOrg) -> None:
    sdk = chat_sdk(client, org)
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.chat.completions.create(model="no-such-model", messages=_messages())
    assert raised.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(
            base_url="http://testserver/v1", api_key="sk-wrong", http_client=client, max_retries=0
        ).chat.completions.create(model=MINI, messages=_messages())


def test_cancelling_a_direct_request_batch_is_409(client: TestClient, org: TestOrg) -> None:
    response = _post(client, org, {"model": LLAMA, "messages": _messages(), "max_tokens": 4})
    batch_id = response.headers["x-service-batch-id"]
    cancel = client.post(f"/v1/batches/{batch_id}/cancel", headers=org.key_headers())
    assert cancel.status_code == 409 and cancel.json()["error"]["code"] == "direct_not_cancellable"
    # nor retried: it is finished, so "not finished" would send a client waiting for ever
    retry = client.post(f"/v1/batches/{batch_id}/retry", headers=org.key_headers())
    assert retry.status_code == 409 and retry.json()["error"]["code"] == "direct_not_retryable"


# -- queued ----------------------------------------------------------------------------------------
def test_queued_request_is_a_one_item_batch_and_its_job_completes(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a queued request
    response = _post(
        client,
        org,
        {"model": LLAMA, "messages": _messages(), "max_tokens": 16, "batch": {"metadata": {"ticket": "7"}}},
    )
    # Then 202 with a chat job whose batch shares its suffix
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["object"] == "chat.completion.job" and job["status"] == "queued"
    assert job["id"].startswith("chatjob_") and job["batch_id"] == batch_id_for(job["id"])
    assert isinstance(job["created"], int) and job["model"] == LLAMA
    # And it is a normal batch in the batch API
    batch = _batch(client, org, job["batch_id"])
    assert batch["source"] == "chat" and batch["counts"]["total"] == 1
    # When the workflow runs it
    record = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert record is not None
    run_until_done(local_aws, str(record.execution_arn))
    done = client.get(f"/v1/chat/completions/{job['id']}", headers=org.key_headers()).json()
    # Then the job carries a chat.completion
    assert done["status"] == "completed", done
    assert done["result"]["object"] == "chat.completion"
    assert done["result"]["choices"][0]["message"]["content"]
    assert done["result"]["usage"]["completion_tokens"] > 0
    assert _ledger().violations(org.org_id) == []


def test_a_queued_request_retried_with_its_idempotency_key_answers_the_first_job(
    client: TestClient, org: TestOrg
) -> None:
    body = {"model": LLAMA, "messages": _messages(), "max_tokens": 16, "batch": True}

    def queued(key: str, sent: dict[str, Any] = body) -> httpx.Response:
        return client.post(
            "/v1/chat/completions", json=sent, headers={**org.key_headers(), "Idempotency-Key": key}
        )

    before = _ledger().state(org.org_id)
    # Given a queued request whose 202 was lost, when it is sent again with the same key
    first, again = queued("chat-retry-0001"), queued("chat-retry-0001")
    # Then the retry answers the same job, and only one batch is reserved for
    assert first.status_code == again.status_code == 202, again.text
    assert again.json()["id"] == first.json()["id"]
    record = BatchRecords(get_settings().table_name("batches")).get(first.json()["batch_id"])
    assert record is not None and record.reserved_micros > 0
    assert _ledger().state(org.org_id).reserved - before.reserved == Money(record.reserved_micros)
    # And another key is another job; the same key with another body is refused
    assert queued("chat-retry-0002").json()["id"] != first.json()["id"]
    other = queued("chat-retry-0001", {**body, "max_tokens": 17})
    assert other.status_code == 409, other.text
    # And a key batch create would refuse is refused here too
    assert queued("short").json()["error"]["code"] == "invalid_idempotency_key"


def test_a_retry_of_a_queued_request_that_has_run_answers_the_job_as_it_is_now(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a queued request with a key, run to the end
    body = {"model": LLAMA, "messages": _messages(), "max_tokens": 16, "batch": True}
    headers = {**org.key_headers(), "Idempotency-Key": "chat-ran-0001"}
    job = client.post("/v1/chat/completions", json=body, headers=headers).json()
    record = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert record is not None
    run_until_done(local_aws, str(record.execution_arn))
    # When the request is retried with its key (its 202 was lost)
    again = client.post("/v1/chat/completions", json=body, headers=headers)
    # Then the answer is the job as GET shows it: completed, with its result (was `failed`,
    # `job_failed`: a client would pay again under a new key)
    assert again.status_code == 202, again.text
    shown = client.get(f"/v1/chat/completions/{job['id']}", headers=org.key_headers()).json()
    assert shown["status"] == "completed" and again.json() == shown


def test_a_queued_job_whose_first_lane_failed_over_reads_the_lane_that_answered(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    # Given a queued request whose first lane goes down (it answers nothing: no result file)
    body = {"model": LLAMA, "messages": _messages("[simulate:down:edge-eu] hi"), "batch": True}
    job = _post(client, org, body).json()
    record = BatchRecords(get_settings().table_name("batches")).get(job["batch_id"])
    assert record is not None
    run_until_done(local_aws, str(record.execution_arn))
    # When the job is read / Then it carries the next lane's answer
    done = client.get(f"/v1/chat/completions/{job['id']}", headers=org.key_headers())
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"
    assert done.json()["result"]["choices"][0]["message"]["content"]


def test_chat_job_of_another_org_is_forbidden_and_unknown_is_404(client: TestClient, org: TestOrg) -> None:
    job = _post(client, org, {"model": LLAMA, "messages": _messages(), "batch": True}).json()
    other = new_org(credit_usd="1")
    assert client.get(f"/v1/chat/completions/{job['id']}", headers=other.key_headers()).status_code == 403
    assert client.get("/v1/chat/completions/chatjob_nope", headers=org.key_headers()).status_code == 404


def _batch(client: TestClient, org: TestOrg, batch_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/batches/{batch_id}", headers=org.key_headers())
    assert response.status_code == 200, response.text
    return dict(response.json()["batch"])
