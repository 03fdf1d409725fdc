"""The org's route policy: the limits every routing decision of the org is held to.

One policy per org (`GET/PUT /v1/routing/policy`, docs/routing-policy.md): provider allow and
deny lists, allowed regions, a default `routing_mode`, a `privacy_tier` floor, a maximum
price per million tokens per operation, and whether direct chat may fall back to a second
lane. Quotes, batch create (native and compat, queued chat), direct chat and golden-set
regression runs all apply it:

- `combine` folds a request's own routing constraints into the policy. A request may
  narrow the policy, never widen it: the stricter privacy tier wins, requested regions are
  cut to the allowed ones (none left is a 400 `policy_conflict`), the policy's routing mode
  fills in only when the request names none. Price caps of both apply (each is a gate).
- `lane_failures` is the `policy` routing gate (routing_gates.py calls it through
  `RoutingGuards.policy`): a lane the policy excludes is rejected with code `policy` and
  the rule that excluded it in `details.rule` (every rule it broke in `details.rules`).
- `admitted_lanes` applies the same guards and gate to a path that picks lanes without
  routing a request (golden-set regression runs).

Pure: no boto3, no FastAPI.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal, TypedDict, TypeVar, cast, get_args

from batchroute.domain.accounts.audit import AuditEntry, AuditEntryView
from batchroute.domain.catalog.catalog import OPERATIONS, Catalog, Lane, PrivacyTier, Provider
from batchroute.domain.routing.gates import (
    PRIVACY_TIERS,
    ROUTING_MODES,
    GateDetail,
    GateFailure,
    RouteRequest,
    RoutingGuards,
    RoutingMode,
)
from batchroute.domain.views import view_of
from batchroute.errors import Conflict, InvalidRequest
from batchroute.money import Money, MoneyView, is_amount_text, is_usd_money

POLICY_GATE: Final = "policy"
PriceBasis = Literal["batch", "direct"]
# The editable fields, in the order the API shows them.
PolicyField = Literal[
    "provider_allow",
    "provider_deny",
    "allowed_regions",
    "routing_mode",
    "privacy_tier_floor",
    "max_price_per_million_tokens",
    "chat_fallbacks_allowed",
]
EDITABLE_FIELDS: Final[tuple[PolicyField, ...]] = get_args(PolicyField)
READ_ONLY_FIELDS: Final = frozenset(
    {"object", "org_id", "configured", "version", "created_at", "updated_at", "updated_by"}
)
ACTION_UPDATE: Final = "routing_policy.update"
MAX_LIST: Final = 50
# A price cap, USD per million tokens, is at most this (docs/routing-policy.md).
MAX_PRICE_CAP: Final = Decimal(1_000_000)
# A price cap is a USD amount with at most micro-dollar precision.
_MICRO: Final = Decimal("0.000001")
_Choice = TypeVar("_Choice", bound=str)


class PolicyVersionMismatch(Conflict):
    """The policy was saved by someone else since the version the caller read."""

    default_code = "policy_version_mismatch"


class PolicyConflict(InvalidRequest):
    """A request asks for what the org's route policy forbids, and nothing is left to narrow to."""

    default_code = "policy_conflict"


class PriceCapView(TypedDict):
    input: MoneyView | None
    output: MoneyView | None


class PolicyFieldsView(TypedDict, total=False):
    """The editable fields of the policy in their API form (all of them in the policy's view);
    an audit entry's before/after hold those that changed."""

    provider_allow: list[str]
    provider_deny: list[str]
    allowed_regions: list[str]
    routing_mode: RoutingMode | None
    privacy_tier_floor: PrivacyTier | None
    max_price_per_million_tokens: dict[str, PriceCapView]
    chat_fallbacks_allowed: bool


class RoutePolicyView(PolicyFieldsView):
    """The policy as `GET /v1/routing/policy` shows it (its fields around the editable ones)."""

    object: Literal["routing_policy"]
    org_id: str
    configured: bool
    version: int
    created_at: str | None
    updated_at: str | None
    updated_by: str | None


class PolicyRejectionView(TypedDict):
    """A lane the `policy` gate excluded, as direct chat's `rejected_lanes` show one."""

    lane_id: str
    code: str
    rule: str


class NarrowingView(TypedDict):
    field: str
    requested: str | list[str] | None
    effective: str | list[str] | None
    rule: str


@dataclass(frozen=True)
class PriceCap:
    """USD per million tokens; either bound may be left out."""

    input: Decimal | None = None
    output: Decimal | None = None

    def to_api(self) -> PriceCapView:
        return {
            "input": Money.usd(self.input).to_api() if self.input is not None else None,
            "output": Money.usd(self.output).to_api() if self.output is not None else None,
        }


@dataclass(frozen=True, slots=True)
class UpdateRoutePolicy:
    """A change of the policy as `parse_update` reads it: only the fields in `given` change
    (null resets one to its default); lists as given (deduplicated when applied); `version`,
    when given, the version the client read."""

    given: frozenset[str] = frozenset()
    provider_allow: tuple[str, ...] = ()
    provider_deny: tuple[str, ...] = ()
    allowed_regions: tuple[str, ...] = ()
    routing_mode: RoutingMode | None = None
    privacy_tier_floor: PrivacyTier | None = None
    max_price_per_million_tokens: Mapping[str, PriceCap] = field(default_factory=dict)
    chat_fallbacks_allowed: bool = True
    version: int | None = None


@dataclass(frozen=True)
class RoutePolicy:
    org_id: str
    provider_allow: tuple[str, ...] = ()  # empty = every provider
    provider_deny: tuple[str, ...] = ()
    allowed_regions: tuple[str, ...] = ()  # empty = anywhere
    routing_mode: RoutingMode | None = None  # the default when a request names none
    privacy_tier_floor: PrivacyTier | None = None
    max_price_per_million_tokens: Mapping[str, PriceCap] = field(default_factory=dict)
    chat_fallbacks_allowed: bool = True
    configured: bool = False
    version: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    updated_by: str | None = None

    @property
    def restricts(self) -> bool:
        """False for a policy that changes nothing (the default): routing skips it."""
        return self.editable() != RoutePolicy(self.org_id).editable()

    def editable(self) -> PolicyFieldsView:
        """The editable fields in their API form (the audit's before/after)."""
        return {
            "provider_allow": list(self.provider_allow),
            "provider_deny": list(self.provider_deny),
            "allowed_regions": list(self.allowed_regions),
            "routing_mode": self.routing_mode,
            "privacy_tier_floor": self.privacy_tier_floor,
            "max_price_per_million_tokens": {
                op: cap.to_api() for op, cap in sorted(self.max_price_per_million_tokens.items())
            },
            "chat_fallbacks_allowed": self.chat_fallbacks_allowed,
        }

    def to_api(self) -> RoutePolicyView:
        return {
            "object": "routing_policy",
            "org_id": self.org_id,
            "configured": self.configured,
            "version": self.version,
            **self.editable(),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "updated_by": self.updated_by,
        }

    # -- the `policy` gate ---------------------------------------------------------------------
    def lane_failures(
        self, lane: Lane, provider: Provider, operations: Iterable[str], basis: PriceBasis
    ) -> list[GateFailure]:
        """[] when the policy admits the lane for these operations, else one `policy` failure
        naming the first broken rule (`details.rule`) and every broken one (`details.rules`)."""
        broken: list[tuple[str, str, dict[str, GateDetail]]] = []
        if provider.slug in self.provider_deny:
            broken.append(
                (
                    "provider_deny",
                    f"The org's route policy denies {provider.slug}.",
                    {"provider_deny": list(self.provider_deny)},
                )
            )
        if self.provider_allow and provider.slug not in self.provider_allow:
            broken.append(
                (
                    "provider_allow",
                    f"{provider.slug} is not in the org's route policy provider_allow list.",
                    {"provider_allow": list(self.provider_allow)},
                )
            )
        if self.allowed_regions and not set(self.allowed_regions).intersection(provider.regions):
            broken.append(
                (
                    "allowed_regions",
                    f"The provider runs in {', '.join(provider.regions)}; the org's route policy "
                    f"allows {', '.join(self.allowed_regions)}.",
                    {"allowed_regions": list(self.allowed_regions), "offered": list(provider.regions)},
                )
            )
        if self.privacy_tier_floor and not _meets_floor(provider.privacy_tiers, self.privacy_tier_floor):
            broken.append(
                (
                    "privacy_tier_floor",
                    f"The provider does not declare the {self.privacy_tier_floor} privacy tier "
                    "or a stricter one, the org's route policy floor.",
                    {"privacy_tier_floor": self.privacy_tier_floor, "offered": list(provider.privacy_tiers)},
                )
            )
        over = self._price_over(lane, operations, basis)
        if over:
            broken.append(
                (
                    "max_price_per_million_tokens",
                    "The lane's "
                    + ", ".join(
                        f"{op} {side} price {v['lane']} > {v['max']}" for (op, side), v in over.items()
                    )
                    + " USD per million tokens, the org's route policy maximum.",
                    {
                        "basis": basis,
                        "exceeded": {f"{op}.{side}": v for (op, side), v in over.items()},
                    },
                )
            )
        if not broken:
            return []
        rule, message, details = broken[0]
        return [GateFailure(POLICY_GATE, message, {"rule": rule, "rules": [b[0] for b in broken], **details})]

    def _price_over(
        self, lane: Lane, operations: Iterable[str], basis: PriceBasis
    ) -> dict[tuple[str, str], dict[str, str]]:
        price = lane.price
        unit = {
            "input": price.batch_input_per_mtok if basis == "batch" else price.input_per_mtok,
            "output": price.batch_output_per_mtok if basis == "batch" else price.output_per_mtok,
        }
        over: dict[tuple[str, str], dict[str, str]] = {}
        for operation in sorted(set(operations)):
            cap = self.max_price_per_million_tokens.get(operation)
            if cap is None:
                continue
            for side, bound in (("input", cap.input), ("output", cap.output)):
                if bound is not None and unit[side] > bound:
                    over[(operation, side)] = {"lane": format(unit[side], "f"), "max": format(bound, "f")}
        return over


class PolicyChangeView(AuditEntryView[PolicyFieldsView]):
    object: str
    version: int
    actor_key_id: str | None


class PolicyHistoryView(TypedDict):
    data: list[PolicyChangeView]
    next_cursor: str | None


@dataclass(frozen=True)
class PolicyChange(AuditEntry[PolicyFieldsView]):
    """One saved change of the policy (its history): an audit entry like the billing
    controls' (who, when, before/after), with the version it produced and the API key
    that made it, for a key."""

    version: int = 0
    actor_key_id: str | None = None

    def to_api(self) -> PolicyChangeView:
        return view_of(self, PolicyChangeView, object="routing_policy_change")


@dataclass(frozen=True)
class Narrowing:
    """What `combine` changed in the request, for the quote's `route_policy.narrowed`."""

    field: str
    requested: str | list[str] | None
    effective: str | list[str] | None
    rule: str

    def to_api(self) -> NarrowingView:
        return view_of(self, NarrowingView)


@dataclass(frozen=True)
class Combined:
    request: RouteRequest
    narrowed: tuple[Narrowing, ...] = ()


def combine(policy: RoutePolicy | None, request: RouteRequest, *, mode_given: bool) -> Combined:
    """The request as the policy lets it run: stricter wins, a request never widens the policy.

    `mode_given`: whether the request named its routing_mode (else the policy's default applies).
    Raises PolicyConflict (400 `policy_conflict`) when the request's regions all lie outside
    the policy's."""
    policy = in_force(policy)
    if policy is None:
        return Combined(request)
    narrowed: list[Narrowing] = []
    effective = request
    if policy.routing_mode and not mode_given and request.routing_mode != policy.routing_mode:
        effective = replace(effective, routing_mode=policy.routing_mode)
        narrowed.append(Narrowing("routing_mode", None, policy.routing_mode, "routing_mode"))
    floor = policy.privacy_tier_floor
    if floor and _rank(request.privacy_tier) < _rank(floor):
        effective = replace(effective, privacy_tier=floor)
        narrowed.append(Narrowing("privacy_tier", request.privacy_tier, floor, "privacy_tier_floor"))
    if request.regions and policy.allowed_regions:
        kept = tuple(r for r in request.regions if r in policy.allowed_regions)
        if not kept:
            raise PolicyConflict(
                f"The org's route policy allows only the regions {', '.join(policy.allowed_regions)}; "
                f"this request asks for {', '.join(request.regions)}.",
                details={
                    "field": "region",
                    "rule": "allowed_regions",
                    "allowed_regions": list(policy.allowed_regions),
                    "requested": list(request.regions),
                },
            )
        if kept != request.regions:
            effective = replace(effective, regions=kept)
            narrowed.append(Narrowing("regions", list(request.regions), list(kept), "allowed_regions"))
    return Combined(effective, tuple(narrowed))


def in_force(policy: RoutePolicy | None) -> RoutePolicy | None:
    """The policy when it restricts anything, else None (routing then skips the gate)."""
    return policy if policy is not None and policy.restricts else None


def guarded(
    guards: RoutingGuards, policy: RoutePolicy | None, *, basis: PriceBasis = "batch"
) -> RoutingGuards:
    """The service guards with the org's policy as the `policy` gate, judged on `basis` prices."""
    policy = in_force(policy)
    if policy is None and basis == guards.price_basis:
        return guards
    return replace(guards, policy=policy, price_basis=basis)


@dataclass(frozen=True)
class Admitted:
    """The lanes a path may use, and those the org's route policy excluded (with the rule)."""

    lanes: tuple[Lane, ...]
    rejected: tuple[PolicyRejectionView, ...] = ()


def admitted_lanes(
    lanes: Iterable[Lane],
    catalog: Catalog,
    guards: RoutingGuards,
    policy: RoutePolicy | None,
    *,
    operations: Iterable[str],
    basis: PriceBasis,
) -> Admitted:
    """The lanes, in their order, that the first gates of every route pass, for a path that
    picks lanes without routing a request (golden-set regression runs): the service's guards
    (provider enabled, launched, allowed; a lane they refuse is left out, not reported) and
    the org's policy as quotes and direct chat apply it (`guarded`, then the `policy` gate
    for `operations` on `basis` prices: provider allow and deny, regions, privacy tier
    floor, price caps), a lane it excludes reported with the first rule it broke."""
    guards = guarded(guards, policy, basis=basis)
    operations = tuple(operations)
    kept: list[Lane] = []
    rejected: list[PolicyRejectionView] = []
    for lane in lanes:
        provider = catalog.provider(lane.provider)
        if provider is None or not guards.admits(provider):
            continue
        failures = (
            guards.policy.lane_failures(lane, provider, operations, guards.price_basis)
            if guards.policy is not None
            else []
        )
        if failures:
            rule = str(failures[0].details.get("rule", ""))
            rejected.append({"lane_id": lane.lane_id, "code": POLICY_GATE, "rule": rule})
            continue
        kept.append(lane)
    return Admitted(tuple(kept), tuple(rejected))


# -- parsing an update -------------------------------------------------------------------------
def parse_update(body: Any, catalog: Catalog) -> UpdateRoutePolicy:
    """The change a body asks for, as domain values. Every problem is collected: InvalidRequest
    with `details.field` (the first) and `details.errors` ([{field, message}]). Unknown
    providers and regions are named; `null` resets a field to its default."""
    if not isinstance(body, Mapping):
        raise InvalidRequest("The body must be a JSON object.", details={"field": None, "errors": []})
    errors = [
        {"field": name, "message": f"Unknown field {name!r}."}
        for name in sorted(str(k) for k in body)
        if name not in EDITABLE_FIELDS and name not in READ_ONLY_FIELDS
    ]
    providers = {p.slug for p in catalog.providers}
    regions = {r for p in catalog.providers for r in p.regions}
    update = UpdateRoutePolicy(
        given=frozenset(name for name in EDITABLE_FIELDS if name in body),
        provider_allow=_names(body.get("provider_allow"), "provider_allow", providers, "provider", errors),
        provider_deny=_names(body.get("provider_deny"), "provider_deny", providers, "provider", errors),
        allowed_regions=_names(body.get("allowed_regions"), "allowed_regions", regions, "region", errors),
        routing_mode=_choice(body.get("routing_mode"), "routing_mode", ROUTING_MODES, errors),
        privacy_tier_floor=_choice(
            body.get("privacy_tier_floor"), "privacy_tier_floor", PRIVACY_TIERS, errors
        ),
        max_price_per_million_tokens=_price_caps(body.get("max_price_per_million_tokens"), errors),
        chat_fallbacks_allowed=_flag(body.get("chat_fallbacks_allowed"), errors),
        version=_version(body.get("version"), errors),
    )
    both = set(update.provider_allow) & set(update.provider_deny)
    if both:  # beside any other problem: every problem in one answer
        message = f"{', '.join(sorted(both))} cannot be both allowed and denied."
        errors.append({"field": "provider_deny", "message": message})
    if errors:
        first = errors[0]
        raise InvalidRequest(
            f"{first['field']}: {first['message']}", details={"field": first["field"], "errors": errors}
        )
    return update


def apply_update(current: RoutePolicy, update: UpdateRoutePolicy) -> RoutePolicy:
    """The policy with the given fields changed; a list pair that now overlaps (allow vs deny)
    is refused."""
    updated = replace(
        current, **{name: getattr(update, name) for name in EDITABLE_FIELDS if name in update.given}
    )
    both = set(updated.provider_allow) & set(updated.provider_deny)
    if both:
        raise InvalidRequest(
            f"provider_deny: {', '.join(sorted(both))} cannot be both allowed and denied.",
            details={
                "field": "provider_deny",
                "errors": [{"field": "provider_deny", "message": "overlaps provider_allow"}],
            },
        )
    return updated


def diff(before: RoutePolicy, after: RoutePolicy) -> tuple[PolicyFieldsView, PolicyFieldsView]:
    """Only the fields that changed, before and after (the audit entry's payload)."""
    old, new = before.editable(), after.editable()
    changed = [name for name in EDITABLE_FIELDS if old[name] != new[name]]
    return _only(old, changed), _only(new, changed)


def _only(view: PolicyFieldsView, names: list[PolicyField]) -> PolicyFieldsView:
    return cast(PolicyFieldsView, {name: view[name] for name in names})


def _rank(tier: str) -> int:
    return PRIVACY_TIERS.index(tier) if tier in PRIVACY_TIERS else 0


def _meets_floor(offered: Iterable[str], floor: str) -> bool:
    return any(_rank(tier) >= _rank(floor) for tier in offered)


def _names(
    value: Any, name: str, known: set[str], what: str, errors: list[dict[str, str]]
) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        errors.append({"field": name, "message": f"Must be a list of {what} names."})
        return ()
    if len(value) > MAX_LIST:
        errors.append({"field": name, "message": f"At most {MAX_LIST} {what}s."})
        return ()
    for index, item in enumerate(value):
        if item not in known:
            errors.append(
                {
                    "field": f"{name}[{index}]",
                    "message": f"Unknown {what} {item!r}; known: {', '.join(sorted(known))}.",
                }
            )
    return tuple(dict.fromkeys(value))


def _choice(
    value: Any, name: str, allowed: tuple[_Choice, ...], errors: list[dict[str, str]]
) -> _Choice | None:
    if value is None:
        return None
    for option in allowed:
        if option == value:
            return option
    errors.append({"field": name, "message": f"Must be one of {', '.join(allowed)}, or null."})
    return None


def _flag(value: Any, errors: list[dict[str, str]]) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        errors.append({"field": "chat_fallbacks_allowed", "message": "Must be true or false."})
        return True
    return value


def _version(value: Any, errors: list[dict[str, str]]) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        errors.append({"field": "version", "message": "Must be the whole-number version you read."})
        return None
    return value


def _price_caps(value: Any, errors: list[dict[str, str]]) -> dict[str, PriceCap]:
    name = "max_price_per_million_tokens"
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.append({"field": name, "message": "Must be an object keyed by operation."})
        return {}
    caps: dict[str, PriceCap] = {}
    for operation, raw in value.items():
        path = f"{name}.{operation}"
        if operation not in OPERATIONS:
            errors.append({"field": path, "message": f"Unknown operation; one of {', '.join(OPERATIONS)}."})
            continue
        if raw is None:
            continue
        if not isinstance(raw, Mapping) or not raw or set(raw).difference({"input", "output"}):
            errors.append({"field": path, "message": "Must be an object with input and/or output."})
            continue
        bounds = {side: _usd(raw.get(side), f"{path}.{side}", errors) for side in ("input", "output")}
        if bounds["input"] is not None or bounds["output"] is not None:
            caps[str(operation)] = PriceCap(**bounds)
    return caps


def _usd(value: Any, path: str, errors: list[dict[str, str]]) -> Decimal | None:
    """A plain USD number, or Money `{currency: usd, amount: "<decimal>"}`."""
    if value is None:
        return None
    raw = value
    if isinstance(value, Mapping):
        if not is_usd_money(value):
            message = 'Money must be {"currency": "usd", "amount": "<decimal>"}.'
            errors.append({"field": path, "message": message})
            return None
        raw = value["amount"]
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise InvalidOperation
        if isinstance(raw, str) and not is_amount_text(raw):  # "1e3": refused, never guessed
            raise InvalidOperation
        amount = Decimal(str(raw))
    except InvalidOperation:
        amount = Decimal(-1)
    if not amount.is_finite() or amount < 0 or amount > MAX_PRICE_CAP or amount != amount.quantize(_MICRO):
        message = f"Must be a USD amount from 0 to {MAX_PRICE_CAP}, at most 6 decimals."
        errors.append({"field": path, "message": message})
        return None
    return amount.normalize() if amount else Decimal(0)
