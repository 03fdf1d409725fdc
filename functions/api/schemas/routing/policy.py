"""Request and response models: the org's route policy and its history
(docs/routing-policy.md). The update body is read once, at the edge, by the domain's reader
against the deployment's catalog (`RoutePolicyUpdate.command`: every problem with its field
path in `error.details.errors`), and the service takes the typed change."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.catalog.catalog import Catalog
from batchroute.domain.routing.policy import MAX_LIST, MAX_PRICE_CAP, UpdateRoutePolicy, parse_update
from functions.api.schemas.billing.controls import AuditEntryOut, UsdMoney, UsdText
from functions.api.schemas.common import ContractBody, MoneyOut, as_sent, omittable, read_only

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


class PriceCapMoney(UsdMoney):
    """A Money object, as GET returns it, within a price cap's bound."""

    amount: UsdText | Annotated[float, Field(ge=0, le=float(MAX_PRICE_CAP))]


PriceCapUsd = Annotated[
    Annotated[float, Field(ge=0, le=float(MAX_PRICE_CAP))] | UsdText | PriceCapMoney,
    Field(
        description=f"USD per million tokens, a number or a decimal string: 0 to {MAX_PRICE_CAP}, 6 decimals"
    ),
]


class PriceCapIn(BaseModel):
    """A cap on input and/or output prices (at least one of them)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    input: PriceCapUsd | None = None
    output: PriceCapUsd | None = None


NameList = Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_LIST)]


class RoutePolicyUpdate(ContractBody):
    """The policy fields to change: only the fields given change; null resets one to its
    default (no restriction). `version` (or the `If-Match` header) makes the save conditional.
    Unknown fields are refused (with the other problems); the read-only fields of a GET are
    ignored."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": False})

    provider_allow: Annotated[Any, as_sent(NameList | None)] = omittable(
        "Catalog provider slugs; replaces the list"
    )
    provider_deny: Annotated[Any, as_sent(NameList | None)] = omittable(
        "Catalog provider slugs; replaces the list"
    )
    allowed_regions: Annotated[Any, as_sent(NameList | None)] = omittable("Catalog regions, e.g. eu")
    routing_mode: Annotated[Any, as_sent(RoutingMode | None)] = omittable()
    privacy_tier_floor: Annotated[Any, as_sent(PrivacyTier | None)] = omittable()
    max_price_per_million_tokens: Annotated[Any, as_sent(dict[Operation, PriceCapIn | None] | None)] = (
        omittable("Replaces the caps; money as a USD number or a Money object")
    )
    chat_fallbacks_allowed: Annotated[Any, as_sent(bool | None)] = omittable()
    version: Annotated[Any, as_sent(Annotated[int, Field(ge=0)] | None)] = omittable(
        "The version you read: refused with 409 if it moved"
    )
    object: Annotated[Any, as_sent(str)] = read_only()
    org_id: Annotated[Any, as_sent(str)] = read_only()
    configured: Annotated[Any, as_sent(bool)] = read_only()
    created_at: Annotated[Any, as_sent(str | None)] = read_only()
    updated_at: Annotated[Any, as_sent(str | None)] = read_only()
    updated_by: Annotated[Any, as_sent(str | None)] = read_only()

    def command(self, catalog: Catalog) -> UpdateRoutePolicy:
        """The change, read by the domain against the deployment's catalog (InvalidRequest
        listing every problem otherwise)."""
        sent = {name: getattr(self, name) for name in self.model_fields_set}
        return parse_update({**sent, **(self.model_extra or {})}, catalog)


class RoutePolicyChangeOut(AuditEntryOut):
    """An audit entry of the policy; `before`/`after` hold only the fields that changed."""

    object: Literal["routing_policy_change"]
    version: int = Field(description="the version this change produced")
    actor_key_id: str | None = Field(description="the API key that made the change, for a key")


class RoutePolicyHistory(BaseModel):
    data: list[RoutePolicyChangeOut]
    next_cursor: str | None = Field(description="pass as `cursor` for older entries; null at the end")
