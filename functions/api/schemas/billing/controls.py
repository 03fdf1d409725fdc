"""Request and response models: billing controls, the org's spend limit and alerts, and the
audit trail of their changes (docs/billing-controls.md)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.billing.controls import (
    MAX_THRESHOLDS,
    MAX_USD,
    MAX_USD_DECIMALS,
    Mode,
    Period,
    Threshold,
    ThresholdType,
    UpdateControls,
    parse_bool,
    parse_mode,
    parse_optional_usd,
    parse_period,
    parse_thresholds,
    parse_timezone,
)
from batchroute.money import Money
from functions.api.schemas.common import (
    ContractUpdate,
    MoneyOut,
    domain_rule,
    ignored,
    omittable,
    read_only,
)


class ThresholdOut(BaseModel):
    type: ThresholdType
    value: MoneyOut | int  # Money for the USD types, a whole percent for pct_of_limit


class ControlsOut(BaseModel):
    org_id: str
    configured: bool
    limit_enabled: bool
    limit_period: Period | None
    limit_amount: MoneyOut | None
    limit_mode: Mode
    limit_timezone: str
    low_balance_amount: MoneyOut | None
    alert_thresholds: list[ThresholdOut]
    alert_email_enabled: bool
    alert_webhook_enabled: bool
    created_at: str | None
    updated_at: str | None


class ControlsEnvelope(BaseModel):
    controls: ControlsOut


class AuditEntryOut(BaseModel):
    id: str
    org_id: str
    actor_user_id: str | None
    actor_role: str | None
    action: str
    before: dict[str, Any]
    after: dict[str, Any]
    ip_address: str | None
    created_at: str


class AuditList(BaseModel):
    data: list[AuditEntryOut]
    next_cursor: str | None = Field(description="the older entries: pass as `cursor`; null at the oldest")


# -- the update ----------------------------------------------------------------------------
# A USD amount as a decimal string, at most 6 decimals (its bounds are the reader's to check:
# a schema cannot bound a string's value).
UsdText = Annotated[str, Field(pattern=rf"^[0-9]+(\.[0-9]{{1,{MAX_USD_DECIMALS}}})?$")]


class UsdMoney(BaseModel):
    """A Money object, as GET returns it (so the controls can be sent back): its amount as
    the field takes a plain one (money.is_usd_money)."""

    model_config = ConfigDict(extra="forbid")

    currency: str = Field(pattern="^[uU][sS][dD]$", description="usd (any case)")
    amount: UsdText | Annotated[float, Field(ge=0, le=float(MAX_USD))]


UsdAmount = Annotated[
    Annotated[float, Field(ge=0, le=float(MAX_USD))] | UsdText | UsdMoney,
    Field(
        description=f"USD dollars, a number or a decimal string: at most {MAX_USD} with "
        f"{MAX_USD_DECIMALS} decimals"
    ),
]


class ThresholdIn(BaseModel):
    # The document also says which value goes with which type: a pct_of_limit is a whole
    # percent (the rule parse_thresholds applies; a percent of 500 passes the USD branch).
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"type": {"const": "pct_of_limit"}}},
            "then": {"properties": {"value": {"type": "integer", "minimum": 0, "maximum": 100}}},
        },
    )

    type: ThresholdType
    value: UsdAmount | Annotated[int, Field(ge=0, le=100)] = Field(
        description="USD for balance_below and spend_above; a whole percent 0-100 for pct_of_limit"
    )


class ControlsUpdate(ContractUpdate):
    """Billing controls to change: only the fields given change; null clears a nullable field.
    An enabled limit needs limit_period and limit_amount, given now or saved before;
    `{limit_enabled: false}` removes the limit."""

    error_code: ClassVar[str] = "invalid_controls"

    limit_enabled: Annotated[bool, domain_rule(parse_bool, bool)] = omittable()
    limit_period: Annotated[Period | None, domain_rule(parse_period, Period | None)] = omittable()
    limit_amount: Annotated[Money | None, domain_rule(parse_optional_usd, UsdAmount | None)] = omittable(
        "The cap for the period"
    )
    limit_mode: Annotated[Mode, domain_rule(parse_mode, Mode)] = omittable(
        "soft never blocks; hard refuses work that would pass the cap (a new limit starts soft)",
    )
    limit_timezone: Annotated[str, domain_rule(parse_timezone, Annotated[str, Field(max_length=64)])] = (
        omittable("The IANA time zone of the period boundaries, e.g. Europe/Berlin")
    )
    low_balance_amount: Annotated[Money | None, domain_rule(parse_optional_usd, UsdAmount | None)] = (
        omittable("The balance level of the low-balance alert")
    )
    alert_thresholds: Annotated[
        tuple[Threshold, ...],
        domain_rule(parse_thresholds, Annotated[list[ThresholdIn], Field(max_length=MAX_THRESHOLDS)] | None),
    ] = omittable("Replaces the list; null clears it like []")
    alert_email_enabled: Annotated[bool, domain_rule(parse_bool, bool)] = omittable()
    alert_webhook_enabled: Annotated[bool, domain_rule(parse_bool, bool)] = omittable(
        "Also deliver alerts to the org's delivery webhook"
    )
    configured: Annotated[Any, ignored(bool)] = read_only()
    created_at: Annotated[Any, ignored(str | None)] = read_only()

    def command(self) -> UpdateControls:
        """The update the service applies: the given fields, in domain values."""
        given = self.given()
        return UpdateControls(given=frozenset(given), **given)
