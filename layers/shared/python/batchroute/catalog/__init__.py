"""The built-in catalog: providers, models, lanes, workflow products and the fee schedule.

Versioned data in the shared layer: the files in batchroute/catalog/data/ (loader.py reads
them; docs/catalog.md describes them). A price or lane change is a data change that bumps
`version` and `pricing_updated_at` in data/catalog.toml, reviewed and deployed like any other.
Live state (remaining capacity, last heartbeat) is not here: it is in DynamoDB
(adapters/dynamo/lanes.py).

Importing this package reads nothing: the data is loaded, checked and cached on the first
call of builtin_catalog() (or the first read of CATALOG_VERSION / PRICING_UPDATED_AT), once
per process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchroute.catalog.lazy import once

if TYPE_CHECKING:
    from batchroute.domain.catalog.catalog import Catalog


@once
def builtin_catalog() -> Catalog:
    from batchroute.catalog.loader import load_catalog  # on first use: keeps cold starts lean

    return load_catalog()


def __getattr__(name: str) -> str:
    """CATALOG_VERSION and PRICING_UPDATED_AT, read from data/catalog.toml on first use."""
    if name == "CATALOG_VERSION":
        return builtin_catalog().version
    if name == "PRICING_UPDATED_AT":
        return builtin_catalog().pricing_updated_at
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CATALOG_VERSION", "PRICING_UPDATED_AT", "builtin_catalog"]  # two names come from __getattr__
