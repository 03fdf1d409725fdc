"""OpenAI and every OpenAI-compatible host: `make_sync` / `make_batch` build the adapters of
an endpoint (docs/providers.md, OpenAI and OpenAI-compatible hosts)."""

from __future__ import annotations

from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.http import VendorHttp
from batchroute.providers.openai.client import OpenAIBatch, OpenAIChat
from batchroute.providers.openai.transform import OPENAI_TOKEN_FIELD, TokenField

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _http(endpoint: ProviderEndpoint, api_key: str | None) -> VendorHttp:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    return VendorHttp(
        endpoint.base_url or DEFAULT_BASE_URL,
        vendor=endpoint.slug,
        headers=headers,
        timeouts=endpoint.timeouts,
    )


def _token_field(endpoint: ProviderEndpoint) -> TokenField:
    # OpenAI itself takes max_completion_tokens; the compatible servers take max_tokens.
    return OPENAI_TOKEN_FIELD if endpoint.adapter == "openai" else "max_tokens"


def make_sync(endpoint: ProviderEndpoint, api_key: str | None) -> OpenAIChat:
    return OpenAIChat(endpoint.slug, _http(endpoint, api_key), token_field=_token_field(endpoint))


def make_batch(endpoint: ProviderEndpoint, api_key: str | None) -> OpenAIBatch:
    return OpenAIBatch(endpoint.slug, _http(endpoint, api_key), token_field=_token_field(endpoint))
