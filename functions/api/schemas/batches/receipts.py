"""Response models: the billing receipt of a settled batch. The final cost is settled from the
providers' actual token usage (completed items only) at each lane's locked prices, plus the
fee; what was reserved and not charged is released."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from functions.api.schemas.batches.quotes import LaneProof, LaneRejection, LaneUnitPrices
from functions.api.schemas.billing.usage import SavingsOut
from functions.api.schemas.common import Absent, MoneyOut


class TokenUsage(BaseModel):
    """Tokens of the completed items. `prompt_tokens` is all input; the cache counts (present
    when the vendor reported any) are the parts of it read from and written to the vendor's
    prompt cache, each billed at its own unit price."""

    prompt_tokens: int
    completion_tokens: int
    cached_input_tokens: int | Absent = Field(default=None, description="Input read from the prompt cache")
    cache_write_input_tokens: int | Absent = Field(
        default=None, description="Input written to the prompt cache"
    )
    tool_uses: dict[str, int] | Absent = Field(
        default=None,
        description="Hosted tool calls the vendor made and bills, by hosted tool name "
        '(`{"web_search": 3}`; present when any), charged at the lane\'s locked '
        "`<tool>_per_1k_calls` price where it has one (docs/money.md)",
    )


class ReceiptItemCounts(BaseModel):
    total: int
    completed: int
    failed: int
    canceled: int


class LaneItemCounts(BaseModel):
    completed: int
    failed: int
    canceled: int


class LanePromptCacheReceipt(BaseModel):
    """What the vendor's prompt cache did on a lane (cache-aware routing, docs/ledger.md)."""

    grouped_items: int = Field(description="Items the quote grouped on a shared prompt prefix on this lane")
    cached_input_tokens: int = Field(description="Input of the completed items read from the cache")
    cache_write_input_tokens: int = Field(description="Input of the completed items written to it")
    saved: MoneyOut = Field(
        description="cached x (input price - cached price) - written x (write price - input price), "
        "at the lane's locked prices"
    )


class ProviderLaneReceipt(BaseModel):
    """A lane that ran: what it delivered, its usage (completed items), its locked prices and cost."""

    lane_key: str
    lane_id: str
    provider: str | None
    model: str | None
    status: str | None
    item_counts: LaneItemCounts
    usage: TokenUsage
    unit_prices: LaneUnitPrices
    cost: MoneyOut
    proof: LaneProof | None = Field(description="The quote-time data/privacy proof")
    failover_from: str | None = Field(description="The lane this one took over from")
    latest_error: str | None = Field(
        default=None,
        description="Why the lane failed or failed over (e.g. the vendor's own errors for a batch job "
        "it failed wholesale); null when it did not",
    )
    prompt_cache: LanePromptCacheReceipt | Absent = Field(
        default=None,
        description="On a lane with items grouped on a shared prompt prefix or cache use reported",
    )


class RescuedLaneReceipt(BaseModel):
    """A lane of a deadline rescue (docs/batches.md, "Deadline rescue")."""

    lane_key: str
    lane_id: str
    provider: str
    from_lane_key: str | None = Field(description="The lane whose items it took over")
    reason: Literal["deadline_rescue", "deadline_rescue_rest"] = Field(
        description="deadline_rescue: the rescue lane; deadline_rescue_rest: the old lane's own "
        "record of the items the rescue's money left it"
    )
    item_counts: LaneItemCounts
    cost: MoneyOut = Field(description="Provider cost of its completed items at its own prices")
    cost_at_quoted_prices: MoneyOut = Field(description="The same tokens at the quoted lane's prices")
    cost_difference: MoneyOut = Field(description="cost - cost_at_quoted_prices (below 0: the rescue saved)")
    overage_held: MoneyOut | Absent = Field(
        default=None,
        description="allow_overage: the second hold on the wallet this rescue took beyond the "
        "batch's reservation (a rescue lane whose rescue needed one)",
    )
    overage_charged: MoneyOut | Absent = Field(
        default=None, description="Of overage_held, what Settle charged (the rest was released)"
    )


class RejectedLaneReceipt(BaseModel):
    lane_id: str | None
    provider: str | None
    model: str | None
    rejection: LaneRejection | None
    proof: LaneProof | None


class ServiceFeeBasis(BaseModel):
    """The fee schedule line behind `service_fee` (GET /v1/pricing/fees has the schedule)."""

    fee: Literal["standard_batch_fee", "workflow_product_fee"]
    fee_pct: str = Field(description="The fee's percentage of the provider subtotal, a decimal string")
    control_plane_fee_per_lane: MoneyOut
    lane_count: int = Field(description="The lanes the batch ran on (the per-lane fee counts each)")
    margin_floor_pct: str
    margin_floor_applied: bool = Field(description="The margin floor, not the rate, set the fee")
    schedule_line: str = Field(description="The same in one sentence, money as docs/money.md shows it")


class ModelReference(BaseModel):
    model: str
    reference_provider: str = Field(description="the vendor whose published prices are the reference")
    reference_list_price: MoneyOut
    reference_batch_price: MoneyOut


class ReceiptSavings(SavingsOut):
    """The batch's charge beside the same tokens at each model's reference prices."""

    prices_as_of: str = Field(
        description="the date of the reference prices (the catalog's pricing_updated_at)"
    )
    by_model: list[ModelReference]


class BillingReceipt(BaseModel):
    """Money as {currency, amount}. `final_settled_price` is what the wallet was charged
    (`credit_charged`): the settled total, capped at the reservation (`absorbed` is the rest)."""

    object: Literal["billing_receipt"]
    version: int
    batch_id: str
    final_settled_price: MoneyOut
    provider_subtotal: MoneyOut
    service_fee: MoneyOut
    service_fee_basis: ServiceFeeBasis | Absent = Field(
        default=None, description="How the service fee was reached (receipts settled before it: absent)"
    )
    customer_discount: MoneyOut
    settled_total: MoneyOut
    absorbed: MoneyOut
    credit_reserved: MoneyOut
    credit_charged: MoneyOut
    credit_released: MoneyOut
    settled_at: str
    item_counts: ReceiptItemCounts
    savings: ReceiptSavings | Absent = Field(
        default=None,
        description="What routing saved (absent on receipts settled before it, or when a lane's model "
        "has no reference)",
    )
    provider_lanes: list[ProviderLaneReceipt] | Absent = Field(
        default=None, description="The lanes that ran (in receipt.json only when `lists_in` is set)"
    )
    rejected_lanes: list[RejectedLaneReceipt] | Absent = Field(
        default=None, description="The quote's rejected lanes (in receipt.json only when `lists_in` is set)"
    )
    lists_in: str | Absent = Field(
        default=None, description="Set when the lane lists are too large to show here: the receipt file"
    )
    rescues: list[RescuedLaneReceipt] | Absent = Field(
        default=None, description="The lanes of a deadline rescue, when the batch had one (docs/batches.md)"
    )
