"""The hosted tools each adapter can run, and how it declares them to its vendor: one data
table, catalog/data/hosted_tools.toml (docs/providers.md, "Hosted tools").

`vendor_tool(adapter, "web_search")` is the vendor's declaration of the service's tool, or
None where the adapter cannot run it; `runnable(adapter)` is the set of tools it can run. The
catalog offers a lane's hosted tool only where its provider's adapter can run it.
"""

from __future__ import annotations

import copy
import tomllib
from functools import cache
from importlib.resources import files
from typing import Any

from batchroute.providers.endpoints import AdapterKind


@cache
def _table() -> dict[str, dict[str, dict[str, Any]]]:
    text = (files("batchroute.catalog") / "data" / "hosted_tools.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def runnable(adapter: AdapterKind | str) -> frozenset[str]:
    """The service's hosted tools this adapter can run."""
    return frozenset(_table().get(adapter, {}))


def vendor_tool(adapter: AdapterKind | str, tool: str) -> dict[str, Any] | None:
    """The vendor's declaration of one hosted tool (a fresh copy), or None."""
    found = _table().get(adapter, {}).get(tool)
    return copy.deepcopy(found) if found is not None else None
