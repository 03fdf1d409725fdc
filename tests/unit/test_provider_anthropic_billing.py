"""An Anthropic account out of credit makes the lane unavailable, as OpenAI's 429
`insufficient_quota` does: ProviderUnavailable `insufficient_quota`, so the lane runner fails
the items over (and the provider's lanes are marked down, services/catalog/lane_health.py
ACCOUNT_DOWN_CODES) instead of failing each item for good. The three answers: HTTP 402 (the
`anthropic` SDK's PaymentRequiredError), an error of type `billing_error` (the SDK's
BillingErrorObject), and the 400 `invalid_request_error` "Your credit balance is too low".
Error bodies in Anthropic's envelope, as the SDK's ErrorResponse parses them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest
from anthropic.types.shared.error_response import ErrorResponse

from batchroute.domain.catalog.catalog import Lane, LanePrice
from batchroute.providers import base
from batchroute.providers.anthropic import transform as t
from batchroute.providers.anthropic import vendor_http
from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.retry import RetryPolicy
from batchroute.services.catalog.lane_health import ACCOUNT_DOWN_CODES
from batchroute.services.workflow.runner import run_lane_items

NO_CREDIT = [
    (402, "billing_error", "Your organization has no credit. Add a payment method."),
    (400, "billing_error", "This organization's billing is not set up."),
    (
        400,
        "invalid_request_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing "
        "to upgrade or purchase credits.",
    ),
]


def envelope(kind: str, message: str) -> dict[str, Any]:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011"}
    ErrorResponse.model_validate(body)  # the SDK's own envelope
    return body


def lane() -> Lane:
    return Lane(
        provider="anthropic",
        model="claude-sonnet-4",
        price=LanePrice(Decimal("3"), Decimal("15"), Decimal("0.3"), Decimal("3.75")),
        context_window=200_000,
        max_output_tokens=64_000,
        operations=("responses",),
        provider_model_id="claude-sonnet-4-20250514",
    )


def refusing(status: int, kind: str, message: str) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, json=envelope(kind, message)))


@pytest.mark.parametrize(("status", "kind", "message"), NO_CREDIT)
def test_no_credit_makes_the_lane_unavailable(status: int, kind: str, message: str) -> None:
    error = t.status_error(
        status, {}, httpx.Response(status, json=envelope(kind, message)).content, vendor="anthropic"
    )
    assert isinstance(error, base.ProviderUnavailable)
    assert error.code == "insufficient_quota" and error.code in ACCOUNT_DOWN_CODES
    assert message[:40] in error.message


@pytest.mark.parametrize(("status", "kind", "message"), NO_CREDIT)
def test_the_lane_runner_fails_the_items_over_when_the_account_has_no_credit(
    status: int, kind: str, message: str
) -> None:
    # Given a sync lane whose account is out of credit
    http = vendor_http(
        ProviderEndpoint(slug="anthropic", adapter="anthropic"),
        "sk-ant-x",
        transport=refusing(status, kind, message),
    )
    results: dict[int, base.ProviderResult] = {}
    items = (
        (
            i,
            {
                "customer_item_id": f"i{i}",
                "operation": "responses",
                "model": "claude-sonnet-4",
                "input": {"messages": [{"role": "user", "content": f"hi {i}"}]},
            },
        )
        for i in range(5)
    )
    outcome = run_lane_items(
        items,
        lane=lane(),
        provider=AnthropicMessages("anthropic", http),
        retry=RetryPolicy(max_attempts=3, sleeper=lambda s: None),
        concurrency=1,
        on_result=lambda seq, r, a: results.__setitem__(seq, r),
    )
    # Then the lane is unavailable, its error the account's, and no item failed for good
    assert outcome.unavailable
    assert outcome.latest_error is not None and outcome.latest_error.code == "insufficient_quota"
    assert results == {} and outcome.failed == 0


@pytest.mark.parametrize(("status", "kind", "message"), NO_CREDIT)
def test_a_batch_the_account_cannot_pay_for_is_not_submitted(status: int, kind: str, message: str) -> None:
    http = vendor_http(
        ProviderEndpoint(slug="anthropic", adapter="anthropic"),
        "sk-ant-x",
        transport=refusing(status, kind, message),
    )
    request = base.ProviderRequest(
        custom_id="seq-0",
        customer_item_id="i0",
        operation="responses",
        model="claude-sonnet-4",
        provider_model_id="claude-sonnet-4-20250514",
        input={"messages": [{"role": "user", "content": "hi"}]},
        max_output_tokens=64,
    )
    with pytest.raises(base.ProviderUnavailable) as raised:
        AnthropicBatches("anthropic", http).submit([request])
    assert raised.value.code == "insufficient_quota"


def test_other_refusals_keep_the_shared_mapping() -> None:
    refused = t.status_error(
        400,
        {},
        envelope("invalid_request_error", "max_tokens: too many")["error"]["message"],
        vendor="anthropic",
    )
    assert isinstance(refused, base.PermanentProviderError) and refused.code == "provider_rejected"
    bad_key = httpx.Response(401, json=envelope("authentication_error", "invalid x-api-key")).content
    assert t.status_error(401, {}, bad_key, vendor="anthropic").code == "provider_auth_failed"
    overloaded = httpx.Response(529, json=envelope("overloaded_error", "Overloaded")).content
    assert isinstance(t.status_error(529, {}, overloaded, vendor="anthropic"), base.TransientProviderError)


def test_billing_errors_in_a_batch_line_or_a_stream_are_the_account_too() -> None:
    line = t.batch_line_result(
        {"custom_id": "seq-0", "result": {"type": "errored", "error": envelope("billing_error", "no credit")}}
    )
    assert line is not None and line.error is not None
    assert (
        line.error.code == "insufficient_quota" and line.transient_failure
    )  # resubmitted, not failed for good
    raised = t.stream_error({"type": "error", "error": {"type": "billing_error", "message": "no credit"}})
    assert isinstance(raised, base.ProviderUnavailable) and raised.code == "insufficient_quota"
