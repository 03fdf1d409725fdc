"""Auto top-up: when an org's balance falls below its trigger, charge its saved card off-session
for the configured amount, at most one attempt in flight, within the monthly cap, backing off
after failures (docs/payments.md).

`balance_moved` (a `BalanceListener` of the billing watch) records a `pending` attempt with ONE
conditional write of the settings (version-checked: concurrent movers start one attempt) and
the attempt item; it does not call the processor inside a customer's request unless
`charge_inline` is set. The sweeper (`sweep`) charges pending attempts (idempotency key = the
attempt id, so a repeated charge is the same PaymentIntent) and recovers stuck ones from the
processor. The processor's webhook (`succeeded` / `failed`, via `ProcessorEvents`) settles an
attempt: success credits the wallet through the ledger exactly once per PaymentIntent, the
attempt's success and the settings' (the slot freed) in the credit's own transaction;
failure records the reason, backs off and alerts, the settings in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal
from batchroute.domain.billing.alerts import AUTO_TOPUP_FAILED, AUTO_TOPUP_SUCCEEDED, Alert
from batchroute.domain.billing.ledger import CreditItemRefused, WalletState
from batchroute.domain.billing.payments import (
    AttemptFailure,
    AttemptPage,
    AutoTopup,
    AutoTopupView,
    Charge,
    PaymentMethod,
    TopupAttempt,
    UpdateAutoTopup,
    after_failure,
    after_success,
    after_withdrawal,
    apply_update,
    settled_slot,
    skip_reason,
    started,
    to_cents,
    topup_mismatch,
)
from batchroute.domain.billing.reconciliation import LedgerCredit
from batchroute.errors import Conflict, InvalidRequest, TransientError, Unavailable
from batchroute.ids import has_prefix, new_id
from batchroute.money import Money, money_text
from batchroute.observability import logger, metrics
from batchroute.services.billing.payment_notices import notify_quietly
from batchroute.services.billing.payment_refusals import refuse_payment_event
from batchroute.services.billing.ports import Notifier
from batchroute.transactions import TransactItem

_SAVE_ATTEMPTS = 5
# The processor keeps an idempotency key for 24 hours: an attempt still uncharged after this
# long is failed rather than charged again under a key it may have forgotten.
UNCHARGED_EXPIRY = timedelta(hours=23)
# A charged attempt the processor still has not settled this long after it started (its
# webhooks retried for three days) fails: a success it reports later still credits it.
UNRESOLVED_EXPIRY = timedelta(days=3)
# An attempt withdrawn before its card was charged: nothing failed, nothing was charged.
WITHDRAWN = AttemptFailure(
    "auto_topup_disabled",
    "Auto top-up was switched off before the card was charged; nothing was charged.",
    untried=True,
)
# An attempt whose sweep raised something no retry was expected to fix (logged, counted).
SWEEP_ERRORS_METRIC = "AutoTopupSweepErrors"


class SavedCards(Protocol):
    """The card an org's credit purchase saved for off-session charges."""

    def payment_method(self, org_id: str) -> PaymentMethod | None: ...


class TopupStore(SavedCards, Protocol):
    def auto_topup(self, org_id: str) -> AutoTopup: ...

    def save(
        self, new: AutoTopup, *, expected_version: int, extra_items: tuple[TransactItem, ...] = ()
    ) -> bool: ...

    def settings_item(self, new: AutoTopup, *, expected_version: int) -> TransactItem: ...

    def new_attempt_item(self, attempt: TopupAttempt) -> TransactItem: ...

    def attempt(self, org_id: str, attempt_id: str) -> TopupAttempt | None: ...

    def attempts(self, org_id: str, *, limit: int, after: str | None = None) -> list[TopupAttempt]: ...

    def record_charge(self, org_id: str, attempt_id: str, *, processor_ref: str, at: str) -> None: ...

    def charge_tried(self, org_id: str, attempt_id: str, *, at: str) -> bool: ...

    def succeeded_item(
        self, org_id: str, attempt_id: str, *, processor_ref: str, at: str
    ) -> TransactItem: ...

    def failed_item(
        self, org_id: str, attempt_id: str, failure: AttemptFailure, *, at: str
    ) -> TransactItem: ...

    def pending_attempts(self, created_before: str, *, limit: int = 50) -> list[TopupAttempt]: ...

    def customer_id(self, org_id: str) -> str | None: ...


class Credits(Protocol):
    def credit(self, credit: LedgerCredit, *, memo: str, extra_items: tuple[TransactItem, ...] = ()) -> bool:
        """Credit once per processor reference with `extra_items` in the same transaction;
        False when credited before; CreditItemRefused (nothing written) when an extra item's
        condition refused it."""
        ...


class Charger(Protocol):
    def charge_off_session(
        self, *, customer_id: str, payment_method_id: str, amount_cents: int, org_id: str, attempt_id: str
    ) -> Charge: ...

    def payment_intent(self, processor_ref: str) -> Charge: ...


OnMoved = Callable[[str, datetime], None]


def tell_moved(on_moved: OnMoved, org_id: str, at: datetime) -> None:
    """A credit is told to the balance watch; a failing watch never undoes the credit."""
    try:
        on_moved(org_id, at)
    except Exception:
        logger.exception("balance watch failed", extra={"org_id": org_id})


@dataclass
class TopupSweep:
    charged: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    left_pending: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)  # auto top-up switched off before any charge


@dataclass(eq=False, kw_only=True)
class AutoTopupService:
    store: TopupStore
    ledger: Credits
    processor: Charger
    notifier: Notifier
    on_moved: OnMoved
    clock: Clock
    charge_inline: bool = False
    stuck_after: timedelta = timedelta(minutes=10)

    # -- settings ----------------------------------------------------------------------------
    def get(self, org_id: str) -> AutoTopupView:
        return self.store.auto_topup(org_id).to_api(self.store.payment_method(org_id))

    def update(self, principal: Principal, command: UpdateAutoTopup) -> AutoTopupView:
        """Save the update (validated at the edge, functions/api/schemas/billing/payments.py)."""
        card = self.store.payment_method(principal.org_id)
        for _ in range(_SAVE_ATTEMPTS):
            current = self.store.auto_topup(principal.org_id)
            new = apply_update(current, command, payment_method=card, at=self.clock.now())
            if self.store.save(new, expected_version=current.version):
                logger.info("auto top-up saved", extra={"org_id": principal.org_id, "enabled": new.enabled})
                return self.store.auto_topup(principal.org_id).to_api(card)
        raise Conflict("The auto top-up settings changed meanwhile; try again.", code="concurrent_update")

    def attempts(self, org_id: str, *, limit: int, cursor: str | None) -> AttemptPage:
        if cursor is not None and not has_prefix(cursor, "topup"):
            raise InvalidRequest("cursor is not a cursor of this listing.", code="invalid_cursor")
        page = self.store.attempts(org_id, limit=limit + 1, after=cursor)
        more = len(page) > limit
        page = page[:limit]
        return {
            "data": [a.to_api() for a in page],
            "next_cursor": page[-1].attempt_id if more and page else None,
        }

    # -- the balance moved -------------------------------------------------------------------
    def balance_moved(self, org_id: str, wallet: WalletState, *, at: datetime) -> None:
        """BalanceListener: start a top-up when the balance is under the trigger. Never raises
        (the money movement that called it has happened; a missed start is retried by the next
        movement)."""
        try:
            self.maybe_start(org_id, wallet.balance, at=at)
        except Exception:
            logger.exception("auto top-up check failed", extra={"org_id": org_id})

    def maybe_start(self, org_id: str, balance: Money, *, at: datetime) -> TopupAttempt | None:
        settings = self.store.auto_topup(org_id)
        if not settings.enabled or balance >= settings.trigger_balance:
            return None  # the common case: one read
        card = self.store.payment_method(org_id)
        free = self._settled_slot(settings)
        if skip_reason(free, balance=balance, has_card=card is not None, at=at) is not None:
            return None
        stamp = isoformat(at)
        attempt = TopupAttempt(
            attempt_id=new_id("topup", at),
            org_id=org_id,
            amount=settings.amount,
            status="pending",
            created_at=stamp,
            updated_at=stamp,
        )
        saved = self.store.save(
            started(free, attempt.attempt_id, at=at),
            expected_version=settings.version,
            extra_items=(self.store.new_attempt_item(attempt),),
        )
        if not saved:
            return None  # another mover started one (or changed the settings) meanwhile
        logger.info("auto top-up started", extra={"org_id": org_id, "attempt_id": attempt.attempt_id})
        if self.charge_inline:
            self.charge(attempt)  # started just now from settings that are on
        return attempt

    def _settled_slot(self, settings: AutoTopup) -> AutoTopup:
        """The settings, their slot freed if the attempt they hold in flight is settled."""
        if settings.in_flight is None:
            return settings
        free = settled_slot(settings, self.store.attempt(settings.org_id, settings.in_flight))
        if free.in_flight is None:
            logger.warning(
                "auto top-up slot held by a settled attempt freed",
                extra={"org_id": settings.org_id, "attempt_id": settings.in_flight},
            )
        return free

    # -- charging ----------------------------------------------------------------------------
    def charge(self, attempt: TopupAttempt) -> Charge | None:
        """Charge a pending attempt off-session. A decline settles it as failed now (the
        processor's webhook would say the same); a success waits for the webhook's credit. A
        processor outage leaves it pending for the sweeper (TransientError is logged). The
        caller has ruled out a switch-off: the sweep withdraws an attempt never sent whose org
        switched auto top-up off (`_switched_off`, `withdraw`); an inline charge follows its
        start from settings that are on."""
        at = self.clock.now()
        # from here on a charge may reach the processor with its answer lost: the attempt is
        # then charged again under its key (the same PaymentIntent), never withdrawn
        if attempt.charge_tried_at is None and not self.store.charge_tried(
            attempt.org_id, attempt.attempt_id, at=isoformat(at)
        ):
            return None  # settled, withdrawn or switched off meanwhile: not charged
        customer = self.store.customer_id(attempt.org_id)
        card = self.store.payment_method(attempt.org_id)
        if customer is None or card is None:
            self._failed(attempt, "payment_method_missing", "No saved card to charge.", at=at)
            return None
        try:
            charge = self.processor.charge_off_session(
                customer_id=customer,
                payment_method_id=card.payment_method_id,
                amount_cents=to_cents(attempt.amount),
                org_id=attempt.org_id,
                attempt_id=attempt.attempt_id,
            )
        except (TransientError, Unavailable):
            logger.warning("auto top-up charge deferred", extra={"attempt_id": attempt.attempt_id})
            return None
        if charge.status == "failed":
            self.charge_failed(attempt.org_id, attempt.attempt_id, charge, at=at)
        elif charge.processor_ref:
            self.store.record_charge(
                attempt.org_id, attempt.attempt_id, processor_ref=charge.processor_ref, at=isoformat(at)
            )
        return charge

    def _failed(
        self, attempt: TopupAttempt, code: str, reason: str, *, at: datetime, processor_ref: str | None = None
    ) -> bool:
        return self.failed(
            attempt.org_id, attempt.attempt_id, processor_ref=processor_ref, code=code, reason=reason, at=at
        )

    def sweep(self, *, limit: int = 50) -> TopupSweep:
        """The sweeper's part: charge pending attempts not charged yet, and settle those the
        processor answered long ago from the PaymentIntent itself (a lost webhook). Each
        attempt on its own: one that raises is left pending (logged with its id; anything but
        a processor outage is counted in `AutoTopupSweepErrors`) and the next is swept."""
        report = TopupSweep()
        now = self.clock.now()
        for attempt in self.store.pending_attempts(isoformat(now + timedelta(seconds=1)), limit=limit):
            try:
                self._sweep_one(attempt, report, now=now)
            except (TransientError, Unavailable):
                report.left_pending.append(attempt.attempt_id)
            except Exception:
                logger.exception(
                    "auto top-up sweep of an attempt failed",
                    extra={"org_id": attempt.org_id, "attempt_id": attempt.attempt_id},
                )
                metrics.add_metric(name=SWEEP_ERRORS_METRIC, unit=MetricUnit.Count, value=1)
                report.left_pending.append(attempt.attempt_id)
        return report

    def _sweep_one(self, attempt: TopupAttempt, report: TopupSweep, *, now: datetime) -> None:
        if attempt.processor_ref is None and attempt.created_at <= isoformat(now - UNCHARGED_EXPIRY):
            self._failed(attempt, "attempt_expired", "The processor could not be reached in time.", at=now)
        elif attempt.processor_ref is None and self._switched_off(attempt):
            if self.withdraw(attempt, at=now):
                report.withdrawn.append(attempt.attempt_id)
        elif attempt.processor_ref is None:
            self.charge(attempt)  # (switched off: withdrawn above)
            report.charged.append(attempt.attempt_id)
        elif attempt.updated_at <= isoformat(now - self.stuck_after):
            settled = self._recover(attempt, attempt.processor_ref, now=now)
            (report.recovered if settled else report.left_pending).append(attempt.attempt_id)
        else:
            report.left_pending.append(attempt.attempt_id)

    def _recover(self, attempt: TopupAttempt, processor_ref: str, *, now: datetime) -> bool:
        """Settle a charged attempt from its PaymentIntent; True when it is settled. One still
        unsettled (or whose lookup keeps raising) `UNRESOLVED_EXPIRY` after it started fails
        with `attempt_unresolved`, so it cannot hold the org's slot (and the sweep's oldest
        place) for ever; a success the processor reports later still credits it."""
        expired = attempt.created_at <= isoformat(now - UNRESOLVED_EXPIRY)
        try:
            if self.settle(attempt.org_id, attempt.attempt_id, self.processor.payment_intent(processor_ref)):
                return True
        except Exception:
            if not expired:
                raise
            logger.exception("auto top-up recovery failed", extra={"attempt_id": attempt.attempt_id})
        if not expired:
            return False
        return self._failed(
            attempt,
            "attempt_unresolved",
            "The processor did not settle the payment in time.",
            at=now,
            processor_ref=processor_ref,
        )

    # -- outcomes ----------------------------------------------------------------------------
    def settle(self, org_id: str, attempt_id: str, charge: Charge) -> bool:
        """Apply what the processor says of the attempt's PaymentIntent; True when that settled
        the attempt (credited, or failed)."""
        at = self.clock.now()
        if charge.status == "succeeded":  # False when refused: the attempt stays pending
            return self.succeeded(org_id, attempt_id, charge, at=at)
        if charge.status == "failed":
            self.charge_failed(org_id, attempt_id, charge, at=at)
            return True
        return False

    def succeeded(
        self, org_id: str, attempt_id: str, charge: Charge, *, at: datetime, event_id: str | None = None
    ) -> bool:
        """Credit the top-up once per PaymentIntent, with the attempt marked succeeded and the
        settings freed (`after_success`, conditional on their version) in the same transaction:
        when the settings moved meanwhile nothing is written and the whole step runs again on
        fresh reads. A repeat credits nothing and returns False, but frees the slot if the
        settings still hold this (succeeded) attempt in flight (`_repeated`). A charge that is
        not this attempt's (`topup_mismatch`: no such attempt, another PaymentIntent, another
        amount or currency) credits nothing and is refused (logged with `event_id`, counted)."""
        stamp = isoformat(at)
        credit = LedgerCredit(
            org_id=org_id, processor_ref=charge.processor_ref, kind="topup", amount=charge.amount, at=stamp
        )
        for _ in range(_SAVE_ATTEMPTS):
            attempt = self.store.attempt(org_id, attempt_id)
            problem = topup_mismatch(attempt, charge)
            if problem is not None or attempt is None:
                refuse_payment_event(
                    problem or "no such auto top-up attempt",
                    event_id=event_id,
                    org_id=org_id,
                    attempt_id=attempt_id,
                    processor_ref=charge.processor_ref,
                )
                return False
            settings = self.store.auto_topup(org_id)
            extra = (
                self.store.succeeded_item(org_id, attempt_id, processor_ref=charge.processor_ref, at=stamp),
                self.store.settings_item(after_success(settings, attempt), expected_version=settings.version),
            )
            try:
                credited = self.ledger.credit(credit, memo=f"auto top-up {attempt_id}", extra_items=extra)
            except CreditItemRefused:
                continue  # the settings (or the attempt) moved since they were read: read again
            if not credited:
                self._repeated(org_id, attempt_id, at=at)
                return False
            logger.info("auto top-up credited", extra={"org_id": org_id, "attempt_id": attempt_id})
            self._succeeded_notices(org_id, attempt_id, charge.processor_ref, charge.amount, at=at)
            return True
        raise TransientError(f"crediting the auto top-up {attempt_id} kept colliding with settings writes")

    def _repeated(self, org_id: str, attempt_id: str, *, at: datetime) -> None:
        """A success credited before: if the settings still hold its attempt in flight (a first
        delivery that crashed between the credit and a separate settings write, before they
        shared the transaction), apply the success to them now, send its notice (recorded once
        per attempt) and tell the balance watch, so auto top-up goes on. Otherwise nothing."""
        attempt = self.store.attempt(org_id, attempt_id)
        if attempt is None or attempt.status != "succeeded":
            return
        if not self._update_settings(
            org_id, lambda s: after_success(s, attempt) if s.in_flight == attempt_id else None
        ):
            return
        logger.warning(
            "auto top-up slot freed on a repeated success", extra={"org_id": org_id, "attempt_id": attempt_id}
        )
        if attempt.processor_ref is not None:
            self._succeeded_notices(org_id, attempt_id, attempt.processor_ref, attempt.amount, at=at)

    def _succeeded_notices(
        self, org_id: str, attempt_id: str, processor_ref: str, amount: Money, *, at: datetime
    ) -> None:
        """After a credit: the success alert (once per attempt) and the balance watch."""
        notify_quietly(
            self.notifier,
            org_id,
            Alert(
                AUTO_TOPUP_SUCCEEDED,
                f"auto_topup_succeeded:{attempt_id}",
                {"attempt_id": attempt_id, "amount": amount.to_api(), "processor_reference": processor_ref},
            ),
            at=at,
        )
        tell_moved(self.on_moved, org_id, at)

    def charge_failed(self, org_id: str, attempt_id: str, charge: Charge, *, at: datetime) -> bool:
        """`failed`, in the processor's words for the charge (ours where it gave none)."""
        return self.failed(
            org_id,
            attempt_id,
            processor_ref=charge.processor_ref,
            code=charge.failure_code or "payment_failed",
            reason=charge.failure_reason or "The payment did not go through.",
            at=at,
        )

    def _switched_off(self, attempt: TopupAttempt) -> bool:
        """Whether the attempt was never sent to the processor and its org's auto top-up is
        off now (it is withdrawn, not charged)."""
        return attempt.charge_tried_at is None and not self.store.auto_topup(attempt.org_id).enabled

    def withdraw(self, attempt: TopupAttempt, *, at: datetime) -> bool:
        """End an attempt never sent to the processor, auto top-up switched off since it
        started: `failed` with `auto_topup_disabled`, its slot and month's room freed, but no
        failure counted, no back-off and no "failed" email (nothing failed, nothing was
        charged). False when it was settled before."""
        for _ in range(_SAVE_ATTEMPTS):
            current = self.store.attempt(attempt.org_id, attempt.attempt_id)
            if current is None or current.status != "pending" or current.charge_tried_at is not None:
                return False
            settings = self.store.auto_topup(attempt.org_id)
            ended = self.store.failed_item(attempt.org_id, attempt.attempt_id, WITHDRAWN, at=isoformat(at))
            new = after_withdrawal(settings, current, at=at)
            if self.store.save(new, expected_version=settings.version, extra_items=(ended,)):
                logger.info("auto top-up withdrawn: switched off", extra={"attempt_id": attempt.attempt_id})
                return True
        raise TransientError(f"withdrawing {attempt.attempt_id} kept colliding")

    def failed(
        self, org_id: str, attempt_id: str, *, processor_ref: str | None, code: str, reason: str, at: datetime
    ) -> bool:
        """Record a failed attempt once (only a pending one fails), free the slot, back off,
        and alert; False when it was settled before."""
        stamp = isoformat(at)
        for _ in range(_SAVE_ATTEMPTS):
            attempt = self.store.attempt(org_id, attempt_id)
            if attempt is None or attempt.status != "pending":
                return False
            if processor_ref and attempt.processor_ref and processor_ref != attempt.processor_ref:
                # another PaymentIntent's failure: the attempt's own may yet succeed
                logger.warning(
                    "auto top-up failure of another PaymentIntent ignored",
                    extra={"attempt_id": attempt_id, "processor_ref": processor_ref},
                )
                return False
            settings = self.store.auto_topup(org_id)
            new = after_failure(settings, attempt, at=at)
            failure = AttemptFailure(code, reason, processor_ref)
            failed_item = self.store.failed_item(org_id, attempt_id, failure, at=stamp)
            if self.store.save(new, expected_version=settings.version, extra_items=(failed_item,)):
                logger.warning(
                    "auto top-up failed", extra={"org_id": org_id, "attempt_id": attempt_id, "code": code}
                )
                notify_quietly(
                    self.notifier, org_id, _failed_alert(attempt, new, code=code, reason=reason), at=at
                )
                return True
        raise TransientError(f"recording the failure of {attempt_id} kept colliding")

    # -- refunds and disputes of the org's payments (services/billing/reversals.py) ----------
    def awaiting_credit(self, org_id: str, attempt_id: str, processor_ref: str) -> bool:
        """Whether the attempt may still be credited for this PaymentIntent: it is pending
        (the webhook or the sweeper's recovery will settle it), or failed after charging this
        very PaymentIntent (a success reported later still credits it)."""
        attempt = self.store.attempt(org_id, attempt_id) if attempt_id else None
        if attempt is None:
            return False
        if attempt.status == "pending":
            return attempt.processor_ref in (None, processor_ref)
        return attempt.status == "failed" and attempt.processor_ref == processor_ref

    def switch_off(self, org_id: str, reason: str, *, since: str | None = None) -> bool:
        """Switch auto top-up off with `disabled_reason` (a payment of the org refunded or
        disputed: its saved card is not charged again until the user saves the settings
        again); unless it is off already, or the user saved the settings after `since` (the
        instant of what switches it off: a late repeat of it changes nothing). True when it
        was switched off."""

        def off(current: AutoTopup) -> AutoTopup | None:
            if not current.enabled or (since and current.updated_at and current.updated_at > since):
                return None
            return replace(current, version=current.version + 1, enabled=False, disabled_reason=reason)

        if not self._update_settings(org_id, off):
            return False
        logger.warning("auto top-up switched off", extra={"org_id": org_id, "disabled_reason": reason})
        return True

    # -- helpers -----------------------------------------------------------------------------
    def _update_settings(self, org_id: str, change: Callable[[AutoTopup], AutoTopup | None]) -> bool:
        """Save `change` of the current settings (read again after a collision); False when it
        changes nothing. Raises TransientError when they kept colliding (a webhook answers 5xx
        and is delivered again)."""
        for _ in range(_SAVE_ATTEMPTS):
            current = self.store.auto_topup(org_id)
            new = change(current)
            if new is None:
                return False
            if self.store.save(new, expected_version=current.version):
                return True
        raise TransientError(f"the auto top-up settings of {org_id} kept colliding")


def _failed_alert(attempt: TopupAttempt, settings: AutoTopup, *, code: str, reason: str) -> Alert:
    """The `billing.auto_topup_failed` event of a failed attempt, with the settings it left."""
    return Alert(
        AUTO_TOPUP_FAILED,
        f"auto_topup_failed:{attempt.attempt_id}",
        {
            "attempt_id": attempt.attempt_id,
            "amount": attempt.amount.to_api(),
            "failure_code": code,
            "failure_reason": reason,
            "consecutive_failures": settings.failures,
            "retry_after": settings.retry_after,
            "auto_topup_disabled": not settings.enabled,
            "message": f"An auto top-up of {money_text(attempt.amount)} failed: {reason}",
        },
    )
