"""Auto top-up settings, top-up attempts and the org's processor profile, in the `controls`
table (docs/payments.md). Items (partition `ORG#<org>`):

- `AUTOTOPUP`: the settings and the state of the org's top-ups (in-flight attempt, failures,
  back-off, the month's committed amount), written whole and conditional on `version`, so
  two movers that both see the balance under the trigger start ONE attempt;
- `TOPUP#<attempt id>`: one attempt; while pending it carries the sparse `gsi1` keys
  (`TOPUP#PENDING` / `<created_at>#<org>#<id>`) so the sweeper finds the ones to charge or
  recover;
- `PAYMENT_PROFILE`: the processor's customer id and the card saved for off-session charges.

And one item per Checkout Session the service opened, keyed by the session alone (partition
`CHECKOUT#<session id>`, sort `CHECKOUT`) so an event naming another org still finds it: the
org, user, amount in cents, currency and `status` (`open`, then `credited` in the credit's
transaction, `checkout_credited_item`). A session without one credits nothing (issue 27).

The credit itself is the ledger's (`LedgerStore.credit`); an attempt's success is one of its
`extra_items` (`succeeded_item`), so the attempt and the credit are written together.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import (
    EXISTS,
    condition_check,
    from_item,
    org_item,
    org_key,
    org_pk,
    plain,
    update_request,
)
from batchroute.adapters.dynamo.reads import index_before, prefix_query
from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.adapters.dynamo.writes import conditional_transaction, conditional_update, put_new
from batchroute.domain.billing.payments import (
    AttemptFailure,
    AutoTopup,
    CheckoutRecord,
    PaymentMethod,
    TopupAttempt,
)
from batchroute.domain.stored import from_stored
from batchroute.money import Money
from batchroute.transactions import TransactItem

PENDING_TOPUPS = "TOPUP#PENDING"
_SETTINGS_SK = "AUTOTOPUP"
_PROFILE_SK = "PAYMENT_PROFILE"
_ATTEMPT_PREFIX = "TOPUP#"
_STATUS = {"#status": "status"}  # `status` is a reserved word
_CHECKOUT_PREFIX = "CHECKOUT#"
_CHECKOUT_SK = "CHECKOUT"


class PaymentsStore(DynamoStore):
    # -- settings --------------------------------------------------------------------------
    def auto_topup(self, org_id: str) -> AutoTopup:
        """The org's settings (the defaults, version 0, until the first save)."""
        item = self._get(org_id, _SETTINGS_SK)
        if item is None:
            return AutoTopup(org_id=org_id)
        return AutoTopup(
            org_id=org_id,
            enabled=bool(item["enabled"]),
            trigger_balance=Money(int(item["trigger_micros"])),
            amount=Money(int(item["amount_micros"])),
            monthly_cap=Money(int(item["monthly_cap_micros"])),
            configured=bool(item.get("configured", True)),
            created_at=item.get("created_at"),
            updated_at=item.get("updated_at"),
            version=int(item["version"]),
            in_flight=item.get("in_flight"),
            failures=int(item.get("failures", 0)),
            retry_after=item.get("retry_after"),
            disabled_reason=item.get("disabled_reason"),
            month=item.get("month"),
            month_committed=Money(int(item.get("month_committed_micros", 0))),
        )

    def settings_item(self, new: AutoTopup, *, expected_version: int) -> TransactItem:
        """A Put of the whole settings item, refused unless it is still at `expected_version`."""
        values = {
            **org_item(new.org_id, _SETTINGS_SK, "auto_topup"),
            "org_id": new.org_id,
            "enabled": new.enabled,
            "trigger_micros": new.trigger_balance.micros,
            "amount_micros": new.amount.micros,
            "monthly_cap_micros": new.monthly_cap.micros,
            "configured": new.configured,
            "created_at": new.created_at,
            "updated_at": new.updated_at,
            "version": expected_version + 1,
            "in_flight": new.in_flight,
            "failures": new.failures,
            "retry_after": new.retry_after,
            "disabled_reason": new.disabled_reason,
            "month": new.month,
            "month_committed_micros": new.month_committed.micros,
        }
        return {"Put": self.versioned_put(values, expected_version)}

    def save(
        self, new: AutoTopup, *, expected_version: int, extra_items: tuple[TransactItem, ...] = ()
    ) -> bool:
        """Write the settings (with `extra_items` in the same transaction); False when another
        writer moved them past `expected_version` (or an extra item's condition refused)."""
        items = [self.settings_item(new, expected_version=expected_version), *extra_items]
        return conditional_transaction(self.dynamodb, TransactItems=items)

    # -- attempts --------------------------------------------------------------------------
    def new_attempt_item(self, attempt: TopupAttempt) -> TransactItem:
        values = {
            **org_item(attempt.org_id, _ATTEMPT_PREFIX + attempt.attempt_id, "topup_attempt"),
            **_attempt_values(attempt),
            "gsi1pk": PENDING_TOPUPS,
            "gsi1sk": f"{attempt.created_at}#{attempt.org_id}#{attempt.attempt_id}",
        }
        return put_new(self.table_name, values)

    def attempt(self, org_id: str, attempt_id: str) -> TopupAttempt | None:
        item = self._get(org_id, _ATTEMPT_PREFIX + attempt_id)
        return _attempt(item) if item is not None else None

    def attempts(self, org_id: str, *, limit: int, after: str | None = None) -> list[TopupAttempt]:
        """Attempts newest first (ids sort by creation), after the attempt id `after`."""
        start = None if after is None else _ATTEMPT_PREFIX + after
        response = self.dynamodb.query(
            **prefix_query(
                self.table_name,
                org_pk(org_id),
                _ATTEMPT_PREFIX,
                start_sk=start,
                ScanIndexForward=False,
                Limit=limit,
            )
        )
        return [_attempt(from_item(i)) for i in response.get("Items", [])]

    def record_charge(self, org_id: str, attempt_id: str, *, processor_ref: str, at: str) -> None:
        """Note the PaymentIntent of a pending attempt (once the processor answered)."""
        self._update_pending(
            org_id,
            attempt_id,
            "SET processor_ref = :ref, updated_at = :at",
            {":ref": processor_ref, ":at": at},
        )

    def charge_tried(self, org_id: str, attempt_id: str, *, at: str) -> bool:
        """Note that a charge of the pending attempt is about to reach the processor (kept the
        first time: the attempt is never withdrawn after it), in one transaction with a check
        that the org's auto top-up is on; False when the attempt is no longer pending (settled,
        or withdrawn, meanwhile) or auto top-up is off (switched off since the attempt started,
        by the user or a dispute or refund: the sweep withdraws it). Either way it is not
        charged."""
        tried = update_request(
            self.table_name,
            org_key(org_id, _ATTEMPT_PREFIX + attempt_id),
            "SET charge_tried_at = if_not_exists(charge_tried_at, :at)",
            condition="#status = :pending",
            names=_STATUS,
            values={":at": at, ":pending": "pending"},
        )
        switched_on = condition_check(
            self.table_name, org_key(org_id, _SETTINGS_SK), "enabled = :on", values={":on": True}
        )
        return self.transact([{"Update": tried}, switched_on])

    def _update_pending(
        self, org_id: str, attempt_id: str, expression: str, values: dict[str, object]
    ) -> bool:
        """`expression` on the attempt, only while it is pending (False: it is not)."""
        return self.update_where(
            org_key(org_id, _ATTEMPT_PREFIX + attempt_id),
            expression,
            condition="#status = :pending",
            names=_STATUS,
            values={**values, ":pending": "pending"},
        )

    def succeeded_item(self, org_id: str, attempt_id: str, *, processor_ref: str, at: str) -> TransactItem:
        """The attempt's success, for the credit's transaction (whatever it read before: a
        success the processor reports after a failure still means the money was taken)."""
        update = update_request(
            self.table_name,
            org_key(org_id, _ATTEMPT_PREFIX + attempt_id),
            "SET #status = :succeeded, processor_ref = :ref, updated_at = :at "
            "REMOVE gsi1pk, gsi1sk, failure_code, failure_reason",
            condition=EXISTS,
            names=_STATUS,
            values={":succeeded": "succeeded", ":ref": processor_ref, ":at": at},
        )
        return {"Update": update}

    def failed_item(self, org_id: str, attempt_id: str, failure: AttemptFailure, *, at: str) -> TransactItem:
        """The attempt's failure, refused unless it is still pending (a failure reported after
        a success changes nothing); an `untried` one also unless no charge of it was ever sent
        (`charge_tried`: a withdrawal never races a charge)."""
        values: dict[str, object] = {
            ":failed": "failed",
            ":pending": "pending",
            ":code": failure.code,
            ":reason": failure.reason[:500],
            ":at": at,
        }
        expression = "SET #status = :failed, failure_code = :code, failure_reason = :reason, updated_at = :at"
        if failure.processor_ref:
            expression += ", processor_ref = :ref"
            values[":ref"] = failure.processor_ref
        update = update_request(
            self.table_name,
            org_key(org_id, _ATTEMPT_PREFIX + attempt_id),
            expression + " REMOVE gsi1pk, gsi1sk",
            condition="#status = :pending"
            + (" AND attribute_not_exists(charge_tried_at)" if failure.untried else ""),
            names=_STATUS,
            values=values,
        )
        return {"Update": update}

    def pending_attempts(self, created_before: str, *, limit: int = 50) -> list[TopupAttempt]:
        """Pending attempts created before `created_before`, oldest first (sparse gsi1)."""
        response = self.dynamodb.query(
            **index_before(self.table_name, "gsi1", PENDING_TOPUPS, created_before, Limit=limit)
        )
        found = []
        for key in response.get("Items", []):
            item = from_item(key)
            attempt = (
                self.attempt(item["org_id"], item["attempt_id"])
                if "amount_micros" not in item
                else _attempt(item)
            )
            if attempt is not None and attempt.status == "pending":
                found.append(attempt)
        return found

    # -- the processor profile -------------------------------------------------------------
    def customer_id(self, org_id: str) -> str | None:
        item = self._get(org_id, _PROFILE_SK)
        return item.get("customer_id") if item else None

    def payment_method(self, org_id: str) -> PaymentMethod | None:
        item = self._get(org_id, _PROFILE_SK)
        card = (item or {}).get("payment_method")
        return PaymentMethod(**card) if card else None

    def claim_customer(self, org_id: str, customer_id: str, *, at: str) -> str:
        """Keep `customer_id` as the org's processor customer unless one is kept already;
        returns the one kept (so two first purchases at once share one customer)."""
        claim = self._profile_update(
            org_id, "customer_id", customer_id, at=at, condition="attribute_not_exists(customer_id)"
        )
        if conditional_update(self.dynamodb, **claim):
            return customer_id
        return self.customer_id(org_id) or customer_id

    def save_payment_method(self, org_id: str, card: PaymentMethod, *, at: str) -> None:
        self.dynamodb.update_item(**self._profile_update(org_id, "payment_method", asdict(card), at=at))

    def _profile_update(
        self, org_id: str, name: str, value: object, *, at: str, condition: str | None = None
    ) -> dict[str, Any]:
        """SET one field of the org's payment profile (the item made by the first)."""
        return update_request(
            self.table_name,
            org_key(org_id, _PROFILE_SK),
            f"SET {name} = :v, org_id = :o, #kind = :k, updated_at = :at",
            condition=condition,
            names={"#kind": "kind"},
            values={":v": value, ":o": org_id, ":k": "payment_profile", ":at": at},
        )

    # -- the service's own checkout records ------------------------------------------------
    def record_checkout(self, record: CheckoutRecord) -> None:
        """Keep the record of a session just opened (a session id is recorded once)."""
        self.insert(
            {
                "pk": _CHECKOUT_PREFIX + record.session_id,
                "sk": _CHECKOUT_SK,
                "kind": "checkout",
                **asdict(record),
            }
        )

    def checkout_record(self, session_id: str) -> CheckoutRecord | None:
        item = self.item_at(_checkout_key(session_id))
        if item is None:
            return None
        return from_stored(CheckoutRecord, plain(item))

    def checkout_credited_item(self, session_id: str, *, at: str) -> TransactItem:
        """The record marked credited, for the credit's transaction."""
        update = update_request(
            self.table_name,
            _checkout_key(session_id),
            "SET #status = :credited, credited_at = :at",
            condition=EXISTS,
            names=_STATUS,
            values={":credited": "credited", ":at": at},
        )
        return {"Update": update}

    # -- helpers ---------------------------------------------------------------------------
    def _get(self, org_id: str, sk: str) -> dict[str, Any] | None:
        return self.item_at(org_key(org_id, sk))


def _checkout_key(session_id: str) -> dict[str, Any]:
    return {"pk": {"S": _CHECKOUT_PREFIX + session_id}, "sk": {"S": _CHECKOUT_SK}}


def _attempt_values(attempt: TopupAttempt) -> dict[str, Any]:
    values = asdict(attempt)
    del values["amount"]  # stored as a whole number of micros (USD)
    return {**values, "amount_micros": attempt.amount.micros}


def _attempt(item: dict[str, Any]) -> TopupAttempt:
    return from_stored(TopupAttempt, item, amount=Money(int(item["amount_micros"])))
