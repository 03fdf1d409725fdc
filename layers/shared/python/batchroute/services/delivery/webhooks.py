"""Webhook delivery: one signed POST per terminal batch event, retried until it lands or the
schedule runs out (`domain/delivery/webhooks.py`, `docs/webhooks.md`).

- `deliver_batch_event(batch)` (the workflow's Deliver step): resolves the webhook (the
  batch's own overrides the org default; none means the customer polls), creates the
  delivery once per (batch, event type) and makes the first attempt at once.
- `retry_due()` (the sweeper, every minute): makes the attempts that are due, within a time
  budget (`RETRY_BUDGET_SECONDS`; the rest stay due for the next sweep), and records as
  failed any attempt whose worker stopped before it could record the outcome.
- `view(batch_id)`: what `GET /v1/batches/{batch_id}/webhooks` shows; never the secret.
- `OrgEventWebhooks.deliver_org_event(...)`: an org-level event (a billing alert) to the
  org's delivery webhook, created pending and due at once; a `WebhookDelivery` built with
  `owner_field="org_id"` over the same org-keyed store makes its attempts (`retry_due`, from
  the sweeper): the same signature, schedule and dead letter as batch events
  (docs/billing-alerts.md).

Secrets stay sealed with KMS everywhere but in memory during an attempt. The org default's
secret is sealed by `services/accounts/settings.py` (context
`domain/delivery/webhooks.py webhook_secret_context`); a batch's own secret is sealed at batch
creation with `seal_batch_webhook` below.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Literal, Protocol, TypedDict

from batchroute.clock import Clock, isoformat
from batchroute.domain.batches.record import BatchRecord, BatchWebhook, batch_summary
from batchroute.domain.delivery.webhooks import (
    MAX_ATTEMPTS,
    AttemptOutcome,
    WebhookAttempt,
    WebhookAttemptView,
    WebhookDeliveryRecord,
    WebhookDeliveryView,
    decide,
    delivery_id_for,
    event_body,
    event_type_for,
    signature_headers,
    webhook_secret_context,
)
from batchroute.ids import new_id
from batchroute.observability import logger
from batchroute.services.delivery.ports import Orgs, Sealer

BATCH_WEBHOOK_PURPOSE = "batch_webhook"
# How long a claimed attempt may run before the sweeper treats its worker as gone. Far above
# the sender's 10 s budget, so a live attempt is never taken over.
LEASE_SECONDS = 120
INTERRUPTED = "attempt interrupted: the worker stopped before recording an outcome"
# The sweeper makes retries inline, before its other duties (billing alert webhooks, bucket
# delivery retries, retention, schedules, auto top-ups) and inside its 120 s Lambda time-out.
# A `retry_due` starts no attempt once this many seconds have passed since it began; the
# deliveries it did not reach stay due for the next sweep. An attempt started just before
# lasts at most the sender's 10 s (its deadline covers the whole exchange), so each of the
# sweeper's two `retry_due` (batch events, then billing events) takes about 30 s at most,
# whatever the receivers do.
RETRY_BUDGET_SECONDS = 20.0

SecretSource = Literal["batch", "org"]
BATCH_SOURCE: SecretSource = "batch"
ORG_SOURCE: SecretSource = "org"


class Sender(Protocol):
    def send(self, url: str, raw_body: bytes, headers: Mapping[str, str]) -> AttemptOutcome: ...


class DeliveryListing(Protocol):
    def list_for_batch(self, batch_id: str) -> tuple[list[WebhookDeliveryRecord], list[WebhookAttempt]]: ...


class DeliveryRecords(DeliveryListing, Protocol):
    def create(self, delivery: WebhookDeliveryRecord) -> bool: ...

    def get(self, batch_id: str, delivery_id: str) -> WebhookDeliveryRecord | None: ...

    def due(self, now_iso: str, limit: int = 100) -> list[tuple[str, str]]: ...

    def claim(
        self, batch_id: str, delivery_id: str, *, attempt: int, now_iso: str, lease_until_iso: str
    ) -> bool: ...

    def complete(
        self,
        owner_id: str,
        attempt: WebhookAttempt,
        *,
        status: str,
        next_attempt_at_iso: str | None,
        lease_expired_before: str | None = None,
    ) -> bool: ...


# -- the batch's own webhook secret (batch creation seals, the worker unseals) ------------
def batch_webhook_secret_context(org_id: str, batch_id: str) -> dict[str, str]:
    """The KMS encryption context of a per-batch webhook secret: bound to org and batch."""
    return {"org_id": org_id, "batch_id": batch_id, "purpose": BATCH_WEBHOOK_PURPOSE}


def seal_batch_webhook(sealer: Sealer, *, org_id: str, batch_id: str, url: str, secret: str) -> BatchWebhook:
    """What the batch record keeps as `webhook`: its URL (already checked) and its secret
    sealed for this batch alone."""
    return BatchWebhook(
        url=url, secret_sealed=sealer.seal(secret, context=batch_webhook_secret_context(org_id, batch_id))
    )


@dataclass(frozen=True)
class ResolvedWebhook:
    url: str
    secret_sealed: str
    secret_source: SecretSource


@dataclass
class RetryReport:
    attempted: list[str] = field(default_factory=list)
    succeeded: list[str] = field(default_factory=list)
    dead_lettered: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)  # due, left for the next sweep (the budget)

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "attempted": self.attempted,
            "succeeded": self.succeeded,
            "dead_lettered": self.dead_lettered,
            "recovered": self.recovered,
            "skipped": self.skipped,
            "deferred": self.deferred,
        }


@dataclass(eq=False)
class WebhookDelivery:
    deliveries: DeliveryRecords
    orgs: Orgs
    sealer: Sealer
    sender: Sender
    clock: Clock
    _: KW_ONLY
    lease_seconds: int = LEASE_SECONDS
    workers: int = 8
    owner_field: str = "batch_id"  # what the store's records are keyed by
    retry_budget_seconds: float = RETRY_BUDGET_SECONDS  # per `retry_due` (see the constant)
    monotonic: Callable[[], float] = time.monotonic  # measures the budget

    def __post_init__(self) -> None:
        self.workers = max(1, self.workers)

    # -- resolution ----------------------------------------------------------------------
    def resolve_webhook(self, batch: BatchRecord) -> ResolvedWebhook | None:
        """The batch's own webhook, else the org default, else None (the customer polls)."""
        own = batch.webhook
        if own is not None and own.url and own.secret_sealed:
            return ResolvedWebhook(own.url, own.secret_sealed, "batch")
        org_id = batch.org_id
        org = self.orgs.get_org(org_id) if org_id else None
        default = org.delivery_webhook if org else None
        if default and default.get("url") and default.get("secret_ciphertext"):
            return ResolvedWebhook(str(default["url"]), str(default["secret_ciphertext"]), "org")
        return None

    def _secret(self, delivery: WebhookDeliveryRecord) -> bytes:
        org_id = delivery.org_id
        if delivery.secret_source == BATCH_SOURCE:
            context = batch_webhook_secret_context(org_id, str(delivery.batch_id))
        else:
            context = webhook_secret_context(org_id)
        return self.sealer.unseal(delivery.secret_sealed, context=context).encode("utf-8")

    # -- the Deliver step ----------------------------------------------------------------
    def deliver_batch_event(
        self,
        batch: BatchRecord,
        *,
        now: datetime | None = None,
    ) -> WebhookDeliveryRecord | None:
        """Create the batch's terminal-state delivery (once) and make its first attempt.

        Returns the delivery as stored after the attempt, or None when the batch is not
        terminal or has no webhook. Idempotent: a repeat finds the delivery and sends
        nothing unless the first attempt is still owed. Failed attempts are left scheduled
        for the sweeper; this never waits for a retry."""
        now = now or self.clock.now()
        event_type = event_type_for(batch.state)
        if event_type is None:
            return None
        batch_id = batch.batch_id
        delivery_id = delivery_id_for(batch_id, event_type)
        delivery = self.deliveries.get(batch_id, delivery_id)
        if delivery is None:
            hook = self.resolve_webhook(batch)
            if hook is None:
                return None
            created_at = isoformat(now)
            event_id = new_id("evt", at=now)
            body = event_body(
                event_id=event_id, event_type=event_type, created_at=created_at, batch=batch_summary(batch)
            )
            delivery = _pending(delivery_id, batch.org_id, hook, (event_id, event_type, created_at), body)
            delivery = replace(delivery, batch_id=batch_id)
            if not self.deliveries.create(delivery):
                delivery = self.deliveries.get(batch_id, delivery_id)  # a concurrent step won
                if delivery is None:
                    return None
        if delivery.status == "pending":
            return self._attempt(delivery, now) or self.deliveries.get(batch_id, delivery_id)
        return delivery

    def queue_batch_event(
        self, batch: BatchRecord, *, event_type: str, key: str, details: object
    ) -> WebhookDeliveryRecord | None:
        """A batch event raised while it runs (`batch.rescue_started`, `details` its `rescue`):
        its delivery is created pending, due now, and the sweeper's next run makes the first
        attempt (as an org event's). One delivery per (batch, event, `key`); None when the
        batch has no webhook."""
        hook = self.resolve_webhook(batch)
        if hook is None:
            return None
        batch_id = batch.batch_id
        delivery_id = delivery_id_for(batch_id, f"{event_type}#{key}")
        now = self.clock.now()
        created_at, event_id = isoformat(now), new_id("evt", at=now)
        body = event_body(
            event_id=event_id,
            event_type=event_type,
            created_at=created_at,
            batch=batch_summary(batch),
            rescue=details,
        )
        delivery = _pending(delivery_id, batch.org_id, hook, (event_id, event_type, created_at), body)
        delivery = replace(delivery, batch_id=batch_id)
        if not self.deliveries.create(delivery):
            return self.deliveries.get(batch_id, delivery_id)
        return delivery

    # -- attempts ------------------------------------------------------------------------
    def _attempt(self, delivery: WebhookDeliveryRecord, now: datetime) -> WebhookDeliveryRecord | None:
        """Claim the next attempt, send, record. None when another worker holds the attempt."""
        batch_id, delivery_id = delivery.owner_id(self.owner_field), delivery.delivery_id
        attempt = delivery.attempt_count + 1
        if attempt > MAX_ATTEMPTS:
            return None
        now_iso = isoformat(now)
        lease_until = isoformat(now + timedelta(seconds=self.lease_seconds))
        if not self.deliveries.claim(
            batch_id, delivery_id, attempt=attempt, now_iso=now_iso, lease_until_iso=lease_until
        ):
            return None
        outcome = self._send(delivery, now)
        self._record(delivery, attempt, outcome, now)
        return self.deliveries.get(batch_id, delivery_id)

    def _send(self, delivery: WebhookDeliveryRecord, now: datetime) -> AttemptOutcome:
        try:
            secret = self._secret(delivery)
        except Exception:
            logger.exception("webhook secret could not be unsealed", extra=delivery.log_ids())
            return AttemptOutcome(None, "signing secret unavailable", 0)
        raw_body = delivery.payload.encode("utf-8")
        headers = signature_headers(secret, int(now.timestamp()), raw_body, delivery.event_type)
        try:
            return self.sender.send(delivery.url, raw_body, headers)
        except Exception:
            logger.exception("webhook send failed unexpectedly", extra=delivery.log_ids())
            return AttemptOutcome(None, "internal error while sending", 0)

    def _record(
        self,
        delivery: WebhookDeliveryRecord,
        attempt: int,
        outcome: AttemptOutcome,
        now: datetime,
        *,
        lease_expired_before: str | None = None,
    ) -> bool:
        decision = decide(attempt, outcome, now=now)
        made = WebhookAttempt(
            delivery.delivery_id,
            attempt,
            at=isoformat(now),
            status_code=outcome.status_code,
            error=decision.last_error,
            duration_ms=outcome.duration_ms,
        )
        recorded = self.deliveries.complete(
            delivery.owner_id(self.owner_field),
            made,
            status=decision.status,
            next_attempt_at_iso=isoformat(decision.next_attempt_at) if decision.next_attempt_at else None,
            lease_expired_before=lease_expired_before,
        )
        log = logger.info if decision.status in ("succeeded", "failed") else logger.warning
        log(
            "webhook attempt recorded",
            extra={
                **delivery.log_ids(),
                "attempt": attempt,
                "status": decision.status,
                "response_status": outcome.status_code,
                "recorded": recorded,
            },
        )
        return recorded

    # -- the sweeper ---------------------------------------------------------------------
    def retry_due(self, now: datetime | None = None, limit: int = 40) -> RetryReport:
        """Make the attempts due at `now` (up to `limit` deliveries, a few at a time), and
        recover attempts whose worker stopped (recorded as failed, then scheduled). No attempt
        starts once `retry_budget_seconds` have passed: those deliveries are left unclaimed,
        still due (`deferred`), for the next sweep."""
        now = now or self.clock.now()
        due = self.deliveries.due(isoformat(now), limit)
        report = RetryReport()
        if not due:
            return report
        budget_ends = self.monotonic() + self.retry_budget_seconds
        if self.workers == 1 or len(due) == 1:
            results = [
                self._retry_one(batch_id, delivery_id, now, budget_ends) for batch_id, delivery_id in due
            ]
        else:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(due))) as pool:
                results = list(pool.map(lambda key: self._retry_one(key[0], key[1], now, budget_ends), due))
        for (_, delivery_id), (kind, status) in zip(due, results, strict=True):
            if kind in ("skipped", "deferred"):
                (report.skipped if kind == "skipped" else report.deferred).append(delivery_id)
                continue
            (report.recovered if kind == "recovered" else report.attempted).append(delivery_id)
            if status == "succeeded":
                report.succeeded.append(delivery_id)
            elif status == "dead_lettered":
                report.dead_lettered.append(delivery_id)
        return report

    def _retry_one(
        self, batch_id: str, delivery_id: str, now: datetime, budget_ends: float
    ) -> tuple[str, str | None]:
        try:
            delivery = self.deliveries.get(batch_id, delivery_id)
            if delivery is None:
                return "skipped", None
            now_iso = isoformat(now)
            status = delivery.status
            if status == "delivering":
                lease = delivery.lease_until
                if not lease or lease >= now_iso:
                    return "skipped", None  # a live attempt
                attempt = delivery.attempt_count
                interrupted = AttemptOutcome(None, INTERRUPTED, 0)
                if not self._record(delivery, attempt, interrupted, now, lease_expired_before=now_iso):
                    return "skipped", None
                return "recovered", decide(attempt, interrupted, now=now).status
            if status in ("pending", "failed") and (delivery.next_attempt_at or "~") <= now_iso:
                if self.monotonic() >= budget_ends:
                    return "deferred", None  # unclaimed: still due, for the next sweep
                updated = self._attempt(delivery, now)
                if updated is None:
                    return "skipped", None
                return "attempted", updated.status
        except Exception:
            # One broken delivery must not stop the sweep; it stays due and is tried again.
            logger.exception("webhook retry failed", extra={"batch_id": batch_id, "delivery_id": delivery_id})
        return "skipped", None

    # -- the read model ------------------------------------------------------------------
    def view(self, batch_id: str) -> BatchWebhooksView:
        return batch_webhooks_view(self.deliveries, batch_id)


@dataclass(eq=False)
class OrgEventWebhooks:
    """Creates the deliveries of org-level events (billing alerts) to the org's delivery
    webhook; their attempts are made by `WebhookDelivery(..., owner_field="org_id")`."""

    deliveries: DeliveryRecords
    orgs: Orgs

    def deliver_org_event(
        self, org_id: str, *, event_id: str, event_type: str, created_at: str, raw_body: str
    ) -> WebhookDeliveryRecord | None:
        """Create the delivery of an org event to the org's delivery webhook, pending and due
        at `created_at` (the sweeper's next run makes the first attempt). One delivery per
        event id; None when the org has no delivery webhook."""
        org = self.orgs.get_org(org_id)
        default = org.delivery_webhook if org else None
        if not default or not default.get("url") or not default.get("secret_ciphertext"):
            return None
        delivery_id = delivery_id_for(org_id, event_id)
        hook = ResolvedWebhook(str(default["url"]), str(default["secret_ciphertext"]), ORG_SOURCE)
        delivery = _pending(delivery_id, org_id, hook, (event_id, event_type, created_at), raw_body)
        if not self.deliveries.create(delivery):
            return self.deliveries.get(org_id, delivery_id)
        return delivery


def _pending(
    delivery_id: str, org_id: str, hook: ResolvedWebhook, event: tuple[str, str, str], payload: str
) -> WebhookDeliveryRecord:
    """A new delivery of `event` (id, type, time) to `hook`, its first attempt due at once."""
    event_id, event_type, created_at = event
    return WebhookDeliveryRecord(
        delivery_id=delivery_id,
        org_id=org_id,
        event_id=event_id,
        event_type=event_type,
        url=hook.url,
        status="pending",
        attempt_count=0,
        next_attempt_at=created_at,
        created_at=created_at,
        updated_at=created_at,
        payload=payload,
        secret_source=hook.secret_source,
        secret_sealed=hook.secret_sealed,
    )


class BatchWebhooksView(TypedDict):
    batch_id: str
    data: list[WebhookDeliveryView]
    events: list[WebhookAttemptView]


def batch_webhooks_view(deliveries: DeliveryListing, batch_id: str) -> BatchWebhooksView:
    """`{batch_id, data: [delivery], events: [attempt]}` for GET /v1/batches/{id}/webhooks."""
    records, attempts = deliveries.list_for_batch(batch_id)
    return {
        "batch_id": batch_id,
        "data": [d.to_api() for d in sorted(records, key=lambda d: d.created_at)],
        "events": [a.to_api() for a in sorted(attempts, key=lambda a: (a.delivery_id, a.attempt))],
    }
