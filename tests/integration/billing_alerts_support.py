"""Billing controls set straight in the controls table for billing-alert tests on moto (as the
billing settings endpoints save them, with an audit entry): a monthly spending limit."""

from __future__ import annotations

from typing import Any

from batchroute.money import Money
from tests.integration.test_billing_alerts import set_controls


def set_monthly_limit(org_id: str, amount: str, mode: str, **fields: Any) -> None:
    """A monthly spending limit of `amount` USD in `mode` ("soft" or "hard"), with any other
    billing control `fields`."""
    set_controls(
        org_id,
        limit_enabled=True,
        limit_period="monthly",
        limit_amount=Money.usd(amount),
        limit_mode=mode,
        **fields,
    )
