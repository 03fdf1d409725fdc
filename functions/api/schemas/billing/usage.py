"""Response model of `GET /v1/usage`: the wallet, and the spend of the current and previous
period by day, model and provider, with tokens and request counts (docs/usage.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from functions.api.schemas.common import Absent, MoneyOut


class UsageTokens(BaseModel):
    input: int = Field(description="prompt tokens of charged work")
    output: int = Field(description="completion tokens of charged work")
    total: int = Field(description="input + output")
    cached_input: int | Absent = Field(
        default=None, description="of input, tokens read from the vendor's prompt cache (when any)"
    )
    cache_write_input: int | Absent = Field(
        default=None, description="of input, tokens written to the vendor's prompt cache (when any)"
    )


class UsageRequests(BaseModel):
    batch_items: int = Field(description="completed batch items charged")
    chat: int = Field(description="chat completions charged (direct and queued)")
    total: int = Field(description="batch_items + chat")


class SavingsOut(BaseModel):
    """What routing saved: the spend beside the same tokens at the reference vendor's published
    prices for each model (docs/routing.md, "What routing saved"). Negative savings mean the
    routed work cost more."""

    reference_list_price: MoneyOut = Field(description="the tokens at the reference vendor's list price")
    reference_batch_price: MoneyOut = Field(description="the tokens at the reference vendor's batch price")
    charged: MoneyOut = Field(description="what the wallet was charged for the same work")
    saved_vs_list_price: MoneyOut = Field(description="reference_list_price - charged")
    saved_vs_batch_price: MoneyOut = Field(description="reference_batch_price - charged")


class UsageFiguresOut(BaseModel):
    spend: MoneyOut = Field(description="what the wallet was charged (fees included, after discounts)")
    tokens: UsageTokens
    requests: UsageRequests
    savings: SavingsOut


class UsageByModel(UsageFiguresOut):
    model: str


class UsageByProvider(UsageFiguresOut):
    provider: str


class UsageDay(UsageFiguresOut):
    date: str = Field(description="a local date (yyyy-mm-dd) in the period's time zone")
    by_model: list[UsageByModel] = Field(description="the day's spend by model, dearest first")
    by_provider: list[UsageByProvider] = Field(description="the day's spend by provider, dearest first")


class UsagePeriodOut(UsageFiguresOut):
    start_date: str = Field(description="first local date of the period")
    end_date: str = Field(description="last local date of the period (inclusive)")
    starts_at: str = Field(description="the period's first instant, UTC")
    ends_at: str = Field(description="the instant the period ends (exclusive), UTC")
    by_day: list[UsageDay] = Field(
        description="every day of the period, oldest first (the current period up to today), zeros included"
    )
    by_model: list[UsageByModel] = Field(description="models that were charged, dearest first")
    by_provider: list[UsageByProvider] = Field(description="providers that were charged, dearest first")


class UsageOut(BaseModel):
    object: Literal["usage"]
    org_id: str
    balance: MoneyOut = Field(description="the wallet's balance")
    reserved: MoneyOut = Field(description="credit held for in-flight batches and chat requests")
    available: MoneyOut = Field(description="balance - reserved: what new work may reserve")
    period: Literal["daily", "monthly"]
    timezone: str = Field(description="the IANA zone of the period boundaries (billing controls)")
    current_period: UsagePeriodOut
    previous_period: UsagePeriodOut
    generated_at: str
    reference_prices_as_of: str | Absent = Field(
        default=None, description="the date of the reference prices `savings` compares with"
    )
