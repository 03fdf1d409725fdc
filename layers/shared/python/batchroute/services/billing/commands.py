"""The billing commands the edge builds from a validated request body (functions/api/schemas/)
and hands the services. The partial updates of settings the domain rules apply are declared
next to those rules: `UpdateControls` (domain/billing/controls.py), `UpdateAutoTopup`
(domain/billing/payments.py), `UpdateRetention` (domain/billing/retention.py)."""

from __future__ import annotations

from dataclasses import dataclass

from batchroute.money import Money


@dataclass(frozen=True, slots=True)
class StartCheckout:
    """Buy credits: open a Checkout Session for `amount` USD (5..10000 in whole cents)."""

    amount: Money
