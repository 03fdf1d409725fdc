"""The card a credit purchase saves for auto top-up, over HTTP on moto against the payment
emulator (docs/payments.md): the purchase that credits saves its card; a repeated (older)
completion never puts its card back over a later purchase's, and a repeat whose first
delivery failed after crediting still saves the card when none is saved."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from batchroute.domain.billing.payments import PaymentMethod
from batchroute.money import Money
from tests.integration.payments_harness import DECLINES_LATER, GOOD_CARD, Bench
from tests.integration.payments_harness import real_time_clock as real_time_clock  # the fixtures
from tests.integration.payments_harness import running_bench as running_bench


def test_a_repeated_older_completion_keeps_the_later_purchases_card(bench: Bench) -> None:
    # Given a purchase with a card that declines off-session, then one with a good card
    bench.buy(25, card=DECLINES_LATER)
    old = bench.wiring.payments_store.payment_method(bench.org.org_id)
    bench.buy(25, card=GOOD_CARD)
    new = bench.wiring.payments_store.payment_method(bench.org.org_id)
    assert old is not None and new is not None and new != old
    # When the processor delivers the first purchase's completion again
    first_completed, _ = bench.event_ids("checkout.session.completed")
    assert bench.emulator.redeliver(first_completed) == 200
    # Then the later purchase's card stays the one auto top-up charges
    assert bench.wiring.payments_store.payment_method(bench.org.org_id) == new
    bench.configure(enabled=True, trigger_balance="100", amount="50")
    bench.moved()
    bench.wiring.sweeper.sweep()
    bench.emulator.deliver_pending()
    (attempt,) = bench.attempts()
    assert attempt["status"] == "succeeded"
    assert bench.emulator.intents[attempt["processor_reference"]]["payment_method"] == new.payment_method_id


def test_a_repeat_saves_the_card_its_first_delivery_credited_without_saving(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a purchase whose first delivery credits and then fails to save its card
    store = bench.wiring.payments_store
    real = store.save_payment_method

    def failing(org_id: str, card: PaymentMethod, *, at: str) -> None:
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException"}}, "UpdateItem")

    monkeypatch.setattr(store, "save_payment_method", failing)
    start = bench.balance()
    checkout = bench.checkout(25)
    assert bench.pay(checkout).status_code == 303
    assert 500 in bench.emulator.deliver_pending()
    assert bench.balance() == start + Money.usd(25)  # credited before the card's write failed
    assert store.payment_method(bench.org.org_id) is None
    # When the processor delivers it again
    monkeypatch.setattr(store, "save_payment_method", real)
    (completed,) = bench.event_ids("checkout.session.completed")
    assert bench.emulator.redeliver(completed) == 200
    # Then the card is saved, and nothing more credited
    card = store.payment_method(bench.org.org_id)
    assert card is not None and card.last4 == GOOD_CARD[-4:]
    assert bench.balance() == start + Money.usd(25)
