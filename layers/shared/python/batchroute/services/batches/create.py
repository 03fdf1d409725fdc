"""Creating, cancelling and retrying batches.

Create: validate, price (the quote's locked snapshot, or an internal quote), write the items
to S3 in chunks (items sent inline; an input file's items are read and chunked by the
workflow's Intake step instead, so create never writes them), then ONE DynamoDB transaction
reserves the total from the wallet, writes the batch (`priced`) and the idempotency record,
so no crash can lose or double-spend credits. A create refused or failed before that
transaction commits (a 400, 402, 409, 503, a concurrent request with its key) deletes the
chunks it wrote: no batch would ever lead retention to them.
The workflow starts afterwards, named after the batch so it can never start twice.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.artifact_keys import input_chunk_key
from batchroute.domain.batches.jsonl import LineError, artifact_lines, parse_jsonl
from batchroute.domain.batches.preflight import IssueView, PreflightFailed
from batchroute.domain.batches.quote_snapshot import QuoteSnapshot
from batchroute.domain.batches.record import (
    BatchChanges,
    BatchIntake,
    BatchRecord,
    BatchSource,
    BatchWebhook,
    DuplicateIdempotencyKey,
    ExecutionSummary,
    ExtraItemRefused,
    FundingMoved,
    IdempotencyRecord,
    SurfaceFields,
    WorkOrderRef,
    item_counts,
)
from batchroute.domain.batches.states import is_terminal
from batchroute.domain.billing.controls import BillingControls
from batchroute.domain.billing.ledger import ReservationTerms
from batchroute.domain.billing.retention import ORPHAN_AFTER
from batchroute.domain.catalog.catalog import FeeSchedule, PrivacyTier, SlaTier
from batchroute.domain.catalog.pricing import FeeKind
from batchroute.domain.delivery.webhook_targets import (
    TargetProblem,
    webhook_target_problems,
)
from batchroute.domain.request_fields import IDEMPOTENCY_KEY_LENGTH
from batchroute.domain.routing.engine import RoutePlanView
from batchroute.domain.routing.gates import Exclusions, RouteRequest, RoutingFields, RoutingMode
from batchroute.domain.work_orders.work_orders import WorkOrder
from batchroute.errors import Conflict, Gone, InvalidRequest
from batchroute.ids import new_id
from batchroute.money import Money
from batchroute.observability import logger
from batchroute.services.batches.commands import CreateBatch, request_hash
from batchroute.services.batches.input_chunks import CHUNK_SIZE, InputChunkWriter, discard_chunks
from batchroute.services.batches.launch import WorkflowLaunch
from batchroute.services.batches.ports import BatchStore, ObjectStore
from batchroute.services.batches.quotes import FileItems, ItemSource, PlannedQuote, QuoteService, items_digest
from batchroute.services.batches.reads import owned_batch
from batchroute.services.batches.views import BatchSummaryView, batch_summary
from batchroute.services.billing.funding import FundingDecision, Funds, GuardedReservation, funded
from batchroute.services.delivery.ports import Sealer
from batchroute.services.delivery.webhooks import seal_batch_webhook
from batchroute.transactions import TransactItem

SLA = timedelta(hours=24)
IDEMPOTENCY_TTL = timedelta(hours=24)
MAX_CANCEL_REASON = 500


class WorkOrderJoins(Protocol):
    """services/work_orders/service.py:WorkOrders: a batch naming `work_order_id` joins it in
    its own create transaction (docs/work-orders.md)."""

    def joining(self, org_id: str, work_order_id: str) -> WorkOrder: ...

    def join_items(self, batch: BatchRecord) -> list[TransactItem]: ...

    def refused(self, org_id: str, work_order_id: str) -> Exception: ...


@dataclass(frozen=True)
class Surface:
    """Which surface creates the batch, and what it keeps with it: `fields` on the batch
    record, `transact_items` written in the same transaction (the vendor-compatible files),
    a `batch_id` it chose (a chat job's batch shares the job's suffix)."""

    source: BatchSource = "native"
    batch_id: str | None = None
    fields: SurfaceFields | None = None
    transact_items: tuple[TransactItem, ...] = ()
    # Lanes the service rules out: a schedule's regression run's (docs/schedules.md, rejected
    # `regression_failed`), those outside a workflow product's contract.
    excluded_lanes: Exclusions | None = None
    # The fee a batch priced without a quote pays: a workflow product's retry is the product's.
    fee_kind: FeeKind = "batch"
    # The workflow product a retry of a workflow batch fulfils again (its lanes outside the
    # product's contract are in `excluded_lanes`).
    workflow_product: str | None = None


NATIVE = Surface()


@dataclass(frozen=True)
class CreateAnswer:
    status_code: int
    body: bytes  # the exact bytes of the first answer, replayed byte for byte
    replayed: bool = False


def check_idempotency_key(key: str | None) -> str:
    if key is None or not key.strip():
        raise InvalidRequest("The Idempotency-Key header is required.", code="idempotency_key_required")
    shortest, longest = IDEMPOTENCY_KEY_LENGTH
    if not shortest <= len(key) <= longest or not key.isprintable():
        raise InvalidRequest(
            "Idempotency-Key must be 8-128 printable characters.", code="invalid_idempotency_key"
        )
    return key


def idempotency_conflict() -> Conflict:
    """409 for an Idempotency-Key repeated with another request."""
    return Conflict(
        "This Idempotency-Key was used with a different request body.", code="idempotency_conflict"
    )


class StoredAnswer(Protocol):
    """The first answer stored under an Idempotency-Key (a batch's, a work order's)."""

    @property
    def request_hash(self) -> str: ...

    @property
    def body(self) -> str: ...

    @property
    def ttl(self) -> int: ...


def replayed_body(record: StoredAnswer | None, fingerprint: str, *, now: datetime) -> bytes | None:
    """The first answer's body to repeat (None: the key is new, or its record's 24 hours have
    passed at `now`: it may be used again); 409 when the key came with another request
    (`fingerprint`)."""
    if record is None or record.ttl <= int(now.timestamp()):
        return None
    if record.request_hash != fingerprint:
        raise idempotency_conflict()
    return record.body.encode()


@dataclass(eq=False, kw_only=True)
class BatchService:
    records: BatchStore
    funds: Funds
    quotes: QuoteService
    artifacts: ObjectStore
    launch: WorkflowLaunch
    sealer: Sealer  # a batch webhook's secret is kept sealed
    check_url: Callable[[str], object]  # the SSRF guard of a webhook's URL
    clock: Clock
    # required, so that no wiring takes a member in without its work order counting it
    work_orders: WorkOrderJoins
    # a canceled batch goes on the retention GC's index due this long after (docs/retention.md)
    retention_grace: timedelta = timedelta(hours=72)

    def reading(self, files: FileItems) -> BatchService:
        """The same service whose quotes read `input_file_id`s from `files`."""
        other = copy.copy(self)
        other.quotes = self.quotes.reading(files)
        return other

    # -- create --------------------------------------------------------------------------------
    def create(
        self,
        principal: Principal,
        command: CreateBatch,
        idempotency_key: str | None,
        surface: Surface = NATIVE,
    ) -> CreateAnswer:
        """The batch, or the first answer to this Idempotency-Key (also when a concurrent
        request with the key commits first). `surface` lets another surface (the
        vendor-compatible one, queued chat) create an ordinary batch that carries its own
        records atomically (`Surface`)."""
        authorize(principal, "batches:create")
        key = check_idempotency_key(idempotency_key)
        replay = self.replay(principal.org_id, key, command.fingerprint)
        if replay is not None:
            return replay
        work_order = self._work_order(principal, command.work_order_id)
        command = command.with_quote(self.quotes.with_preset(principal, command.quote))
        batch_id = surface.batch_id or new_id("batch", self.clock.now())
        webhook = self._webhook(principal, batch_id, command.quote.webhook)
        priced = self._price(principal, command, batch_id, surface)  # refused: no chunk is left
        try:
            batch = self._record(principal, command, priced, batch_id, surface, webhook, work_order)
            answer_body = json.dumps({"batch": batch_summary(batch)}, separators=(",", ":")).encode()
            joins = self.work_orders.join_items(batch) if work_order is not None else []
            submit = _Submit(
                principal,
                key,
                command.fingerprint,
                batch,
                priced.total,
                answer_body,
                (*surface.transact_items, *joins),
            )
            controls = self._funded(submit, work_order)
        except DuplicateIdempotencyKey:  # a concurrent request with this key committed first
            self._discard_input(batch_id, priced)
            return self._replay_committed(principal.org_id, key, command.fingerprint)
        except BaseException:
            self._discard_input(batch_id, priced)
            raise
        self.launch.launch(batch_id)  # the batch is safely priced: the sweeper starts it if this fails
        # the balance alerts and auto top-up see the new reservation
        self.funds.moved(principal.org_id, at=self.clock.now(), controls=controls)
        return CreateAnswer(202, answer_body)

    def _funded(self, submit: _Submit, work_order: WorkOrder | None) -> BillingControls | None:
        """`_fund`, a work order's refusal of the batch answered as the work order's."""
        try:
            controls, _ = self._fund(submit)
        except ExtraItemRefused:
            if work_order is None:
                raise
            raise self.work_orders.refused(submit.principal.org_id, work_order.work_order_id) from None
        return controls

    def _discard_input(self, batch_id: str, priced: _Priced) -> None:
        """The create failed before its transaction committed: delete the input chunks it
        wrote, which no batch record or reclaim entry would ever lead retention to. A batch
        found under the id committed after all (a transaction that answered with an error)
        keeps them. A failure here is logged, never answered in place of the refusal."""
        if priced.intake is not None or not priced.chunk_count:
            return  # nothing written: the Intake step writes a file's chunks
        try:
            if self.records.get(batch_id) is None:
                discard_chunks(self.artifacts, batch_id, priced.chunk_count)
        except Exception:
            logger.exception(
                "a refused batch create's input chunks were not deleted", extra={"batch_id": batch_id}
            )

    def _record(
        self,
        principal: Principal,
        command: CreateBatch,
        priced: _Priced,
        batch_id: str,
        surface: Surface,
        webhook: BatchWebhook | None,
        work_order: WorkOrder | None,
    ) -> BatchRecord:
        """The batch as its create transaction writes it: `priced`."""
        now = self.clock.now()
        extra = surface.fields or SurfaceFields()
        count = priced.item_count
        return BatchRecord(
            batch_id=batch_id,
            org_id=principal.org_id,
            state="priced",
            source=surface.source,
            created_at=isoformat(now),
            deadline_at=isoformat(now + SLA),
            state_changed_at=isoformat(now),
            routing_mode=priced.routing_mode,
            sla_tier=priced.sla_tier,
            privacy_tier=priced.privacy_tier,
            quote_id=command.quote_id,
            item_count=count,
            chunk_count=priced.chunk_count,
            chunk_models=priced.chunk_models,
            intake=priced.intake,
            routing_fields=_batch_routing(command, priced),
            counts=item_counts(count, pending=count),
            plan=priced.plan,
            reservation_id=f"res_{batch_id}",
            reserved_micros=priced.total.micros,
            fee_kind=priced.fee_kind,
            workflow_product=priced.workflow_product or surface.workflow_product,
            fees=priced.fees or self.quotes.catalog.fees,
            execution_summary=ExecutionSummary(latest_error=None),
            workflow_steps={},
            created_by=principal.user_id or principal.key_id,
            webhook=webhook,
            metadata=command.metadata,
            rescue=command.rescue.to_item() if command.rescue is not None else None,
            presets=list(priced.presets) or None,
            compat=extra.compat,
            chat_model=extra.chat_model,
            chat_job_id=extra.chat_job_id,
            work_order=WorkOrderRef(work_order.work_order_id, work_order.client_reference)
            if work_order is not None
            else None,
            schedule_id=extra.schedule_id,
            schedule_version=extra.schedule_version,
        )

    def _work_order(self, principal: Principal, work_order_id: str | None) -> WorkOrder | None:
        if work_order_id is None:
            return None
        return self.work_orders.joining(principal.org_id, work_order_id)

    def _price(self, principal: Principal, command: CreateBatch, batch_id: str, surface: Surface) -> _Priced:
        """The one pricing pass of a batch: from its quote's locked snapshot (read once), or
        an internal quote priced the same way as a quote is. Native batches over a file defer
        their items to Intake; the compat surface converts its rows as it reads them and
        answers a bad row with a 400, so it reads them here, as inline items are."""
        quote = command.quote
        snapshot = self.quotes.quoted(principal, command.quote_id) if command.quote_id else None
        file_id = quote.input_file_id if quote.items is None else None
        if snapshot is not None:
            _check_quoted_routing(quote.routing.fields(), snapshot)
        if snapshot is not None and quote.items is None and not file_id and snapshot.items.kind == "file":
            file_id = snapshot.items.file_id
        if file_id is not None and surface.source == "native":
            return self._price_file(principal, command, file_id, snapshot, surface)
        # The chunks' reclaim entry first, which the create's transaction deletes: a create
        # that dies before it leaves chunks no batch owns, and retention deletes them.
        self.records.schedule_reclaim(batch_id, review_at=isoformat(self.clock.now() + ORPHAN_AFTER))
        writer = InputChunkWriter(self.artifacts, batch_id)
        try:
            priced = self._price_and_write(principal, command, writer, snapshot, surface)
            writer.close()
        except BaseException:
            _aborted(writer)
            raise
        return replace(
            priced,
            item_count=writer.count,
            chunk_count=writer.chunk_count,
            chunk_models=writer.chunk_models_for(priced.plan),
            presets=tuple(writer.presets),
        )

    def _price_file(
        self,
        principal: Principal,
        command: CreateBatch,
        file_id: str,
        snapshot: QuoteSnapshot | None,
        surface: Surface,
    ) -> _Priced:
        """Price a batch over an input file without writing its items: from the quote's
        snapshot (no item is read: create answers in the same time at any size), or else an
        internal quote, as a quote does: from the file's item profile when it can stand in for
        the items (no item is read either), else over a streamed preflight. The Intake step
        reads the file again through the same preflight, writes the chunks and checks the
        count and digest (docs/files.md, Item profile)."""
        options = command.intake_options()
        if snapshot is not None:
            self._check_quoted_file(principal, file_id, snapshot)
            priced = _Priced.quoted(snapshot)
            options["routing_mode"] = priced.routing_mode
            options["sla_tier"] = priced.sla_tier
            options["privacy_tier"] = priced.privacy_tier
            digest = snapshot.items.digest
        else:
            _, planned = self.quotes.price(
                principal, command.quote, excluded_lanes=surface.excluded_lanes, fee_kind=surface.fee_kind
            )
            priced, digest = _Priced.planned(planned), planned.items_digest
        intake = BatchIntake(file_id=file_id, digest=digest, item_count=priced.item_count, options=options)
        chunks = -(-priced.item_count // CHUNK_SIZE)
        return replace(priced, intake=intake, chunk_count=chunks)

    def _check_quoted_file(self, principal: Principal, file_id: str, snapshot: QuoteSnapshot) -> None:
        """409 `quote_mismatch` before anything is reserved when another file than the quoted
        one (or a file under a quote of inline items) failed its check (its malformed lines
        cannot be the quoted items, which passed the preflight) or has an item profile showing
        other items. Where that is not known (no usable profile: items naming presets, a file
        checked before profiles; or a batch-wide preset, which rewrites the items), Intake
        compares what it reads with the quote, as before."""
        quoted = snapshot.items
        same_file = quoted.kind == "file" and quoted.file_id == file_id
        record = self.quotes.files.file_ready(principal.org_id, file_id)
        if same_file or (snapshot.routing_fields or {}).get("preset") is not None:
            return
        mismatch = {"input_file_id": file_id, "quoted_input_file_id": quoted.file_id}
        if record.status == "error":
            raise Conflict(
                "The input file failed its check (GET /v1/files/{file_id} lists its errors), so it "
                "cannot hold the quoted items; fix and upload it again, or create the batch from "
                "the quote alone.",
                code="quote_mismatch",
                details={**mismatch, "file_status": record.status},
            )
        profile = self.quotes.files.item_profile(principal.org_id, file_id)
        if profile is not None and profile.digest != quoted.digest:
            raise Conflict(
                "The input file's items differ from the quoted ones; quote this file, or create "
                "the batch from the quote alone.",
                code="quote_mismatch",
                details=mismatch,
            )

    def _price_and_write(
        self,
        principal: Principal,
        command: CreateBatch,
        writer: InputChunkWriter,
        snapshot: QuoteSnapshot | None,
        surface: Surface,
    ) -> _Priced:
        """Price a batch whose items create writes to S3 as they stream: the quoted items
        (their digest must match the quote's), or an internal quote."""
        if snapshot is None:
            _, planned = self.quotes.price(
                principal,
                command.quote,
                on_item=lambda item, _line: writer.add(item),
                excluded_lanes=surface.excluded_lanes,
                fee_kind=surface.fee_kind,
            )
            return _Priced.planned(planned)
        quote = command.quote
        if quote.items is None and not quote.input_file_id and snapshot.items.kind == "inline":
            items: ItemSource = parse_jsonl(self.artifacts.chunks(str(snapshot.items.s3_key)))
        else:
            items = self.quotes.quoted_items(principal, quote, snapshot)
        if items_digest(_kept(items, writer)) != snapshot.items.digest:
            raise Conflict("The items differ from the quoted ones; quote them again.", code="quote_mismatch")
        return _Priced.quoted(snapshot)

    def _webhook(self, principal: Principal, batch_id: str, webhook: object) -> BatchWebhook | None:
        """The batch's webhook, checked once (domain/delivery/webhook_targets.py) and sealed."""
        if webhook is None:
            return None
        problems = webhook_target_problems(webhook, check_url=self.check_url)
        if problems or not isinstance(webhook, Mapping):
            raise PreflightFailed("The webhook is not acceptable.", [_webhook_issue(p) for p in problems])
        return seal_batch_webhook(
            self.sealer,
            org_id=principal.org_id,
            batch_id=batch_id,
            url=webhook["url"],
            secret=webhook["secret"],
        )

    def _fund(self, submit: _Submit) -> tuple[BillingControls | None, FundingDecision]:
        """Decide on fresh reads (raising the 402 with its figures), then commit with the
        decision's limit guard in the same transaction (`Funds.guarded`, as every hold); a
        refused commit means the wallet, the spend or the controls moved since the reads, so
        decide again."""
        org_id, batch = submit.principal.org_id, submit.batch
        terms = ReservationTerms(
            reservation_id=str(batch.reservation_id), amount=submit.total, purpose="batch", ref=batch.batch_id
        )

        def attempt() -> tuple[BillingControls | None, FundingDecision] | None:
            controls = self.funds.controls_of(org_id)
            now = self.clock.now()
            held = self.funds.guarded(terms, controls, org_id=org_id, now=now)
            return (controls, held.decision) if self._commit(submit, held, now) else None

        return funded(attempt, what="batch")

    def _commit(self, submit: _Submit, held: GuardedReservation, now: datetime) -> bool:
        """One transaction (`BatchRecords.create`): the reservation (bounded by its guard),
        the batch, the caller's items, the limit checks and the idempotency record. False
        when the funding moved (the caller decides again on fresh reads); a concurrent
        duplicate raises DuplicateIdempotencyKey."""
        principal, batch = submit.principal, submit.batch
        idempotency = IdempotencyRecord(
            org_id=principal.org_id,
            key=submit.key,
            request_hash=submit.fingerprint,
            status_code=202,
            body=submit.body.decode(),
            batch_id=batch.batch_id,
            created_at=isoformat(now),
            ttl=int((now + IDEMPOTENCY_TTL).timestamp()),
        )
        try:
            self.records.create(
                batch,
                reservation=held.reservation,
                extra_items=submit.extra_items,
                limit_checks=held.limit_checks,
                idempotency=idempotency,
            )
        except FundingMoved:
            return False  # the funds, the limit's room, its spend or its controls moved
        return True

    def replay(self, org_id: str, key: str, fingerprint: str) -> CreateAnswer | None:
        """The first answer to this Idempotency-Key (409 when it came with another body), or None."""
        record = self.records.idempotency_record(org_id, key)
        body = replayed_body(record, fingerprint, now=self.clock.now())
        if record is None or body is None:
            return None
        return CreateAnswer(record.status_code, body, replayed=True)

    def _replay_committed(self, org_id: str, key: str, fingerprint: str) -> CreateAnswer:
        """The answer of the request with this key that committed first (409 while it is
        still being processed, or when it came with another body)."""
        replay = self.replay(org_id, key, fingerprint)
        if replay is None:
            raise Conflict(
                "A request with this Idempotency-Key is still being processed; retry shortly.",
                code="idempotency_in_progress",
            )
        return replay

    # -- cancel and retry ------------------------------------------------------------------------
    def cancel(self, principal: Principal, batch_id: str, reason: str | None) -> BatchRecord:
        """`reason` is at most MAX_CANCEL_REASON characters: the request model checks it."""
        authorize(principal, "batches:create")
        batch = owned_batch(self.records, principal, batch_id)
        if batch.source == "chat_direct":
            raise Conflict("A direct chat request cannot be cancelled.", code="direct_not_cancellable")
        if is_terminal(batch.state):
            raise Conflict(
                f"The batch is already {batch.state}.",
                code="batch_not_cancellable",
                details={"state": batch.state},
            )
        moment = self.clock.now()
        now = isoformat(moment)
        extra: BatchChanges = {"completed_at": now}
        if reason:
            extra["cancel_reason"] = reason
        # on the retention GC's index first, as Finalize would put it: the bytes go even when
        # no workflow is left to finalize the batch (one that died before the cancel)
        self.records.schedule_reclaim(batch_id, review_at=isoformat(moment + self.retention_grace))
        if not self.records.transition(batch_id, "canceled", at=now, extra=extra):
            current = self.records.get(batch_id) or batch
            raise Conflict(
                f"The batch is already {current.state}.",
                code="batch_not_cancellable",
                details={"state": current.state},
            )
        return self.records.get(batch_id) or batch

    def retry(self, principal: Principal, batch_id: str) -> RetriedView:
        """A new batch from the failed and canceled items of a finished one (beta)."""
        authorize(principal, "batches:create")
        source = owned_batch(self.records, principal, batch_id)
        if source.source == "chat_direct":  # answered once, with no results file to retry from
            raise Conflict(
                "A direct chat request cannot be retried; send the request again.",
                code="direct_not_retryable",
                details={"state": source.state},
            )
        results_key = source.results_key
        if not is_terminal(source.state) or not results_key:
            raise Conflict(
                "Only a finished batch can be retried.",
                code="batch_not_finished",
                details={"state": source.state},
            )
        if source.artifacts_reclaimed_at:  # its inputs went with its results (docs/retention.md)
            raise Gone(
                "This batch's items and results were reclaimed by retention; it cannot be retried.",
                code="results_expired",
                details={"reclaimed_at": source.artifacts_reclaimed_at},
            )
        failed = {
            int(row["sequence_number"])
            for row in artifact_lines(self.artifacts.chunks(results_key), key=results_key)
            if row.get("status") == "failed"
        }
        if not failed:
            raise Conflict("The batch has no failed or canceled items to retry.", code="nothing_to_retry")
        items = [row["item"] for row in self._input_rows(source) if int(row["seq"]) in failed]
        body = retry_body(source, items)
        key = f"retry-{batch_id}-{request_hash(body)[:32]}"
        # A workflow product's items are retried as the product (its fee, inside its contract),
        # any other as a batch.
        fee_kind: FeeKind = "workflow" if source.fee_kind == "workflow" else "batch"
        product = source.workflow_product
        surface = Surface(
            fee_kind=fee_kind,
            workflow_product=product,
            excluded_lanes=self.quotes.contract_exclusions(product) if product else None,
        )
        answer = self.create(principal, CreateBatch.parse(body), key, surface)
        created: BatchSummaryView = json.loads(answer.body)["batch"]  # as create answered it
        self.records.update(created["id"], {"retry_of": batch_id})
        return {"batch": created, "source_batch_id": batch_id, "retry_item_count": len(items)}

    def _input_rows(self, batch: BatchRecord) -> Iterator[dict[str, Any]]:
        for chunk in range(batch.chunk_count):
            key = input_chunk_key(batch.batch_id, chunk)
            yield from artifact_lines(self.artifacts.chunks(key), key=key)


class RetriedView(TypedDict):
    """A retry's answer: the new batch, as its create answered it, and what it retries."""

    batch: BatchSummaryView
    source_batch_id: str
    retry_item_count: int


class RetryBody(RoutingFields, total=False):
    """The batch body a retry creates its batch with (`retry_body`)."""

    items: list[object]
    metadata: dict[str, str]


def retry_body(source: BatchRecord, items: list[object]) -> RetryBody:
    """What a retry asks of its new batch (docs/batches.md, "Retry"): the failed and canceled
    items as the source stored them (presets applied), its routing mode and tiers as it ran
    (the plan's), the regions, price cap and required tools its request gave (a batch from a
    quote: the quote's), and its metadata. Not its preset (its items and routing fields hold
    what the preset filled), its webhook (the secret is sealed to the source batch; the
    plaintext is gone), quote, work order or rescue setting."""
    kept = source.routing_fields or RoutingFields()
    body = RetryBody(
        items=items,
        routing_mode=source.routing_mode or "cheapest",
        privacy_tier=source.privacy_tier or "standard",
        sla_tier=source.sla_tier or "standard",
    )
    if "required_tools" in kept:
        body["required_tools"] = list(kept["required_tools"])
    if "regions" in kept:
        body["regions"] = list(kept["regions"])
    price = kept.get("max_price")
    if price is not None:
        body["max_price"] = dict(price)
    if source.metadata:
        body["metadata"] = dict(source.metadata)
    return body


@dataclass(frozen=True)
class _Submit:
    """A batch ready to be funded: what its create transaction writes and answers."""

    principal: Principal
    key: str
    fingerprint: str
    batch: BatchRecord
    total: Money
    body: bytes  # the answer, stored with the idempotency record
    extra_items: tuple[TransactItem, ...]


@dataclass(frozen=True, slots=True)
class _Priced:
    """A batch priced: its plan as stored (RoutePlan.to_api), total, fee kind and tiers; its
    items' count and chunks; for a batch over an input file, what the Intake step reads."""

    plan: RoutePlanView
    total: Money
    fee_kind: FeeKind
    routing_mode: RoutingMode
    sla_tier: SlaTier
    privacy_tier: PrivacyTier
    item_count: int
    chunk_count: int = 0
    chunk_models: list[dict[str, int]] | None = None
    intake: BatchIntake | None = None
    presets: tuple[str, ...] = ()
    quoted_routing: RoutingFields | None = None  # the quote's routing fields (None: no quote)
    workflow_product: str | None = None  # a workflow quote's product
    fees: FeeSchedule | None = None  # the quote's fee schedule (None: the catalog's now)

    @classmethod
    def quoted(cls, snapshot: QuoteSnapshot) -> _Priced:
        plan = snapshot.routing
        routing = snapshot.routing_fields  # None: a snapshot stored before they were kept
        if routing is None:
            routing = RoutingFields(
                routing_mode=plan["routing_mode"],
                sla_tier=plan["sla_tier"],
                privacy_tier=plan["privacy_tier"],
            )
        return cls(
            plan,
            Money(snapshot.total_micros),
            snapshot.fee_kind,
            plan["routing_mode"],
            plan["sla_tier"],
            plan["privacy_tier"],
            snapshot.item_count,
            quoted_routing=routing,
            fees=snapshot.fees,
            workflow_product=snapshot.workflow.get("workflow_product"),
        )

    @classmethod
    def planned(cls, planned: PlannedQuote) -> _Priced:
        request = planned.request
        return cls(
            planned.plan.to_api(),
            planned.price.total,
            planned.price.fee_kind,
            request.routing_mode,
            request.sla_tier,
            request.privacy_tier,
            planned.item_count,
        )


def _check_quoted_routing(given: RoutingFields, snapshot: QuoteSnapshot) -> None:
    """409 `quote_mismatch` when the body also gives a routing field the quote was not made
    with: the batch runs on the quote's plan, so a stricter privacy tier, another region or
    mode would be ignored (its items sent where the body forbade). Quote again with them."""
    quoted = _quoted_fields(snapshot)
    for name, value in given.items():
        if name == "sla_tier":  # every tier is served as standard: it changes no route
            continue
        if _comparable(value) != _comparable(quoted.get(name)):
            raise Conflict(
                f"The quote was made with another {name}; quote again with the batch's routing fields.",
                code="quote_mismatch",
                details={"field": name, "quoted": quoted.get(name), "given": value},
            )


def _quoted_fields(snapshot: QuoteSnapshot) -> RoutingFields:
    """The routing fields the quote was asked with, each left out as its default (so the
    same body asks the same; a route policy narrows both alike)."""
    kept = snapshot.routing_fields
    if kept is None:  # a snapshot stored before they were kept: its plan's mode and tiers
        plan = snapshot.routing
        kept = RoutingFields(
            routing_mode=plan["routing_mode"], sla_tier=plan["sla_tier"], privacy_tier=plan["privacy_tier"]
        )
    defaults = RouteRequest()
    quoted = RoutingFields(
        routing_mode=defaults.routing_mode,
        privacy_tier=defaults.privacy_tier,
        sla_tier=defaults.sla_tier,
        required_tools=[],
        regions=[],
        max_price=None,
    )
    quoted.update(kept)
    return quoted


def _comparable(value: object) -> object:
    """Lists compared as sets (tools and regions have no order); a price cap's bounds as
    numbers ("0.50" is the cap 0.5)."""
    if isinstance(value, dict):
        return {name: Decimal(str(bound)) for name, bound in value.items()}
    return sorted(str(v) for v in value) if isinstance(value, list) else value


def _batch_routing(command: CreateBatch, priced: _Priced) -> RoutingFields:
    """What the batch keeps of its request's routing (`BatchRecord.routing_fields`): the
    fields its body gave (a preset's filled in) and its batch-wide preset; a batch from a
    quote, the quote's fields (its routing is the quote's), with the preset its own body
    names, if any, else the quote's."""
    if priced.quoted_routing is None:
        return command.quote.constraints()
    routing = priced.quoted_routing.copy()
    if command.quote.preset is not None:
        routing["preset"] = command.quote.preset
    return routing


def _aborted(writer: InputChunkWriter) -> None:
    """A refused pricing pass discards every chunk it wrote; a failure to is logged, never
    answered in place of the refusal."""
    try:
        writer.abort()
    except Exception:
        logger.exception(
            "a refused batch create's input chunks were not deleted", extra={"batch_id": writer.batch_id}
        )


def _kept(items: ItemSource, writer: InputChunkWriter) -> Iterator[Mapping[str, Any]]:
    """The quoted items, each written as it is read; an item that no longer reads is a 409."""
    for _, item in items:
        if isinstance(item, LineError) or not isinstance(item, Mapping):
            raise Conflict("The quoted items can no longer be read; quote them again.", code="quote_mismatch")
        writer.add(item)
        yield item


def _webhook_issue(problem: TargetProblem) -> IssueView:
    return {
        "category": "webhook",
        "code": problem.code,
        "message": problem.message,
        "path": problem.path,
        "action": "Use a public https URL and a secret of 8-256 characters.",
    }
