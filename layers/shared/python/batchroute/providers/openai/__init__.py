"""OpenAI and every OpenAI-compatible host: `make_sync` / `make_batch` build the adapters of
an endpoint (docs/providers.md, OpenAI and OpenAI-compatible hosts). `route_for(endpoint)` is
which API each operation goes to: OpenAI itself sends items with hosted tools to the Responses
API and every other chat item to Chat Completions, the compatible hosts everything to Chat
Completions (transform.py)."""

from __future__ import annotations

from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.http import VendorHttp
from batchroute.providers.openai.client import OpenAIBatch, OpenAIChat
from batchroute.providers.openai.transform import HOST_ROUTE, OPENAI_ROUTE, Route

DEFAULT_BASE_URL = "https://api.openai.com/v1"
API_VERSION = "v1"  # the REST API's version: the base URL's last segment (/v1)


def _http(endpoint: ProviderEndpoint, api_key: str | None) -> VendorHttp:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    return endpoint.http(API_VERSION, DEFAULT_BASE_URL, headers)


def route_for(endpoint: ProviderEndpoint) -> Route:
    return OPENAI_ROUTE if endpoint.adapter == "openai" else HOST_ROUTE


def make_sync(endpoint: ProviderEndpoint, api_key: str | None) -> OpenAIChat:
    return OpenAIChat(endpoint.slug, _http(endpoint, api_key), route=route_for(endpoint))


def make_batch(endpoint: ProviderEndpoint, api_key: str | None) -> OpenAIBatch:
    return OpenAIBatch(endpoint.slug, _http(endpoint, api_key), route=route_for(endpoint))
