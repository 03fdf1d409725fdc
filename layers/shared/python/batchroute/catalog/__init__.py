"""The built-in catalog: providers, models, lanes, workflow products and the fee schedule.

Versioned data in the shared layer: a price or lane change is a code change that bumps
CATALOG_VERSION and PRICING_UPDATED_AT, reviewed and deployed like any other. Live state
(remaining capacity, last heartbeat) is not here: it is in DynamoDB
(adapters/dynamo/lanes.py). docs/catalog.md has the sources and the rationale.
"""

from __future__ import annotations

from functools import cache

from batchroute.catalog.fees import FEES
from batchroute.catalog.lanes import LANES
from batchroute.catalog.models import MODELS
from batchroute.catalog.providers import PROVIDERS
from batchroute.catalog.workflow_products import WORKFLOW_PRODUCTS
from batchroute.domain.catalog import Catalog

CATALOG_VERSION = "2026-11-01.1"
PRICING_UPDATED_AT = "2026-11-01T00:00:00Z"


@cache
def builtin_catalog() -> Catalog:
    return Catalog(
        version=CATALOG_VERSION,
        pricing_updated_at=PRICING_UPDATED_AT,
        providers=PROVIDERS,
        models=MODELS,
        lanes=LANES,
        workflow_products=WORKFLOW_PRODUCTS,
        fees=FEES,
    )


__all__ = ["CATALOG_VERSION", "PRICING_UPDATED_AT", "builtin_catalog"]
