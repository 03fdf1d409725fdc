"""Anthropic: `make_sync` / `make_batch` build the adapters of an endpoint (docs/providers.md,
Anthropic): the Messages API for per-item calls and the direct chat path, Message Batches for
batch lanes.

The endpoint's base URL is the API root without `/v1` (https://api.anthropic.com by default;
the local emulator's is http://127.0.0.1:<port>/anthropic): the adapters' paths start with
/v1. Every call carries the operator's key (`x-api-key`, from the provider's secret), the
pinned API version and the betas the adapter's server tools need (BETAS). A request without
an output limit is sent with its lane's `max_output_tokens`, read from the built-in catalog
when the adapter is built. A non-2xx answer maps as providers/http.py says, except an account
out of credit (`transform.status_error`): the lane is unavailable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import httpx

import batchroute.providers.anthropic.transform as transform
from batchroute.providers.anthropic.client import AnthropicBatches, AnthropicMessages
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.http import VendorHttp

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
API_VERSION: Final = "2023-06-01"  # the Messages API version these adapters are written for
# The betas every call opts into: the code execution server tool (code_execution_20250522)
# runs only with its beta. Sent on every call, so a body that uses it (whole, streamed or in
# a batch) always has it; a beta a call does not use changes nothing.
BETAS: Final = ("code-execution-2025-05-22",)


def vendor_http(
    endpoint: ProviderEndpoint, api_key: str | None, *, transport: httpx.BaseTransport | None = None
) -> VendorHttp:
    """The endpoint's HTTP: its base URL, the key and the API version on every call
    (`transport`: a test's stand-in for the network)."""
    headers = {
        "anthropic-version": API_VERSION,
        "anthropic-beta": ",".join(BETAS),
        "content-type": "application/json",
    }
    if api_key:
        headers["x-api-key"] = api_key
    return endpoint.http(
        API_VERSION, DEFAULT_BASE_URL, headers, transport=transport, status_errors=transform.status_error
    )


def make_sync(
    endpoint: ProviderEndpoint, api_key: str | None, *, output_limits: Mapping[str, int] | None = None
) -> AnthropicMessages:
    limits = endpoint.output_limits if output_limits is None else output_limits
    return AnthropicMessages(endpoint.slug, vendor_http(endpoint, api_key), output_limits=limits)


def make_batch(
    endpoint: ProviderEndpoint, api_key: str | None, *, output_limits: Mapping[str, int] | None = None
) -> AnthropicBatches:
    limits = endpoint.output_limits if output_limits is None else output_limits
    return AnthropicBatches(endpoint.slug, vendor_http(endpoint, api_key), output_limits=limits)
