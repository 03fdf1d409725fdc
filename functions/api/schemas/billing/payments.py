"""Request and response models: credit purchase (the billing dashboard's checkout), the
payment processor's webhook acknowledgement, auto top-up settings and attempts
(docs/payments.md)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from batchroute.domain.billing.payments import (
    MAX_MONTHLY_CAP,
    MAX_PAYMENT,
    MAX_TRIGGER,
    MIN_PAYMENT,
    UpdateAutoTopup,
    parse_enabled,
    parse_monthly_cap,
    parse_topup_amount,
    parse_trigger_balance,
    payment_amount,
)
from batchroute.money import Money
from batchroute.services.billing.commands import StartCheckout
from functions.api.schemas.billing.controls import UsdMoney
from functions.api.schemas.common import (
    ContractBody,
    ContractUpdate,
    MoneyOut,
    domain_rule,
    ignored,
    omittable,
    read_only,
    refusal,
)

_MIN, _MAX = float(MIN_PAYMENT.amount), float(MAX_PAYMENT.amount)
CENTS = r"^\d+(\.\d{1,2})?$"  # a decimal string of whole cents

PaymentUsd = Annotated[
    Annotated[float, Field(ge=_MIN, le=_MAX)] | Annotated[str, Field(pattern=CENTS)],
    Field(description=f"USD dollars, whole cents, {_MIN:.0f} to {_MAX:.0f}"),
]


def usd_up_to(most: Money, *, least: Money = Money.zero()) -> Any:
    """A USD amount from `least` to `most`, whole cents: a number, a decimal string or a Money
    object (a string's bounds are the reader's to check: a schema cannot bound one)."""
    low, high = float(least.amount), float(most.amount)
    return Annotated[
        Annotated[float, Field(ge=low, le=high)] | Annotated[str, Field(pattern=CENTS)] | UsdMoney,
        Field(
            description=f"USD dollars (a number, a decimal string or a Money object), whole cents, "
            f"{low:g} to {high:g}"
        ),
    ]


# -- checkout --------------------------------------------------------------------------------
class CheckoutRequest(ContractBody):
    """Buy credits: the amount in USD; answers the processor's hosted checkout page."""

    model_config = ConfigDict(extra="forbid")
    error_code: ClassVar[str] = "invalid_amount"

    amount: Annotated[Money, domain_rule(payment_amount, PaymentUsd)] = Field(
        description=f"USD dollars, {_MIN:.0f} to {_MAX:.0f}"
    )

    @classmethod
    def unknown_fields(cls, unknown: list[str]) -> PydanticCustomError:
        return refusal("invalid_request", f"Unknown field {unknown[0]!r}.", {"field": unknown[0]})

    def command(self) -> StartCheckout:
        return StartCheckout(amount=self.amount)


class CheckoutOut(BaseModel):
    checkout_url: str = Field(description="Send the user here: the processor's hosted payment page")
    session_id: str = Field(description="The processor's Checkout Session id (cs_...)")
    expires_at: str
    amount: MoneyOut


class CheckoutStateOut(BaseModel):
    session_id: str
    status: Literal["open", "credited"] = Field(
        description="`credited` once the processor's webhook has credited the wallet"
    )
    amount: MoneyOut


class ProcessorWebhookAck(BaseModel):
    received: bool
    event_id: str
    applied: bool = Field(description="false when the event changed nothing (a repeat, or not ours)")


# -- auto top-up -----------------------------------------------------------------------------
class CardOut(BaseModel):
    brand: str
    last4: str


class AutoTopupStatusOut(BaseModel):
    in_flight_attempt_id: str | None
    consecutive_failures: int
    retry_after: str | None = Field(description="back-off: no attempt before this time")
    disabled_reason: str | None = Field(description="payment_failed when failures switched it off")
    month: str | None = Field(description="the calendar month (UTC) of month_committed, YYYY-MM")
    month_committed: MoneyOut = Field(description="pending and succeeded top-ups this month")


class AutoTopupOut(BaseModel):
    org_id: str
    configured: bool
    enabled: bool
    trigger_balance: MoneyOut = Field(description="a top-up starts when the balance falls below this")
    amount: MoneyOut = Field(description="charged per top-up")
    monthly_cap: MoneyOut = Field(
        description="pending + succeeded top-ups per calendar month (UTC) stay within it"
    )
    payment_method: CardOut | None = Field(description="the card saved by the last credit purchase")
    status: AutoTopupStatusOut
    created_at: str | None
    updated_at: str | None


class AutoTopupEnvelope(BaseModel):
    auto_topup: AutoTopupOut


class AutoTopupUpdate(ContractUpdate):
    """Only the given fields change. Enabling needs a saved card (400 `payment_method_required`);
    saving clears the failure back-off."""

    error_code: ClassVar[str] = "invalid_auto_topup"

    enabled: Annotated[bool, domain_rule(parse_enabled, bool)] = omittable()
    trigger_balance: Annotated[Money, domain_rule(parse_trigger_balance, usd_up_to(MAX_TRIGGER))] = omittable(
        "0 to 10000 USD"
    )
    amount: Annotated[Money, domain_rule(parse_topup_amount, usd_up_to(MAX_PAYMENT, least=MIN_PAYMENT))] = (
        omittable("5 to 10000 USD")
    )
    monthly_cap: Annotated[Money, domain_rule(parse_monthly_cap, usd_up_to(MAX_MONTHLY_CAP))] = omittable(
        "at least amount, at most 100000 USD"
    )
    configured: Annotated[Any, ignored(bool)] = read_only()
    payment_method: Annotated[Any, ignored(CardOut | None)] = read_only()
    status: Annotated[Any, ignored(AutoTopupStatusOut)] = read_only()
    created_at: Annotated[Any, ignored(str | None)] = read_only()

    def command(self) -> UpdateAutoTopup:
        given = self.given()
        return UpdateAutoTopup(given=frozenset(given), **given)


class AttemptOut(BaseModel):
    id: str
    amount: MoneyOut
    status: Literal["pending", "succeeded", "failed"]
    processor_reference: str | None = Field(description="the processor's PaymentIntent id (pi_...)")
    failure_code: str | None
    failure_reason: str | None
    created_at: str
    updated_at: str


class AttemptList(BaseModel):
    data: list[AttemptOut]
    next_cursor: str | None
