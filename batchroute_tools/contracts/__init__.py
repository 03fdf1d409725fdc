"""The vendors' published contracts, as checks (docs/providers.md, "Contracts").

One module per vendor, each with the same two functions:

- `request_violations(operation, body) -> list[str]`: [] when `body` is a valid request of
  the vendor's `operation` by its published contract (OpenAI's OpenAPI document, the
  official SDKs' request types, botocore's service model), else one line per violation;
- `outgoing(request, endpoint, *, lane_max_output_tokens) -> [(operation, body)]`: every
  body the adapter built from `endpoint` sends for `request` (the whole call, the streamed
  call and the vendor batch line or record), from the transforms the adapter itself calls.

The emulators check every request they receive with `request_violations` and answer the
vendor's own 400 (docs/emulators.md); tests/unit/test_vendor_contracts.py checks
`outgoing` over everything the preflight accepts. Test and local-mode code: the service
itself never imports this package.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

# Adapter kind (batchroute.providers.endpoints.AdapterKind) -> its contract module.
CONTRACTS: Final[dict[str, str]] = {
    "openai": "batchroute_tools.contracts.openai",
    "openai_compatible": "batchroute_tools.contracts.openai",
    "anthropic": "batchroute_tools.contracts.anthropic",
    "gemini": "batchroute_tools.contracts.gemini",
    "bedrock": "batchroute_tools.contracts.bedrock",
}


def contract(adapter: str) -> ModuleType:
    """The contract module of an adapter kind."""
    return importlib.import_module(CONTRACTS[adapter])
