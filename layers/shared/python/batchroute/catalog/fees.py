"""The one fee schedule: what the service charges on top of provider cost.

Quotes and settlement price with this object (via the catalog), and GET /v1/pricing/fees
publishes it, so what is shown is what is charged.
"""

from __future__ import annotations

from decimal import Decimal

from batchroute.domain.catalog import FeeSchedule

FEES = FeeSchedule(
    # % of the provider subtotal of a model batch (items naming a catalog model).
    standard_batch_fee_pct=Decimal("5.90"),
    # % of the provider subtotal of a workflow-product batch (outcome contracts: the service
    # also owns the schemas, validation and the route policy).
    workflow_product_fee_pct=Decimal("11.80"),
    # The fee never falls below this share of the provider subtotal, whatever discount applies.
    margin_floor_pct=Decimal("5.90"),
    # Flat USD per lane a batch runs on: one provider/model execution with its own dispatch,
    # polling, result merge and receipt.
    control_plane_fee_per_lane_usd=Decimal("0.01"),
    effective_at="2026-11-01T00:00:00Z",
)
