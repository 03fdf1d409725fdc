"""The client's account, settings, delivery-target, billing and catalog calls against
`httpx.MockTransport`: for each, the method, path, query and JSON body sent (no
`Idempotency-Key`: none of these routes honours one), the typed model read from the service's
document (extra fields kept in `raw`, never refused), listings followed to their last page, the
retries each write allows, and one error per resource mapped to its class and code."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from batchroute_client import (
    Account,
    APIConnectionError,
    AuditEntry,
    AutoTopup,
    BadRequestError,
    BillingControls,
    Card,
    CatalogModel,
    ConflictError,
    DeliveryTarget,
    DeliveryTargetDeleted,
    DeliveryWebhook,
    FeeSchedule,
    InternalServerError,
    Member,
    Money,
    NotFoundError,
    Provider,
    RetentionSettings,
    TargetTest,
    TopupAttempt,
    UnexpectedResponse,
    WorkflowProduct,
)
from batchroute_client._core import Send

from tests.unit.test_client_sdk import Recorder, error, make

AT = "2026-04-01T09:30:00.000Z"
LATER = {"added_later": {"by": "a newer service"}}  # a field the client does not know yet
SECRET = "whsec-do-not-show-0123456789abcdef"


def sent(request: httpx.Request) -> tuple[str, str, dict[str, str], Any]:
    """What the client sent: method, path (as on the wire), query and JSON body (None: none)."""
    body = json.loads(request.content) if request.content else None
    return request.method, request.url.raw_path.decode().split("?")[0], dict(request.url.params), body


def ok(body: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=body)


def client_for(*answers: httpx.Response | Exception, max_retries: int = 4) -> tuple[Any, Recorder]:
    recorder = Recorder(*answers)
    return make(recorder, [], max_retries=max_retries), recorder


def money(amount: str) -> dict[str, str]:
    return {"currency": "usd", "amount": amount}


def member(user_id: str = "user_1") -> dict[str, Any]:
    return {
        "user_id": user_id,
        "email": "ada@example.com",
        "role": "owner",
        "full_name": "Ada",
        "display_name": None,
        "email_verified": True,
        "created_at": AT,
    }


def account(display_name: str = "Acme") -> dict[str, Any]:
    return {
        "org": {"id": "org_1", "display_name": display_name, "plan": "prepaid", "created_at": AT},
        "plan": "prepaid",
        "credit_balance": money("25.00"),
        "members": [member()],
        "user": None,
        "delivery_webhook": {"url": "https://hooks.example.com/br", "configured": True, "updated_at": AT},
        **LATER,
    }


def retention(tier: str = "grace_only", days: int | None = None) -> dict[str, Any]:
    return {
        "org_id": "org_1",
        "retention_tier": tier,
        "extended_days": days,
        "never_charge": False,
        "grace_hours": 72,
        "updated_at": None,
        **LATER,
    }


def target(target_id: str = "dt_1", *, enabled: bool = True, tested: bool = False) -> dict[str, Any]:
    last_test = {
        "ok": False,
        "at": AT,
        "key": "exports/batchroute-test-20260401T093000000000Z.json",
        "error": {"code": "NoSuchBucket", "message": "The specified bucket does not exist"},
    }
    return {
        "id": target_id,
        "object": "delivery_target",
        "name": "exports",
        "endpoint_url": None,
        "region": "eu-central-1",
        "bucket": "acme-batch-results",
        "prefix": "exports",
        "enabled": enabled,
        "access_key_id_last4": "7QXA",
        "secret_access_key_set": True,
        "created_at": AT,
        "updated_at": AT,
        "last_test": last_test if tested else None,
        **LATER,
    }


def audit_entry(entry_id: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "org_id": "org_1",
        "actor_user_id": "user_1",
        "actor_role": "billing",
        "action": "billing_controls.update",
        "before": {"limit_amount": money("250.00")},
        "after": {"limit_amount": money("300.00")},
        "ip_address": "198.51.100.7",
        "created_at": AT,
        **LATER,
    }


def auto_topup(*, enabled: bool = True) -> dict[str, Any]:
    return {
        "auto_topup": {
            "org_id": "org_1",
            "configured": True,
            "enabled": enabled,
            "trigger_balance": money("10.50"),
            "amount": money("25.00"),
            "monthly_cap": money("500.00"),
            "payment_method": {"brand": "visa", "last4": "4242"},
            "status": {
                "in_flight_attempt_id": None,
                "consecutive_failures": 0,
                "retry_after": None,
                "disabled_reason": None,
                "month": "2026-04",
                "month_committed": money("25.00"),
            },
            "created_at": AT,
            "updated_at": AT,
            **LATER,
        }
    }


def attempt(attempt_id: str, status: str = "succeeded") -> dict[str, Any]:
    return {
        "id": attempt_id,
        "amount": money("25.00"),
        "status": status,
        "processor_reference": "pi_1",
        "failure_code": None,
        "failure_reason": None,
        "created_at": AT,
        "updated_at": AT,
        **LATER,
    }


def lane() -> dict[str, Any]:
    return {
        "lane_id": "groq/meta-llama/Llama-3.3-70B-Instruct",
        "provider": "groq",
        "provider_name": "Groq",
        "provider_kind": "public_host",
        "execution_mode": "sync",
        "provider_model_id": "llama-3.3-70b-versatile",
        "pricing": {
            "currency": "usd",
            "unit": "per_million_tokens",
            "input": "0.59",
            "output": "0.79",
            "batch_input": "0.59",
            "batch_output": "0.79",
        },
        "context_window": 131072,
        "max_output_tokens": 32768,
        "operations": ["responses"],
        "runtime_capabilities": ["tool_calling"],
        "hosted_tools": [],
        "regions": ["us"],
        "privacy_tiers": ["standard", "confidential"],
        "data_retention_days": 0,
        "capacity": {
            "daily_capacity_items": 300000,
            "remaining_capacity_items": 299000,
            "last_heartbeat_at": AT,
        },
        "status": "available",
        "eligible": True,
        **LATER,
    }


def catalog_model(model_id: str = "meta-llama/Llama-3.3-70B-Instruct") -> dict[str, Any]:
    return {
        "id": model_id,
        "object": "model",
        "title": "Llama 3.3 70B Instruct",
        "summary": "Open-weight general model",
        "description": "...",
        "tags": ["open-weight"],
        "family": "llama",
        "open_weight": True,
        "operations": ["responses"],
        "runtime_capabilities": ["tool_calling"],
        "hosted_tools": [],
        "privacy_tiers": ["standard", "confidential"],
        "regions": ["us", "eu"],
        "context_window": 131072,
        "max_output_tokens": 32768,
        "retention": {
            "min_data_retention_days": 0,
            "max_data_retention_days": 30,
            "zero_data_retention_providers": ["groq"],
        },
        "capacity": {"daily_capacity_items": 300000, "remaining_capacity_items": 299000},
        "routing_eligibility": {"eligible": True, "lanes_available": 1, "reasons": []},
        "providers": [lane()],
        **LATER,
    }


def product(slug: str = "ticket-classification") -> dict[str, Any]:
    return {
        "slug": slug,
        "object": "workflow_product",
        "title": "Ticket classification",
        "summary": "Label support tickets",
        "operation": "responses",
        "sla_hours": 24,
        "completion_window": "24h",
        "input_schema": {"type": "object"},
        "output_schema": {"type": "object"},
        "route_policy": {"routing_mode": "cheapest"},
        "typical_input_tokens": 600,
        "typical_output_tokens": 20,
        "fee_pct": "11.80",
        "models": ["gpt-4o-mini"],
        "lanes_able": 3,
        "lanes_available": 3,
        **LATER,
    }


def provider(slug: str = "groq") -> dict[str, Any]:
    return {
        "slug": slug,
        "display_name": slug.title(),
        "kind": "public_host",
        "execution_mode": "sync",
        "enabled": True,
        "status": "available",
        "launched": True,
        "supported_operations": ["responses"],
        "models": ["meta-llama/Llama-3.3-70B-Instruct"],
        "regions": ["us"],
        "privacy_tiers": ["standard", "confidential"],
        "data_retention_days": 0,
        "website": None,
        **LATER,
    }


# -- settings ------------------------------------------------------------------------------


def test_update_profile_sends_only_the_names_given_and_reads_the_account() -> None:
    client, recorder = client_for(ok(account("Acme 2")), ok(account("Acme 2")))
    updated = client.settings.update_profile(display_name="Acme 2")
    assert sent(recorder.requests[0]) == ("PUT", "/v1/auth/account/profile", {}, {"display_name": "Acme 2"})
    assert isinstance(updated, Account) and updated.org.display_name == "Acme 2"
    assert updated.credit_balance == Money("usd", "25.00") and updated.user is None
    assert updated.members == [
        Member("user_1", "ada@example.com", "owner", "Ada", None, email_verified=True, created_at=AT)
    ]
    assert updated.delivery_webhook == DeliveryWebhook("https://hooks.example.com/br", True, AT)
    assert updated.raw["added_later"] == LATER["added_later"]
    # A blank full name is sent (it clears the name); what is not given is not sent
    client.settings.update_profile(full_name="")
    assert sent(recorder.requests[1])[3] == {"full_name": ""}
    assert all("idempotency-key" not in r.headers for r in recorder.requests)
    # client.account() still answers the document as a dict
    client, recorder = client_for(ok(account()))
    assert client.account() == account()


def test_set_delivery_webhook_sends_the_secret_once_and_never_shows_it() -> None:
    answer = {"url": "https://hooks.example.com/br", "configured": True, "updated_at": AT}
    client, recorder = client_for(ok(answer))
    webhook = client.settings.set_delivery_webhook("https://hooks.example.com/br", SECRET)
    assert sent(recorder.requests[0]) == (
        "PUT",
        "/v1/auth/account/delivery-webhook",
        {},
        {"url": "https://hooks.example.com/br", "secret": SECRET},
    )
    assert webhook == DeliveryWebhook(url="https://hooks.example.com/br", configured=True, updated_at=AT)
    assert SECRET not in repr(webhook) and SECRET not in repr(client)
    # The request the plan describes carries it, but its repr does not (nor the API key's)
    plan = client.ops.settings_set_delivery_webhook("https://hooks.example.com/br", SECRET)
    effect = next(plan)
    assert isinstance(effect, Send) and effect.call.json["secret"] == SECRET
    assert SECRET not in repr(effect) and "sk-test-secret" not in repr(effect)
    plan.close()
    # Nor does an error, from the service or from the network
    client, recorder = client_for(error(400, "unsafe_url", field="url"))
    with pytest.raises(BadRequestError) as refused:
        client.settings.set_delivery_webhook("https://10.0.0.1/hook", SECRET)
    assert (refused.value.status, refused.value.code, refused.value.details) == (
        400,
        "unsafe_url",
        {"field": "url"},
    )
    assert SECRET not in str(refused.value) and len(recorder.requests) == 1
    client, _ = client_for(httpx.ConnectError("refused"), max_retries=0)
    with pytest.raises(APIConnectionError) as lost:
        client.settings.set_delivery_webhook("https://hooks.example.com/br", SECRET)
    assert SECRET not in str(lost.value)


def test_retention_is_read_and_updated_partially_and_a_put_is_retried() -> None:
    client, recorder = client_for(
        ok(retention()), error(503, "unavailable"), ok(retention("extended_fixed", 30)), ok(retention())
    )
    current = client.settings.retention()
    assert sent(recorder.requests[0]) == ("GET", "/v1/retention-settings", {}, None)
    assert current == RetentionSettings("org_1", "grace_only", None, False, 72, None)
    assert current.raw["added_later"] == LATER["added_later"]
    changed = client.settings.update_retention(retention_tier="extended_fixed", extended_days=30)
    body = {"retention_tier": "extended_fixed", "extended_days": 30}
    # the 503 was retried with the same body: a PUT of the same fields is the same settings
    assert [sent(r) for r in recorder.requests[1:3]] == [("PUT", "/v1/retention-settings", {}, body)] * 2
    assert (changed.retention_tier, changed.extended_days) == ("extended_fixed", 30)
    client.settings.update_retention(never_charge=False)  # False is a value: sent
    assert sent(recorder.requests[3])[3] == {"never_charge": False}
    assert all("idempotency-key" not in r.headers for r in recorder.requests)


# -- delivery targets ----------------------------------------------------------------------


def test_delivery_targets_list_create_get_update_test_and_delete() -> None:
    tested = {
        "target_id": "dt_1",
        "bucket": "acme-batch-results",
        "ok": False,
        "at": AT,
        "key": "exports/batchroute-test-20260401T093000000000Z.json",
        "error": {"code": "AccessDenied", "message": "Access Denied"},
        **LATER,
    }
    client, recorder = client_for(
        ok({"object": "list", "data": [target(tested=True), target("dt_2")], "limit": 5}),
        ok(target(), 201),
        ok(target()),
        ok(target(enabled=False)),
        ok(target()),
        ok(tested),
        ok({"id": "dt_1", "object": "delivery_target", "deleted": True}),
    )
    listed = client.delivery_targets.list()
    assert [t.id for t in listed] == ["dt_1", "dt_2"] and len(listed) == 2 and listed.limit == 5
    first = listed.data[0]
    assert (
        isinstance(first, DeliveryTarget)
        and first.secret_access_key_set
        and first.access_key_id_last4 == "7QXA"
    )
    assert first.last_test is not None and first.last_test.error is not None
    assert (first.last_test.ok, first.last_test.error.code) == (False, "NoSuchBucket")
    assert first.raw["added_later"] == LATER["added_later"]

    created = client.delivery_targets.create(
        bucket="acme-batch-results",
        access_key_id="AKIAEXAMPLE7QXA",
        secret_access_key=SECRET,
        region="eu-central-1",
        prefix="exports",
    )
    assert created.id == "dt_1" and SECRET not in repr(created)
    got = client.delivery_targets.get("dt_1")
    updated = client.delivery_targets.update("dt_1", enabled=False)
    client.delivery_targets.update("dt_1", name=None)  # null: the bucket's name again
    result = client.delivery_targets.test("dt_1")
    deleted = client.delivery_targets.delete("dt_1")
    assert [sent(r) for r in recorder.requests] == [
        ("GET", "/v1/delivery-targets", {}, None),
        (
            "POST",
            "/v1/delivery-targets",
            {},
            {
                "bucket": "acme-batch-results",
                "access_key_id": "AKIAEXAMPLE7QXA",
                "secret_access_key": SECRET,
                "region": "eu-central-1",
                "prefix": "exports",
            },
        ),
        ("GET", "/v1/delivery-targets/dt_1", {}, None),
        ("PATCH", "/v1/delivery-targets/dt_1", {}, {"enabled": False}),
        ("PATCH", "/v1/delivery-targets/dt_1", {}, {"name": None}),
        ("POST", "/v1/delivery-targets/dt_1/test", {}, None),
        ("DELETE", "/v1/delivery-targets/dt_1", {}, None),
    ]
    assert all("idempotency-key" not in r.headers for r in recorder.requests)
    assert got == created and updated.enabled is False
    assert isinstance(result, TargetTest) and result.ok is False and result.error is not None
    assert (result.error.code, result.error.message) == ("AccessDenied", "Access Denied")
    assert deleted == DeliveryTargetDeleted(id="dt_1", deleted=True)


def test_a_create_is_not_repeated_after_a_5xx_but_is_after_a_429() -> None:
    client, recorder = client_for(error(503, "unavailable"), ok(target(), 201))
    with pytest.raises(InternalServerError):
        client.delivery_targets.create(bucket="b-1", access_key_id="AKIA1", secret_access_key=SECRET)
    assert len(recorder.requests) == 1  # a repeat would register a second target
    client, recorder = client_for(error(429, "rate_limited"), ok(target(), 201))
    assert (
        client.delivery_targets.create(bucket="b-1", access_key_id="AKIA1", secret_access_key=SECRET).id
        == "dt_1"
    )
    assert len(recorder.requests) == 2


def test_delivery_target_errors_are_typed_and_a_delete_whose_answer_was_lost_is_done() -> None:
    client, _ = client_for(error(409, "delivery_target_limit", limit=5))
    with pytest.raises(ConflictError) as full:
        client.delivery_targets.create(bucket="b-1", access_key_id="AKIA1", secret_access_key=SECRET)
    assert (full.value.status, full.value.code, full.value.details) == (
        409,
        "delivery_target_limit",
        {"limit": 5},
    )
    # A 404 to the first attempt: no such target
    client, recorder = client_for(error(404, "delivery_target_not_found"))
    with pytest.raises(NotFoundError) as missing:
        client.delivery_targets.delete("dt_9")
    assert missing.value.code == "delivery_target_not_found" and len(recorder.requests) == 1
    # The first attempt's answer lost: the retry's 404 says that attempt removed it
    client, recorder = client_for(httpx.ReadError("reset"), error(404, "delivery_target_not_found"))
    assert client.delivery_targets.delete("dt_1") == DeliveryTargetDeleted(id="dt_1", deleted=True)
    assert [sent(r)[:2] for r in recorder.requests] == [("DELETE", "/v1/delivery-targets/dt_1")] * 2
    # But after attempts that did nothing (a 429, a connection never made) a 404 is a 404
    for did_nothing in (error(429, "rate_limited"), httpx.ConnectError("refused")):
        client, recorder = client_for(did_nothing, error(404, "delivery_target_not_found"))
        with pytest.raises(NotFoundError):
            client.delivery_targets.delete("dt_9")
        assert len(recorder.requests) == 2


# -- billing -------------------------------------------------------------------------------


def test_billing_audit_reads_every_page_and_auto_topup_is_read_and_updated() -> None:
    controls = {
        "controls": {"org_id": "org_1", "limit_enabled": False, "limit_mode": "soft", "limit_timezone": "UTC"}
    }
    client, recorder = client_for(
        ok({"data": [audit_entry("aud_3"), audit_entry("aud_2")], "next_cursor": "aud_2"}),
        ok({"data": [audit_entry("aud_1")], "next_cursor": None}),
        ok(auto_topup()),
        ok(auto_topup(enabled=True)),
        ok(controls),
        ok(controls),
    )
    entries = list(client.billing.audit(page_size=2))
    # Page after page by the answer's cursor, until it is null
    assert [sent(r) for r in recorder.requests] == [
        ("GET", "/v1/billing/controls/audit", {"limit": "2"}, None),
        ("GET", "/v1/billing/controls/audit", {"limit": "2", "cursor": "aud_2"}, None),
    ]
    assert [e.id for e in entries] == ["aud_3", "aud_2", "aud_1"] and isinstance(entries[0], AuditEntry)
    assert entries[0].before == {"limit_amount": money("250.00")} and entries[0].ip_address == "198.51.100.7"

    settings = client.billing.auto_topup()
    assert sent(recorder.requests[2]) == ("GET", "/v1/billing/auto-topup", {}, None)
    assert isinstance(settings, AutoTopup) and settings.enabled and settings.configured
    assert (settings.trigger_balance, settings.monthly_cap) == (Money("usd", "10.50"), Money("usd", "500.00"))
    assert settings.payment_method == Card("visa", "4242")
    assert (
        settings.status.month_committed == Money("usd", "25.00") and settings.status.consecutive_failures == 0
    )
    assert settings.raw["added_later"] == LATER["added_later"]

    changed = client.billing.update_auto_topup(
        enabled=True, trigger_balance=Decimal("10.50"), amount=25, monthly_cap=Money("usd", "500.00")
    )
    body = {"enabled": True, "trigger_balance": "10.50", "amount": 25, "monthly_cap": money("500.00")}
    assert sent(recorder.requests[3]) == ("PUT", "/v1/billing/auto-topup", {}, body)
    assert changed.enabled is True
    # billing_controls() is unchanged, and billing.controls() is the same call
    assert client.billing_controls() == client.billing.controls()
    assert isinstance(client.billing.controls(), BillingControls)
    assert [sent(r)[:2] for r in recorder.requests[4:]] == [("GET", "/v1/billing/controls")] * 3
    assert all("idempotency-key" not in r.headers for r in recorder.requests)


def test_auto_topup_attempts_follow_every_page_and_billing_errors_are_typed() -> None:
    pages = {
        None: {"data": [attempt("att_3"), attempt("att_2", "failed")], "next_cursor": "c1"},
        "c1": {"data": [attempt("att_1")], "next_cursor": None},
    }
    recorder = Recorder(lambda request: ok(pages[request.url.params.get("cursor")]))
    attempts = list(make(recorder, []).billing.auto_topup_attempts(page_size=2))
    assert [a.id for a in attempts] == ["att_3", "att_2", "att_1"]
    assert attempts[1] == TopupAttempt(
        "att_2", Money("usd", "25.00"), "failed", AT, AT, processor_reference="pi_1"
    )
    assert [sent(r) for r in recorder.requests] == [
        ("GET", "/v1/billing/auto-topup/attempts", {"limit": "2"}, None),
        ("GET", "/v1/billing/auto-topup/attempts", {"limit": "2", "cursor": "c1"}, None),
    ]
    client, recorder = client_for(error(400, "payment_method_required"))
    with pytest.raises(BadRequestError) as refused:
        client.billing.update_auto_topup(enabled=True)
    assert (refused.value.status, refused.value.code) == (400, "payment_method_required")
    assert sent(recorder.requests[0])[3] == {"enabled": True}
    # An answer that is not the envelope is not the API's document
    client, _ = client_for(ok({"settings": {}}))
    with pytest.raises(UnexpectedResponse, match="not the API's document"):
        client.billing.auto_topup()


# -- catalog -------------------------------------------------------------------------------


def test_catalog_models_with_filters_and_one_model_by_its_id_with_slashes() -> None:
    listed = {"data": [catalog_model()], "pricing_updated_at": AT, "provider_count": 1, **LATER}
    client, recorder = client_for(
        ok(listed), ok({"model": catalog_model(), "pricing_updated_at": AT}), ok({"model": catalog_model()})
    )
    found = client.catalog.models(operation="responses", provider="groq", q="llama")
    assert sent(recorder.requests[0]) == (
        "GET",
        "/v1/catalog/models",
        {"operation": "responses", "provider": "groq", "q": "llama"},
        None,
    )
    assert len(found) == 1 and found.provider_count == 1 and found.pricing_updated_at == AT
    (model,) = found
    assert isinstance(model, CatalogModel) and model.open_weight and model.routing_eligibility["eligible"]
    (route,) = model.providers
    assert (route.provider, route.status, route.eligible) == ("groq", "available", True)
    assert (route.pricing.batch_input, route.pricing.unit) == ("0.59", "per_million_tokens")
    assert route.capacity["remaining_capacity_items"] == 299000

    one = client.catalog.model("meta-llama/Llama-3.3-70B-Instruct")
    assert sent(recorder.requests[1]) == (
        "GET",
        "/v1/catalog/models/meta-llama/Llama-3.3-70B-Instruct",
        {},
        None,
    )
    assert one == model and one.raw["added_later"] == LATER["added_later"]
    client.catalog.model("odd id?")  # one segment's characters are escaped, a slash is kept
    assert sent(recorder.requests[2])[1] == "/v1/catalog/models/odd%20id%3F"


def test_catalog_workflow_products_providers_and_fees() -> None:
    fees = {
        "currency": "usd",
        "standard_batch_fee_pct": "5.90",
        "workflow_product_fee_pct": "11.80",
        "margin_floor_pct": "5.90",
        "control_plane_fee_per_lane": money("0.01"),
        "basis": "percentages of the provider subtotal",
        "effective_at": "2026-11-01T00:00:00Z",
        "pricing_updated_at": "2026-11-29T00:00:00Z",
        "catalog_version": "2026-11-29.2",
        **LATER,
    }
    client, recorder = client_for(
        ok({"data": [product()], "provider_capacity": {"openai": 900000}}),
        ok({"product": product(), "provider_capacity": {"openai": 900000}}),
        ok({"providers": [provider("groq"), provider("edge-eu")]}),
        ok({"provider": provider("edge-eu")}),
        ok(fees),
    )
    products = client.catalog.workflow_products()
    one_product = client.catalog.workflow_product("ticket-classification")
    providers = client.catalog.providers()
    edge = client.catalog.provider("edge-eu")
    schedule = client.catalog.fees()
    assert [sent(r) for r in recorder.requests] == [
        ("GET", "/v1/catalog/workflow-products", {}, None),
        ("GET", "/v1/catalog/workflow-products/ticket-classification", {}, None),
        ("GET", "/v1/providers", {}, None),
        ("GET", "/v1/providers/edge-eu", {}, None),
        ("GET", "/v1/pricing/fees", {}, None),
    ]
    assert [p.slug for p in products] == ["ticket-classification"] and products.provider_capacity == {
        "openai": 900000
    }
    assert isinstance(one_product, WorkflowProduct) and one_product == products.data[0]
    assert (one_product.fee_pct, one_product.sla_hours, one_product.lanes_available) == ("11.80", 24, 3)
    assert [p.slug for p in providers] == ["groq", "edge-eu"] and all(
        isinstance(p, Provider) for p in providers
    )
    assert edge == providers[1] and edge.enabled and edge.website is None
    assert isinstance(schedule, FeeSchedule) and schedule.control_plane_fee_per_lane == Money("usd", "0.01")
    assert (schedule.standard_batch_fee_pct, schedule.catalog_version) == ("5.90", "2026-11-29.2")


def test_catalog_errors_are_typed_and_a_slug_is_one_path_segment() -> None:
    client, recorder = client_for(error(404, "model_not_found"), error(404, "provider_not_found"))
    with pytest.raises(NotFoundError) as missing:
        client.catalog.model("no-such-model")
    assert (missing.value.status, missing.value.code) == (404, "model_not_found")
    with pytest.raises(NotFoundError) as no_provider:
        client.catalog.provider("a/b")
    assert no_provider.value.code == "provider_not_found"
    assert sent(recorder.requests[1])[1] == "/v1/providers/a%2Fb"  # not another route
    assert len(recorder.requests) == 2  # a 404 is not retried
