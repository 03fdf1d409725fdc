"""Quotes: preflight, route and price a set of items, and store a price-locked snapshot.

A quote is free: it reserves nothing and never fails because of a spending limit. The
snapshot it stores (versioned, with the locked per-lane prices) is what batch creation
reserves credits against. Items are read as a stream, so a 50,000-item file is quoted with
memory that does not grow with the item count.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.access import Principal, authorize
from batchroute.domain.canonical_json import ItemsDigest
from batchroute.domain.catalog import Catalog, WorkflowProduct
from batchroute.domain.item_profile import ItemProfile
from batchroute.domain.jsonl import LineError
from batchroute.domain.preflight import Issue, Preflight
from batchroute.domain.pricing import PriceBreakdown, estimate_price
from batchroute.domain.route_policy import (
    Narrowing,
    PolicyConflict,
    RoutePolicy,
    combine,
    guarded,
    in_force,
)
from batchroute.domain.routing import RoutePlan, route
from batchroute.domain.routing_gates import GateFailure, RouteRequest, RoutingGuards
from batchroute.errors import Conflict, Forbidden, InvalidRequest, NotFound
from batchroute.ids import new_id
from batchroute.services.batches.ports import WebhookUrlRules
from batchroute.services.billing.ports import Balances
from batchroute.services.catalog.ports import LiveStates
from batchroute.services.presets.resolution import PresetExpander, Resolver
from batchroute.services.routing.ports import OrgPolicies

QUOTE_TTL = timedelta(minutes=10)
SNAPSHOT_VERSION = 1

ItemSource = Iterable[tuple[int, Mapping[str, Any] | LineError]]


class Reopenable:
    """Items that can be read again: the first iteration gives the source opened already
    (so a missing file is reported where it always was; None: opened on that first read, for
    a file whose item profile may spare reading it), a later one opens it anew. The
    preflight checks `customer_item_id` uniqueness of such a source by hashes only (8 B an
    item, domain/item_ids.py) and reads it a second time only if an id may repeat."""

    def __init__(self, opened: ItemSource | None, reopen: Callable[[], ItemSource]) -> None:
        self._opened: ItemSource | None = opened
        self._reopen = reopen

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any] | LineError]]:
        opened, self._opened = self._opened, None
        return iter(opened if opened is not None else self._reopen())


class SnapshotStore(Protocol):
    def put(self, snapshot: dict[str, Any]) -> None: ...

    def get(self, quote_id: str) -> dict[str, Any] | None: ...


class ItemSink(Protocol):
    """Keeps a quote's inline items (S3) so a batch can later be created from the quote alone."""

    def save(self, quote_id: str, lines: Iterator[bytes]) -> str: ...


class FileItems(Protocol):
    def open_items(self, org_id: str, file_id: str) -> Iterator[tuple[int, dict[str, Any] | LineError]]: ...

    def file_ready(self, org_id: str, file_id: str) -> object: ...

    def item_profile(self, org_id: str, file_id: str) -> ItemProfile | None: ...


@dataclass(frozen=True)
class PlannedQuote:
    request: RouteRequest
    plan: RoutePlan
    price: PriceBreakdown
    item_count: int
    items_digest: str
    warnings: list[dict[str, Any]]
    policy: RoutePolicy | None = None  # the policy in force, if it restricts anything
    narrowed: tuple[Narrowing, ...] = field(default_factory=tuple)
    policy_version: int = 0  # the stored policy's version (0: never saved)

    def route_policy_api(self) -> dict[str, Any] | None:
        """The org's route policy this plan was held to (docs/routing-policy.md), or None."""
        if self.policy is None:
            return None
        return {"version": self.policy.version, "narrowed": [n.to_api() for n in self.narrowed]}


def items_digest(items: Iterable[Mapping[str, Any]]) -> str:
    digest = ItemsDigest()
    for item in items:
        digest.add(item)
    return digest.hexdigest()


class QuoteService:
    def __init__(
        self,
        *,
        catalog: Catalog,
        live: LiveStates,
        snapshots: SnapshotStore,
        item_sink: ItemSink,
        files: FileItems,
        balances: Balances,
        settings: WebhookUrlRules,
        guards: RoutingGuards,
        clock: Clock,
        resolve: Callable[[str, int], list[str]] | None = None,
        policies: OrgPolicies | None = None,
        presets: Resolver | None = None,
    ) -> None:
        self.catalog = catalog
        self.live = live
        self.snapshots = snapshots
        self.item_sink = item_sink
        self.files = files
        self.balances = balances
        self.settings = settings
        self.guards = guards
        self.clock = clock
        self.resolve = resolve
        self.policies = policies
        self.presets = presets  # expands items and bodies naming a preset (docs/presets.md)

    def reading(self, files: FileItems) -> QuoteService:
        """The same service reading `input_file_id`s from `files` (the compat surface reads
        the vendor's rows, converted to items)."""
        other = copy.copy(self)
        other.files = files
        return other

    # -- the pipeline both quotes and batch creation use -------------------------------------
    def read_items(
        self,
        body: Mapping[str, Any],
        items: ItemSource,
        *,
        on_item: Callable[[Mapping[str, Any], bytes], None] | None = None,
        request: RouteRequest | None = None,
        guards: RoutingGuards | None = None,
    ) -> tuple[Preflight, int, str]:
        """Every item through the preflight, in order: the preflight (not yet routed), the item
        count and the items digest. Quotes, batch create and the Intake step all read items
        here, so whatever the preflight applies to an item applies on every path.

        A `Reopenable` source (an input file) is read with compact id checks; when an id may
        repeat it is read once more, with the exact check and without `on_item` (which saw
        every item in the first pass), so the duplicates are named as for any source."""
        request = request if request is not None else RouteRequest.from_api(body)
        guards = guards or self.guards
        compact = isinstance(items, Reopenable)
        preflight, count, digest = self._read(request, guards, items, on_item, compact_ids=compact)
        if preflight.ids_may_repeat():
            preflight, _, _ = self._read(request, guards, items, None, compact_ids=False)
        if count == 0:
            raise InvalidRequest("Give at least one item.", code="no_items")
        return preflight, count, digest

    def _read(
        self,
        request: RouteRequest,
        guards: RoutingGuards,
        items: ItemSource,
        on_item: Callable[[Mapping[str, Any], bytes], None] | None,
        *,
        compact_ids: bool,
    ) -> tuple[Preflight, int, str]:
        preflight = Preflight(self.catalog, request=request, guards=guards, compact_ids=compact_ids)
        digest = ItemsDigest()
        count = 0
        for index, item in items:
            if isinstance(item, LineError):
                preflight.add_line_error(item.line_no, item.message, reason=item.code)
                continue
            if isinstance(item, Issue):  # an item naming a preset that cannot be resolved
                preflight.add_issue(item)
                count += 1
                continue
            preflight.add_item(count, item, line=index if index != count else None)
            line = digest.add(item)
            if on_item is not None and isinstance(item, Mapping):
                on_item(item, line)  # a non-object item is a preflight error: nothing to keep
            count += 1
        return preflight, count, digest.hexdigest()

    def plan(
        self,
        body: Mapping[str, Any],
        items: ItemSource,
        *,
        fee_kind: str = "batch",
        on_item: Callable[[Mapping[str, Any], bytes], None] | None = None,
        org_id: str | None = None,
        excluded_lanes: Mapping[str, GateFailure] | None = None,
        profile: ItemProfile | None = None,
    ) -> PlannedQuote:
        """Preflight every item, route every model group, price the plan; raises the 400
        `batch_preflight_failed` with every issue found. With `org_id`, the org's route
        policy applies (combined with the request's constraints, and as the `policy` gate);
        `excluded_lanes` are a schedule's regression exclusions (docs/schedules.md).
        `profile` (`file_profile`): the input file's item profile, which stands in for reading
        `items` when every item would pass its lane checks (`Preflight.from_profile`)."""
        policy = self.policies.current(org_id) if self.policies is not None and org_id else None
        mode_given = body.get("routing_mode") is not None
        combined = combine(policy, RouteRequest.from_api(body), mode_given=mode_given)
        request = combined.request
        if excluded_lanes:
            request = replace(request, excluded_lanes=dict(excluded_lanes))
        guards = guarded(self.guards, policy)
        profiled = (
            Preflight.from_profile(profile, self.catalog, request=request, guards=guards)
            if profile is not None and on_item is None
            else None
        )
        if profiled is not None and profile is not None:  # no item read: docs/files.md, Item profile
            preflight, count, items_digest_ = profiled, profile.item_count, profile.digest
        else:
            preflight, count, items_digest_ = self.read_items(
                body, items, on_item=on_item, request=request, guards=guards
            )
        if body.get("webhook") is not None:
            preflight.check_webhook(
                body.get("webhook"),
                resolve=self.resolve,
                allow_loopback=self.settings.allow_loopback_webhooks,
                environment=self.settings.environment,
            )
        plan = route(
            preflight.groups,
            self.catalog,
            live=self.live.live_states(),
            request=request,
            now=self.clock.now(),
            guards=guards,
        )
        preflight.add_route_plan(plan)
        result = preflight.result()
        result.raise_if_failed()
        price = estimate_price(plan, self.catalog.fees, fee_kind=fee_kind)  # type: ignore[arg-type]
        return PlannedQuote(
            request,
            plan,
            price,
            count,
            items_digest_,
            list(result.to_api()["warnings"]),
            policy=in_force(policy),
            narrowed=combined.narrowed,
            policy_version=policy.version if policy else 0,
        )

    # -- POST /v1/quotes/model ----------------------------------------------------------------
    def quote_model(self, principal: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        authorize(principal, "batches:create")
        body = self.with_preset(principal, body)
        quote_id = new_id("qlock", self.clock.now())
        profile = self.file_profile(principal, body)
        source, items = self.items_source(principal, body, open_now=profile is None)
        lines: list[bytes] = []
        keep = _collector(lines) if source["kind"] == "inline" else None
        planned = self.plan(body, items, on_item=keep, org_id=principal.org_id, profile=profile)
        if source["kind"] == "inline":
            source["s3_key"] = self.item_sink.save(quote_id, iter(lines))
        source["digest"] = planned.items_digest
        return self._store(principal, quote_id, "model", planned, source, extra={})

    # -- POST /v1/quotes/workflow -------------------------------------------------------------
    def quote_workflow(self, principal: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        authorize(principal, "batches:create")
        product = self._product(body.get("product"))
        inputs = body.get("inputs")
        if not isinstance(inputs, list) or not inputs:
            raise InvalidRequest(
                "`inputs` must be a non-empty list of product inputs.",
                code="invalid_request",
                details={"field": "inputs"},
            )
        check_workflow_inputs(product, inputs)
        quote_id = new_id("qlock", self.clock.now())
        best: tuple[PlannedQuote, str, list[bytes]] | None = None
        considered: list[dict[str, Any]] = []
        for model_id in self._models_for(product):
            lines: list[bytes] = []
            items = ((i, workflow_item(product, model_id, i, raw)) for i, raw in enumerate(inputs))
            try:
                planned = self.plan(
                    body, items, fee_kind="workflow", on_item=_collector(lines), org_id=principal.org_id
                )
            except PolicyConflict:
                raise
            except InvalidRequest as exc:
                considered.append({"model": model_id, "eligible": False, "reason": exc.message})
                continue
            considered.append(
                {"model": model_id, "eligible": True, "estimated_total": planned.price.total.to_api()}
            )
            if best is None or planned.price.total < best[0].price.total:
                best = (planned, model_id, lines)
        if best is None:
            raise InvalidRequest(
                f"No model can fulfil the {product.slug} contract under these constraints.",
                code="batch_preflight_failed",
                details={
                    "preflight": {
                        "ok": False,
                        "errors": [
                            {
                                "category": "routing",
                                "code": "no_eligible_lane",
                                "message": "No lane of any model satisfies the workflow's route policy.",
                                "action": "Relax routing_mode, privacy_tier or required_tools.",
                            }
                        ],
                        "warnings": [],
                    },
                    "models_considered": considered,
                },
            )
        planned, model_id, lines = best
        source = {
            "kind": "inline",
            "s3_key": self.item_sink.save(quote_id, iter(lines)),
            "digest": planned.items_digest,
        }
        extra = {"workflow_product": product.slug, "chosen_model": model_id, "models_considered": considered}
        return self._store(principal, quote_id, "workflow", planned, source, extra=extra)

    # -- batch creation reads quotes back ------------------------------------------------------
    def snapshot(self, principal: Principal, quote_id: str) -> dict[str, Any]:
        snapshot = self.snapshots.get(quote_id)
        if snapshot is None:
            raise NotFound("No such quote.", code="quote_not_found")
        if snapshot["org_id"] != principal.org_id:
            raise Forbidden("This quote belongs to another organization.", code="forbidden")
        if snapshot["expires_at"] <= isoformat(self.clock.now()):
            raise Conflict(
                "The quote has expired; request a new one.",
                code="quote_expired",
                details={"expired_at": snapshot["expires_at"]},
            )
        return snapshot

    def check_policy_unchanged(self, principal: Principal, snapshot: Mapping[str, Any]) -> None:
        """A quote is honoured only under the route policy it was made under: a batch created
        from a quote after the policy changed is refused (409 `quote_policy_changed`)."""
        if self.policies is None:
            return
        policy = self.policies.current(principal.org_id)
        current = policy.version if policy else 0
        quoted = int(snapshot.get("policy_version") or 0)
        if quoted != current:
            raise Conflict(
                "The org's route policy changed since this quote; quote again.",
                code="quote_policy_changed",
                details={"quoted_policy_version": quoted, "policy_version": current},
            )

    # -- helpers -------------------------------------------------------------------------------
    def items_source(
        self, principal: Principal, body: Mapping[str, Any], *, open_now: bool = True
    ) -> tuple[dict[str, Any], ItemSource]:
        """The body's items, or its input file's (`open_now=False`: a file whose item profile
        may spare reading it is opened on its first read, not here)."""
        has_items, file_id = body.get("items") is not None, body.get("input_file_id")
        if has_items == bool(file_id):
            raise InvalidRequest(
                "Give exactly one of `items` or `input_file_id`.",
                code="invalid_request",
                details={"field": "items"},
            )
        if file_id:
            if not isinstance(file_id, str):
                raise InvalidRequest(
                    "`input_file_id` must be a file id.",
                    code="invalid_request",
                    details={"field": "input_file_id"},
                )
            items = self.file_items(principal.org_id, body, file_id, open_now=open_now)
            return {"kind": "file", "file_id": file_id}, items
        raw = body["items"]
        if not isinstance(raw, list):
            raise InvalidRequest(
                "`items` must be a list.", code="invalid_request", details={"field": "items"}
            )
        return {"kind": "inline"}, self.expand_items(principal.org_id, body, enumerate(raw))

    def file_profile(self, principal: Principal, body: Mapping[str, Any]) -> ItemProfile | None:
        """The item profile of the body's input file (checked ready, as reading it would), when
        it may stand in for the file's items: nothing in the body rewrites them (a batch-wide
        `preset` fills every item), and the file has a usable profile (docs/files.md)."""
        file_id = body.get("input_file_id")
        if body.get("items") is not None or body.get("preset") is not None:
            return None  # the items are read (and the file checked) as they always were
        if not isinstance(file_id, str) or not file_id:
            return None
        return self.files.item_profile(principal.org_id, file_id)

    def with_preset(self, principal: Principal, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """A body naming a batch-wide `preset`: its routing settings fill the body's own."""
        if self.presets is None or body.get("preset") is None:
            return body
        return PresetExpander(self.presets, principal.org_id).request(body)

    def file_items(
        self, org_id: str, body: Mapping[str, Any], file_id: str, *, open_now: bool = True
    ) -> Reopenable:
        """An input file's items, presets applied, opened now (or, `open_now=False`, on the
        first read) and again on demand."""

        def opened() -> ItemSource:
            return self.expand_items(org_id, body, self.files.open_items(org_id, file_id))

        return Reopenable(opened() if open_now else None, opened)

    def expand_items(self, org_id: str, body: Mapping[str, Any], items: ItemSource) -> ItemSource:
        """The items with the presets they (or the body) name applied, each loaded once."""
        if self.presets is None:
            return items
        return PresetExpander(self.presets, org_id).items(items, default=body.get("preset"))

    def _store(
        self,
        principal: Principal,
        quote_id: str,
        kind: str,
        planned: PlannedQuote,
        source: dict[str, Any],
        *,
        extra: dict[str, Any],
    ) -> dict[str, Any]:
        now = self.clock.now()
        plan_api = planned.plan.to_api()
        snapshot = {
            "quote_id": quote_id,
            "org_id": principal.org_id,
            "version": SNAPSHOT_VERSION,
            "kind": kind,
            "created_at": isoformat(now),
            "expires_at": isoformat(now + QUOTE_TTL),
            "catalog_version": self.catalog.version,
            "pricing_updated_at": self.catalog.pricing_updated_at,
            "item_count": planned.item_count,
            "items": source,
            "routing": plan_api,
            "pricing_estimate": planned.price.to_api(),
            "total_micros": planned.price.total.micros,
            "policy_version": planned.policy_version,
            **extra,
        }
        self.snapshots.put(snapshot)
        available = self.balances.balance(principal.org_id)
        return {
            "quote_id": quote_id,
            "object": "quote",
            "version": SNAPSHOT_VERSION,
            "kind": kind,
            "created_at": snapshot["created_at"],
            "expires_at": snapshot["expires_at"],
            "item_count": planned.item_count,
            "routing_mode": planned.request.routing_mode,
            "sla_tier": planned.request.sla_tier,
            "effective_sla_tier": "standard",
            "privacy_tier": planned.request.privacy_tier,
            "catalog_version": self.catalog.version,
            "pricing_updated_at": self.catalog.pricing_updated_at,
            "pricing_estimate": planned.price.to_api(),
            "quote_lanes": quote_lanes(plan_api),
            "customer_explanation": planned.plan.explanation(),
            "funding": {"available": available.to_api(), "sufficient": available >= planned.price.total},
            "preflight": {"ok": True, "errors": [], "warnings": planned.warnings},
            "route_policy": planned.route_policy_api(),
            **extra,
        }

    def _product(self, slug: object) -> WorkflowProduct:
        product = next((p for p in self.catalog.workflow_products if p.slug == slug), None)
        if product is None:
            raise NotFound("No such workflow product.", code="workflow_product_not_found")
        return product

    def _models_for(self, product: WorkflowProduct) -> list[str]:
        needed = set(product.route_policy.get("required_capabilities", []) or [])  # type: ignore[call-overload]
        return [
            model.id
            for model in self.catalog.models
            if product.operation in model.operations and needed <= set(model.runtime_capabilities)
        ]


def _collector(lines: list[bytes]) -> Callable[[Mapping[str, Any], bytes], None]:
    def collect(_item: Mapping[str, Any], line: bytes) -> None:
        lines.append(line)

    return collect


def quote_lanes(plan_api: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every lane considered, flat: selected ones first, then each rejected one with its reason."""
    selected = [lane for group in plan_api["groups"] for lane in group["selected_lanes"]]
    rejected = [lane for group in plan_api["groups"] for lane in group["rejected_lanes"]]
    return selected + rejected


def workflow_item(product: WorkflowProduct, model_id: str, index: int, raw: object) -> dict[str, Any]:
    """A workflow input as a batch item: the contract's instructions, the input as JSON, and the
    output schema as a structured-output requirement."""
    custom_id = (
        raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else f"input-{index}"
    )
    instructions = (
        f"You perform the '{product.title}' workflow. {product.summary} "
        "Answer with JSON only, matching the output schema."
    )
    return {
        "customer_item_id": custom_id,
        "operation": product.operation,
        "model": model_id,
        "input": {
            "messages": [
                {"role": "system", "content": instructions},
                {"role": "user", "content": json.dumps(raw, sort_keys=True)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": product.slug.replace("-", "_"), "schema": product.output_schema},
            },
        },
        "max_output_tokens": product.typical_output_tokens * 2,
    }


def check_workflow_inputs(product: WorkflowProduct, inputs: list[Any]) -> None:
    """Each input must be an object carrying the properties the product's input schema requires."""
    listed = product.input_schema.get("required")
    required = [str(name) for name in listed] if isinstance(listed, list) else []
    errors = []
    for index, raw in enumerate(inputs):
        missing = required if not isinstance(raw, dict) else [name for name in required if name not in raw]
        if missing:
            errors.append(
                {
                    "category": "jsonl_shape",
                    "code": "missing_field",
                    "message": f"Input {index} lacks {', '.join(missing)} required by {product.slug}.",
                    "action": "Send inputs that match the product's input_schema.",
                    "path": f"inputs[{index}]",
                }
            )
    if errors:
        raise InvalidRequest(
            "The workflow inputs do not match the product's input schema.",
            code="batch_preflight_failed",
            details={"preflight": {"ok": False, "errors": errors[:100], "warnings": []}},
        )
