"""Quotes: preflight, route and price a set of items, and store a price-locked snapshot.

A quote is free: it reserves nothing and never fails because of a spending limit. The
snapshot it stores (versioned, with the locked per-lane prices) is what batch creation
reserves credits against. Items are read as a stream, so a 50,000-item file is quoted with
memory that does not grow with the item count.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Literal, Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.canonical_json import ItemsDigest
from batchroute.domain.batches.files import FileRecord
from batchroute.domain.batches.item_profile import ItemProfile
from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.preflight import Issue, IssueView, Preflight, PreflightFailed
from batchroute.domain.batches.quote_snapshot import (
    ModelConsideredView,
    QuotedItems,
    QuoteKind,
    QuoteSnapshot,
    WorkflowChoice,
)
from batchroute.domain.catalog.catalog import Catalog, WorkflowProduct
from batchroute.domain.catalog.pricing import FeeKind, PriceBreakdown, PriceEstimateView, estimate_price
from batchroute.domain.routing.engine import (
    RejectedLaneView,
    RoutePlan,
    RoutePlanView,
    SelectedLaneView,
    route,
)
from batchroute.domain.routing.gates import Exclusions, RouteRequest, RoutingFields, RoutingGuards
from batchroute.domain.routing.items import MAX_CUSTOMER_ITEM_ID
from batchroute.domain.routing.lanes import contract_exclusions
from batchroute.domain.routing.policy import (
    Narrowing,
    NarrowingView,
    PolicyConflict,
    RoutePolicy,
    combine,
    guarded,
    in_force,
)
from batchroute.errors import Conflict, Forbidden, InvalidRequest, NotFound
from batchroute.ids import new_id
from batchroute.money import Money, MoneyView
from batchroute.services.batches.commands import QuoteRequest, QuoteWorkflow, Routing
from batchroute.services.billing.ports import Balances
from batchroute.services.catalog.ports import LiveStates
from batchroute.services.presets.resolution import PresetExpander, Resolver
from batchroute.services.routing.ports import OrgPolicies

QUOTE_TTL = timedelta(minutes=10)
SNAPSHOT_VERSION = 1

ItemSource = Iterable[tuple[int, Mapping[str, Any] | LineError]]


@dataclass(eq=False)
class Reopenable:
    """Items that can be read again: the first iteration gives the source opened already
    (so a missing file is reported where it always was; None: opened on that first read, for
    a file whose item profile may spare reading it), a later one opens it anew. The
    preflight checks `customer_item_id` uniqueness of such a source by hashes only (8 B an
    item, domain/batches/item_ids.py) and reads it a second time only if an id may repeat."""

    opened: ItemSource | None
    reopen: Callable[[], ItemSource]

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any] | LineError]]:
        opened, self.opened = self.opened, None
        return iter(opened if opened is not None else self.reopen())


class OnItem(Protocol):
    """Sees each item that passed into the preflight, with its canonical line (the digest's)."""

    def __call__(self, item: Mapping[str, Any], line: bytes, /) -> None: ...


class SnapshotStore(Protocol):
    def put(self, snapshot: QuoteSnapshot) -> None: ...

    def get(self, quote_id: str) -> QuoteSnapshot | None: ...


class ItemSink(Protocol):
    """Keeps a quote's inline items (S3) so a batch can later be created from the quote alone."""

    def save(self, quote_id: str, lines: Iterator[bytes]) -> str: ...


class LimitWarnings(Protocol):
    """services/billing/funding.py:LimitPreview: would creating the batch pass a hard limit?"""

    def limit_warning(self, org_id: str, estimate: Money) -> IssueView | None: ...


class FileItems(Protocol):
    def open_items(self, org_id: str, file_id: str) -> Iterator[tuple[int, dict[str, Any] | LineError]]: ...

    def file_ready(self, org_id: str, file_id: str) -> FileRecord: ...

    def item_profile(self, org_id: str, file_id: str) -> ItemProfile | None: ...


@dataclass(frozen=True)
class PlannedQuote:
    request: RouteRequest
    plan: RoutePlan
    price: PriceBreakdown
    item_count: int
    items_digest: str
    warnings: list[IssueView]
    policy: RoutePolicy | None = None  # the policy in force, if it restricts anything
    narrowed: tuple[Narrowing, ...] = field(default_factory=tuple)
    policy_version: int = 0  # the stored policy's version (0: never saved)

    def route_policy_api(self) -> AppliedPolicyView | None:
        """The org's route policy this plan was held to (docs/routing-policy.md), or None."""
        if self.policy is None:
            return None
        return {"version": self.policy.version, "narrowed": [n.to_api() for n in self.narrowed]}


class AppliedPolicyView(TypedDict):
    """The org's route policy a quote was held to: its version and what it narrowed."""

    version: int
    narrowed: list[NarrowingView]


class FundingView(TypedDict):
    available: MoneyView
    sufficient: bool


class QuotePreflightView(TypedDict):
    ok: Literal[True]
    errors: list[IssueView]
    warnings: list[IssueView]


class QuoteView(WorkflowChoice):
    """A quote as the API shows it; a workflow quote adds its product answer."""

    quote_id: str
    object: Literal["quote"]
    version: int
    kind: QuoteKind
    created_at: str
    expires_at: str
    item_count: int
    routing_mode: str
    sla_tier: str
    effective_sla_tier: Literal["standard"]
    privacy_tier: str
    catalog_version: str
    pricing_updated_at: str | None
    pricing_estimate: PriceEstimateView
    quote_lanes: list[SelectedLaneView | RejectedLaneView]
    customer_explanation: str
    funding: FundingView
    preflight: QuotePreflightView
    route_policy: AppliedPolicyView | None


@dataclass(frozen=True, slots=True)
class ModelConsidered:
    """A model a workflow quote planned: eligible, with its estimated total, or not, and why."""

    model: str
    estimated_total: Money | None = None
    reason: str | None = None

    def to_api(self) -> ModelConsideredView:
        if self.estimated_total is None:
            return {"model": self.model, "eligible": False, "reason": self.reason}
        return {"model": self.model, "eligible": True, "estimated_total": self.estimated_total.to_api()}


def items_digest(items: Iterable[Mapping[str, Any]]) -> str:
    digest = ItemsDigest()
    for item in items:
        digest.add(item)
    return digest.hexdigest()


@dataclass(eq=False, kw_only=True)
class QuoteService:
    catalog: Catalog
    live: LiveStates
    snapshots: SnapshotStore
    item_sink: ItemSink
    files: FileItems
    balances: Balances
    guards: RoutingGuards
    clock: Clock
    # The org's route policy: required, so that no wiring quotes around it.
    policies: OrgPolicies
    presets: Resolver  # a `preset` the request or an item names is applied, never ignored
    limits: LimitWarnings  # a quote that would pass a spending limit says so
    check_url: Callable[[str], object]  # the SSRF guard of a webhook's URL

    def reading(self, files: FileItems) -> QuoteService:
        """The same service reading `input_file_id`s from `files` (the compat surface reads
        the vendor's rows, converted to items)."""
        other = copy.copy(self)
        other.files = files
        return other

    # -- the one preflight step of quotes, batch create and the Intake step ----------------
    def read_items(
        self,
        options: RoutingFields,
        items: ItemSource,
        *,
        on_item: OnItem | None = None,
    ) -> tuple[Preflight, int, str]:
        """The Intake step's reading of an input file, with the routing options stored on
        the batch at create (services/workflow/intake.py)."""
        return self.preflight_items(RouteRequest.from_api(options), self.guards, items, on_item)

    def preflight_items(
        self,
        request: RouteRequest,
        guards: RoutingGuards,
        items: ItemSource,
        on_item: OnItem | None = None,
    ) -> tuple[Preflight, int, str]:
        """Every item through the preflight, in order: the preflight (not yet routed), the item
        count and the items digest. Quotes, batch create and the Intake step all read items
        here, so whatever the preflight applies to an item applies on every path.

        A `Reopenable` source (an input file) is read with compact id checks; when an id may
        repeat it is read once more, with the exact check and without `on_item` (which saw
        every item in the first pass), so the duplicates are named as for any source."""
        compact = isinstance(items, Reopenable)
        preflight, count, digest = self._read(request, guards, items, on_item, compact_ids=compact)
        if preflight.ids_may_repeat():
            preflight, _, _ = self._read(request, guards, items, None, compact_ids=False)
        if count == 0:  # the preflight's answer (`empty_batch`, or what made every line fail)
            preflight.result().raise_if_failed()
            raise InvalidRequest("Give at least one item.", code="no_items")
        return preflight, count, digest

    def _read(
        self,
        request: RouteRequest,
        guards: RoutingGuards,
        items: ItemSource,
        on_item: OnItem | None,
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

    def price(
        self,
        principal: Principal,
        quote: QuoteRequest,
        *,
        on_item: OnItem | None = None,
        excluded_lanes: Exclusions | None = None,
        fee_kind: FeeKind = "batch",
    ) -> tuple[QuotedItems, PlannedQuote]:
        """The one pass of a quote and of a batch priced without one: the items (inline, or
        the input file's, from its item profile when it may stand in for them), through the
        preflight, routed and priced (at the fee of `fee_kind`: a workflow product's retry is
        priced as the product). `quote` has its batch-wide preset applied already."""
        profile = self.file_profile(principal, quote) if on_item is None else None
        source, items = self.items_source(principal, quote, open_now=profile is None)
        planned = self.plan(
            quote,
            items,
            fee_kind=fee_kind,
            on_item=on_item,
            org_id=principal.org_id,
            excluded_lanes=excluded_lanes,
            profile=profile,
        )
        return replace(source, digest=planned.items_digest), planned

    def plan(
        self,
        quote: QuoteRequest,
        items: ItemSource,
        *,
        fee_kind: FeeKind = "batch",
        on_item: OnItem | None = None,
        org_id: str | None = None,
        excluded_lanes: Exclusions | None = None,
        profile: ItemProfile | None = None,
    ) -> PlannedQuote:
        """Preflight every item, route every model group, price the plan; raises the 400
        `batch_preflight_failed` with every issue found. With `org_id`, the org's route
        policy applies (combined with the request's constraints, and as the `policy` gate);
        `excluded_lanes`: lanes the service rules out (regression, a workflow's contract).
        `profile` (`file_profile`): the input file's item profile, which stands in for reading
        `items` when every item would pass its lane checks (`Preflight.from_profile`)."""
        policy = self.policies.current(org_id) if org_id else None
        routing = quote.routing
        combined = combine(policy, routing.excluding(excluded_lanes), mode_given=routing.mode_given)
        request, guards = combined.request, guarded(self.guards, policy)
        profiled = (
            Preflight.from_profile(profile, self.catalog, request=request, guards=guards)
            if profile is not None and on_item is None
            else None
        )
        if profiled is not None and profile is not None:  # no item read: docs/files.md, Item profile
            preflight, count, digest = profiled, profile.item_count, profile.digest
        else:
            preflight, count, digest = self.preflight_items(request, guards, items, on_item)
        if quote.webhook is not None:
            preflight.check_webhook(quote.webhook, check_url=self.check_url)
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
        price = estimate_price(plan, self.catalog.fees, fee_kind=fee_kind)
        return PlannedQuote(
            request,
            plan,
            price,
            count,
            digest,
            list(result.to_api()["warnings"]),
            policy=in_force(policy),
            narrowed=combined.narrowed,
            policy_version=policy.version if policy else 0,
        )

    # -- POST /v1/quotes/model ----------------------------------------------------------------
    def quote_model(self, principal: Principal, quote: QuoteRequest) -> QuoteView:
        authorize(principal, "batches:create")
        quote = self.with_preset(principal, quote)
        quote_id = new_id("qlock", self.clock.now())
        lines: list[bytes] = []
        keep = _collector(lines) if quote.items is not None else None
        source, planned = self.price(principal, quote, on_item=keep)
        if source.kind == "inline":
            source = replace(source, s3_key=self.item_sink.save(quote_id, iter(lines)))
        return self._store(principal, quote_id, "model", planned, source, quote.constraints(), workflow={})

    # -- POST /v1/quotes/workflow -------------------------------------------------------------
    def quote_workflow(self, principal: Principal, command: QuoteWorkflow) -> QuoteView:
        authorize(principal, "batches:create")
        product = self._product(command.product)
        check_workflow_inputs(product, command.inputs)
        quote_id = new_id("qlock", self.clock.now())
        refused: list[IssueView] = []  # what the first model refused the inputs for, routing aside
        outside = contract_exclusions(self.catalog, product)
        best, considered = self._cheapest_model(principal, product, command, outside, refused)
        if best is None:
            raise _no_model_fits(product, considered, refused)
        planned, model_id, lines = best
        source = QuotedItems(
            "inline", planned.items_digest, s3_key=self.item_sink.save(quote_id, iter(lines))
        )
        workflow: WorkflowChoice = {
            "workflow_product": product.slug,
            "chosen_model": model_id,
            "models_considered": [model.to_api() for model in considered],
        }
        return self._store(
            principal, quote_id, "workflow", planned, source, command.routing.fields(), workflow=workflow
        )

    def _cheapest_model(
        self,
        principal: Principal,
        product: WorkflowProduct,
        command: QuoteWorkflow,
        outside: Exclusions,
        refused: list[IssueView],
    ) -> tuple[tuple[PlannedQuote, str, list[bytes]] | None, list[ModelConsidered]]:
        """Each model with a lane inside the product's contract, planned with the lanes
        `outside` it excluded (each with the rule it breaks); the cheapest eligible one. A
        model's preflight issues other than routing ones (the inputs') go to `refused`."""
        best: tuple[PlannedQuote, str, list[bytes]] | None = None
        considered: list[ModelConsidered] = []
        for model_id in self._models_for(outside):
            lines: list[bytes] = []
            items = tuple(workflow_item(product, model_id, i, raw) for i, raw in enumerate(command.inputs))
            try:
                planned = self.plan(
                    command.as_quote(items),
                    enumerate(items),
                    fee_kind="workflow",
                    on_item=_collector(lines),
                    org_id=principal.org_id,
                    excluded_lanes=outside,
                )
            except PolicyConflict:
                raise
            except InvalidRequest as exc:
                issues = _issues_of(exc)
                considered.append(
                    ModelConsidered(model_id, reason=issues[0]["message"] if issues else exc.message)
                )
                if not refused:
                    refused.extend(_as_input(issue) for issue in issues if issue["category"] != "routing")
                continue
            considered.append(ModelConsidered(model_id, estimated_total=planned.price.total))
            if best is None or planned.price.total < best[0].price.total:
                best = (planned, model_id, lines)
        return best, considered

    # -- batch creation reads quotes back ------------------------------------------------------
    def quoted(self, principal: Principal, quote_id: str) -> QuoteSnapshot:
        """The quote a batch is created from: the org's, not expired, and made under the route
        policy in force (a batch from it is refused, 409 `quote_policy_changed`, once the
        policy moved on)."""
        snapshot = self.snapshot(principal, quote_id)
        self._check_policy_unchanged(principal, snapshot)
        return snapshot

    def snapshot(self, principal: Principal, quote_id: str) -> QuoteSnapshot:
        snapshot = self.snapshots.get(quote_id)
        if snapshot is None:
            raise NotFound("No such quote.", code="quote_not_found")
        if snapshot.org_id != principal.org_id:
            raise Forbidden("This quote belongs to another organization.", code="forbidden")
        if snapshot.expires_at <= isoformat(self.clock.now()):
            raise Conflict(
                "The quote has expired; request a new one.",
                code="quote_expired",
                details={"expired_at": snapshot.expires_at},
            )
        return snapshot

    def _check_policy_unchanged(self, principal: Principal, snapshot: QuoteSnapshot) -> None:
        policy = self.policies.current(principal.org_id)
        current = policy.version if policy else 0
        if snapshot.policy_version != current:
            raise Conflict(
                "The org's route policy changed since this quote; quote again.",
                code="quote_policy_changed",
                details={"quoted_policy_version": snapshot.policy_version, "policy_version": current},
            )

    def quoted_items(self, principal: Principal, quote: QuoteRequest, snapshot: QuoteSnapshot) -> ItemSource:
        """The items of a batch from a quote: those sent now, or else the quote's own file's
        (its inline items are kept in S3, read by batch create)."""
        if quote.items is not None or quote.input_file_id:
            return self.items_source(principal, quote)[1]
        if snapshot.items.kind == "file":
            opened = self.files.open_items(principal.org_id, str(snapshot.items.file_id))
            return self.expand_items(principal.org_id, quote.preset, opened)
        raise AssertionError("the quote's inline items are read by batch create")

    # -- helpers -------------------------------------------------------------------------------
    def items_source(
        self, principal: Principal, quote: QuoteRequest, *, open_now: bool = True
    ) -> tuple[QuotedItems, ItemSource]:
        """The request's items, or its input file's (`open_now=False`: a file whose item profile
        may spare reading it is opened on its first read, not here)."""
        if quote.input_file_id:
            file_id = quote.input_file_id
            items = self._file_items(principal.org_id, quote.preset, file_id, open_now=open_now)
            return QuotedItems("file", file_id=file_id), items
        return QuotedItems("inline"), self.expand_items(
            principal.org_id, quote.preset, enumerate(quote.items or ())
        )

    def file_profile(self, principal: Principal, quote: QuoteRequest) -> ItemProfile | None:
        """The item profile of the request's input file (checked ready, as reading it would),
        when it may stand in for the file's items: nothing in the request rewrites them (a
        batch-wide `preset` fills every item), and the file has a usable profile (docs/files.md)."""
        if quote.items is not None or quote.preset is not None or not quote.input_file_id:
            return None  # the items are read (and the file checked) as they always were
        return self.files.item_profile(principal.org_id, quote.input_file_id)

    def with_preset(self, principal: Principal, quote: QuoteRequest) -> QuoteRequest:
        """A request naming a batch-wide `preset`: its routing settings fill the request's own."""
        if quote.preset is None:
            return quote
        filled = PresetExpander(self.presets, principal.org_id).request(quote.preset_fields())
        return quote.with_routing(Routing.parse(filled))

    def file_items(self, org_id: str, options: RoutingFields, file_id: str) -> Reopenable:
        """The Intake step's input file, with the preset its stored options name."""
        return self._file_items(org_id, options.get("preset"), file_id)

    def _file_items(self, org_id: str, preset: object, file_id: str, *, open_now: bool = True) -> Reopenable:
        """An input file's items, presets applied, opened now (or, `open_now=False`, on the
        first read) and again on demand."""

        def opened() -> ItemSource:
            return self.expand_items(org_id, preset, self.files.open_items(org_id, file_id))

        return Reopenable(opened() if open_now else None, opened)

    def expand_items(self, org_id: str, preset: object, items: ItemSource) -> ItemSource:
        """The items with the presets they (or the request's `preset`) name applied, each loaded once."""
        return PresetExpander(self.presets, org_id).items(items, default=preset)

    def _store(
        self,
        principal: Principal,
        quote_id: str,
        kind: QuoteKind,
        planned: PlannedQuote,
        source: QuotedItems,
        routing_fields: RoutingFields,
        *,
        workflow: WorkflowChoice,
    ) -> QuoteView:
        """The snapshot stored, with the routing fields the request gave (`routing_fields`:
        what a batch from the quote keeps), and the quote's answer."""
        now = self.clock.now()
        snapshot = QuoteSnapshot(
            quote_id=quote_id,
            org_id=principal.org_id,
            version=SNAPSHOT_VERSION,
            kind=kind,
            created_at=isoformat(now),
            expires_at=isoformat(now + QUOTE_TTL),
            catalog_version=self.catalog.version,
            pricing_updated_at=self.catalog.pricing_updated_at,
            item_count=planned.item_count,
            items=source,
            routing=planned.plan.to_api(),
            pricing_estimate=planned.price.to_api(),
            total_micros=planned.price.total.micros,
            policy_version=planned.policy_version,
            workflow=workflow,
            routing_fields=routing_fields,
            fees=self.catalog.fees,
        )
        self.snapshots.put(snapshot)
        return self._answer(principal, snapshot, planned)

    def _answer(self, principal: Principal, snapshot: QuoteSnapshot, planned: PlannedQuote) -> QuoteView:
        """The quote as the API shows it."""
        available = self.balances.balance(principal.org_id)
        warnings = list(planned.warnings)
        limit = self.limits.limit_warning(principal.org_id, planned.price.total)
        if limit is not None:
            warnings.append(limit)
        return {
            "quote_id": snapshot.quote_id,
            "object": "quote",
            "version": SNAPSHOT_VERSION,
            "kind": snapshot.kind,
            "created_at": snapshot.created_at,
            "expires_at": snapshot.expires_at,
            "item_count": planned.item_count,
            "routing_mode": planned.request.routing_mode,
            "sla_tier": planned.request.sla_tier,
            "effective_sla_tier": "standard",
            "privacy_tier": planned.request.privacy_tier,
            "catalog_version": self.catalog.version,
            "pricing_updated_at": self.catalog.pricing_updated_at,
            "pricing_estimate": snapshot.pricing_estimate,
            "quote_lanes": quote_lanes(snapshot.routing),
            "customer_explanation": planned.plan.explanation(),
            "funding": {"available": available.to_api(), "sufficient": available >= planned.price.total},
            "preflight": {"ok": True, "errors": [], "warnings": warnings},
            "route_policy": planned.route_policy_api(),
            **snapshot.workflow,
        }

    def _product(self, slug: object) -> WorkflowProduct:
        product = self.catalog.workflow_product(slug)
        if product is None:
            raise NotFound("No such workflow product.", code="workflow_product_not_found")
        return product

    def contract_exclusions(self, slug: str) -> Exclusions:
        """The lanes outside workflow product `slug`'s contract, each with the rule it breaks;
        none for a product no longer in the catalog (a retry of its batch runs as it did before)."""
        product = self.catalog.workflow_product(slug)
        return contract_exclusions(self.catalog, product) if product is not None else {}

    def _models_for(self, outside: Exclusions) -> list[str]:
        """The models with a lane inside the product's contract (not `outside` it)."""
        inside = {lane.model for lane in self.catalog.lanes if lane.lane_id not in outside}
        return [model.id for model in self.catalog.models if model.id in inside]


def _as_input(issue: IssueView) -> IssueView:
    """A workflow item's issue, its path naming the input it was made from (`inputs[i]`)."""
    path = issue.get("path")
    if path is None or not path.startswith("items["):
        return issue  # a field of the request itself (required_tools, ...): named as it is
    return {**issue, "path": "inputs" + path.removeprefix("items")}


def _issues_of(exc: InvalidRequest) -> list[IssueView]:
    """The preflight issues a refusal lists (none for another 400)."""
    preflight = (exc.details or {}).get("preflight") if isinstance(exc, PreflightFailed) else None
    return list(preflight["errors"]) if isinstance(preflight, dict) else []


def _no_model_fits(
    product: WorkflowProduct, considered: list[ModelConsidered], refused: list[IssueView]
) -> PreflightFailed:
    """400 `batch_preflight_failed`: the inputs' own issues when a model refused them for
    something other than routing (every model reads the same inputs), else no_eligible_lane."""
    models = [model.to_api() for model in considered]
    if refused:
        return PreflightFailed("The workflow inputs cannot be quoted.", refused, models_considered=models)
    return PreflightFailed(
        f"No model can fulfil the {product.slug} contract under these constraints.",
        [
            {
                "category": "routing",
                "code": "no_eligible_lane",
                "message": "No lane of any model satisfies the workflow's route policy.",
                "action": "Relax routing_mode, privacy_tier or required_tools.",
            }
        ],
        models_considered=models,
    )


def _collector(lines: list[bytes]) -> OnItem:
    return lambda _item, line: lines.append(line)


def quote_lanes(plan_api: RoutePlanView) -> list[SelectedLaneView | RejectedLaneView]:
    """Every lane considered, flat: selected ones first, then each rejected one with its reason."""
    selected = [lane for group in plan_api["groups"] for lane in group["selected_lanes"]]
    rejected = [lane for group in plan_api["groups"] for lane in group["rejected_lanes"]]
    return selected + rejected


def workflow_item(product: WorkflowProduct, model_id: str, index: int, raw: object) -> dict[str, Any]:
    """A workflow input as a batch item: the contract's instructions, the input as JSON, and the
    output schema as a structured-output requirement."""
    custom_id = workflow_item_id(index, raw)
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


def workflow_item_id(index: int, raw: object) -> str:
    """A workflow input's item id (its customer_item_id): its own `id`, else `input-<index>`."""
    given = raw.get("id") if isinstance(raw, dict) else None
    return given if isinstance(given, str) else f"input-{index}"


def _id_issues(inputs: Sequence[Any]) -> dict[str, IssueView]:
    """Each input's `id` (optional) is its item's customer_item_id: a string of 1-256
    characters, its own (an input without one is `input-<index>`, which must be free too)."""
    found: dict[str, IssueView] = {}
    seen: dict[str, int] = {}
    for index, raw in enumerate(inputs):
        given = raw.get("id") if isinstance(raw, dict) else None
        path = f"inputs[{index}].id"
        if given is not None and not (isinstance(given, str) and 1 <= len(given) <= MAX_CUSTOMER_ITEM_ID):
            found[path] = {
                "category": "jsonl_shape",
                "code": "invalid_field",
                "message": f"Input {index}: id must be a string of 1-{MAX_CUSTOMER_ITEM_ID} characters.",
                "action": "Give each input a string id, or none.",
                "path": path,
            }
            continue
        item_id = workflow_item_id(index, raw)
        first = seen.setdefault(item_id, index)
        if first != index:
            found[path] = {
                "category": "jsonl_shape",
                "code": "duplicate_customer_item_id",
                "message": f"Input {index}: id {item_id!r} is already used by inputs[{first}].",
                "action": "Give every input its own id.",
                "path": path,
                "details": {"first_index": first},
            }
    return found


def check_workflow_inputs(product: WorkflowProduct, inputs: Sequence[Any]) -> None:
    """Each input must be valid under the product's input schema (JSON Schema draft 2020-12),
    its own string `id` (the item's customer_item_id, not the product's) aside: the contract a
    workflow fee is charged for. Every input's every issue, with its path, up to 100."""
    validator = _input_validator(product)
    errors: dict[str, IssueView] = _id_issues(inputs)  # by path: the first issue of each place

    def issue(index: int, where: str, code: str, message: str) -> None:
        path = f"inputs[{index}]{where}"
        errors.setdefault(
            path,
            {
                "category": "jsonl_shape",
                "code": code,
                "message": f"Input {index}: {_short(message)} ({product.slug}'s input_schema).",
                "action": "Send inputs that match the product's input_schema.",
                "path": path,
            },
        )

    for index, raw in enumerate(inputs):
        document = {k: v for k, v in raw.items() if k != "id"} if isinstance(raw, dict) else raw
        for error in validator.iter_errors(document):
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            if error.validator != "required":
                issue(index, where, "invalid_field", error.message)
                continue
            for name in error.validator_value:  # the path names each property missing
                if isinstance(error.instance, dict) and name not in error.instance:
                    issue(index, f"{where}.{name}", "missing_field", f"{name!r} is a required property")
    if errors:
        listed = [errors[path] for path in sorted(errors)][:100]
        raise PreflightFailed("The workflow inputs do not match the product's input schema.", listed)


class _SchemaValidator(Protocol):
    """jsonschema's Draft202012Validator, as the input check uses it."""

    def iter_errors(self, instance: object) -> Iterator[Any]: ...


_VALIDATORS: dict[str, _SchemaValidator] = {}  # a product's slug -> its input schema's validator


def _input_validator(product: WorkflowProduct) -> _SchemaValidator:
    """The product's input validator, made once (jsonschema is imported by the first
    workflow quote, not at cold start)."""
    found = _VALIDATORS.get(product.slug)
    if found is None:
        from jsonschema import Draft202012Validator

        found = _VALIDATORS[product.slug] = Draft202012Validator(product.input_schema)
    return found


def _short(message: str, limit: int = 200) -> str:
    """A validator's message, which may quote a whole (long) value, cut to `limit`."""
    return message if len(message) <= limit else message[: limit - 1] + "…"
