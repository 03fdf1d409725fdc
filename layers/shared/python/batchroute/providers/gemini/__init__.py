"""Google's Gemini API (the catalog's `google`): `make_sync` / `make_batch` build the adapters
of an endpoint (docs/providers.md, Google Gemini). httpx and httpx-sse, not google-genai, whose
import would weigh on the API function's cold start; the SDK checks the wire format in tests."""

from __future__ import annotations

from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.gemini import transform
from batchroute.providers.gemini.client import GeminiBatches, GeminiModels
from batchroute.providers.http import VendorHttp

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"  # paths carry /v1beta


def _http(endpoint: ProviderEndpoint, api_key: str | None) -> VendorHttp:
    headers = {"x-goog-api-key": api_key} if api_key else {}
    return endpoint.http(
        transform.API_VERSION, DEFAULT_BASE_URL, headers, status_errors=transform.status_error
    )


def make_sync(endpoint: ProviderEndpoint, api_key: str | None) -> GeminiModels:
    return GeminiModels(endpoint.slug, _http(endpoint, api_key))


def make_batch(endpoint: ProviderEndpoint, api_key: str | None) -> GeminiBatches:
    return GeminiBatches(endpoint.slug, _http(endpoint, api_key))
