"""Request and response models: the org's route policy and its history
(docs/routing-policy.md). The service validates the update itself (field paths in
`error.details.errors`); these models document it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SkipValidation

from batchroute.domain.route_policy import MAX_LIST
from functions.api.schemas.billing import AuditEntryOut, UsdAmount
from functions.api.schemas.common import MoneyOut, PartialUpdate, omittable, read_only

RoutingMode = Literal["cheapest", "sla_aware", "public_only", "edge_only", "hybrid", "privacy_constrained"]
PrivacyTier = Literal["standard", "confidential", "restricted"]
Operation = Literal["responses", "embeddings", "vision"]


class PriceCapOut(BaseModel):
    input: MoneyOut | None = Field(description="USD per million input tokens; null = no cap")
    output: MoneyOut | None = Field(description="USD per million output tokens; null = no cap")


class RoutePolicyOut(BaseModel):
    object: Literal["routing_policy"]
    org_id: str
    configured: bool = Field(description="false until the first save (the defaults restrict nothing)")
    version: int = Field(description="0 before the first save; +1 on every saved change (If-Match)")
    provider_allow: list[str] = Field(description="empty = every provider")
    provider_deny: list[str]
    allowed_regions: list[str] = Field(description="empty = anywhere")
    routing_mode: RoutingMode | None = Field(description="the default when a request names none")
    privacy_tier_floor: PrivacyTier | None
    max_price_per_million_tokens: dict[Operation, PriceCapOut] = Field(
        description="per operation; batch prices on batch paths, direct prices on direct chat"
    )
    chat_fallbacks_allowed: bool = Field(description="false: direct chat tries only its first lane")
    created_at: str | None
    updated_at: str | None
    updated_by: str | None = Field(description="the user or API key id of the last change")


class RoutePolicyEnvelope(BaseModel):
    policy: RoutePolicyOut


class PriceCapIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: UsdAmount | None = None
    output: UsdAmount | None = None


NameList = Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_LIST)]


class RoutePolicyUpdate(PartialUpdate):
    """The policy fields to change: only the fields given change; null resets one to its
    default (no restriction). `version` (or the `If-Match` header) makes the save conditional."""

    provider_allow: SkipValidation[NameList | None] = omittable("Catalog provider slugs; replaces the list")
    provider_deny: SkipValidation[NameList | None] = omittable("Catalog provider slugs; replaces the list")
    allowed_regions: SkipValidation[NameList | None] = omittable("Catalog regions, e.g. eu")
    routing_mode: SkipValidation[RoutingMode | None] = omittable()
    privacy_tier_floor: SkipValidation[PrivacyTier | None] = omittable()
    max_price_per_million_tokens: SkipValidation[dict[Operation, PriceCapIn | None] | None] = omittable(
        "Replaces the caps; money as a USD number or a Money object"
    )
    chat_fallbacks_allowed: SkipValidation[bool | None] = omittable()
    version: SkipValidation[int | None] = omittable("The version you read: refused with 409 if it moved")
    object: SkipValidation[str] = read_only()
    configured: SkipValidation[bool] = read_only()
    created_at: SkipValidation[str | None] = read_only()
    updated_by: SkipValidation[str | None] = read_only()


class RoutePolicyChangeOut(AuditEntryOut):
    """An audit entry of the policy; `before`/`after` hold only the fields that changed."""

    object: Literal["routing_policy_change"]
    version: int = Field(description="the version this change produced")
    actor_key_id: str | None = Field(description="the API key that made the change, for a key")


class RoutePolicyHistory(BaseModel):
    data: list[RoutePolicyChangeOut]
    next_cursor: str | None = Field(description="pass as `cursor` for older entries; null at the end")
