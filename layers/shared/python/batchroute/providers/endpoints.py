"""Where and how a provider is reached in this environment: its `ProviderEndpoint`.

The catalog says what a provider sells; the endpoint says how this deployment talks to it:
which adapter speaks its API, the base URL (an OpenAI-compatible host or an operator's own
vLLM box), the AWS region (Bedrock), whether its lanes run through the vendor's batch API,
how it authenticates (an API key from Secrets Manager, the function's IAM role, or
nothing for a private endpoint), how long its calls may wait (`Timeouts`) and which API
version it is spoken to in. Endpoints come from the environment's data file
(catalog/data/environments/<env>.toml, docs/providers.md); every vendor package builds its
adapters from one with `make_sync(endpoint, api_key)` / `make_batch(endpoint, api_key)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from batchroute.providers.credentials import ProviderNotConfigured
from batchroute.providers.http import Timeouts, VendorHttp

AdapterKind = Literal["openai", "openai_compatible", "anthropic", "gemini", "bedrock"]
Credentials = Literal["api_key", "iam", "none"]


@dataclass(frozen=True)
class ProviderEndpoint:
    slug: str
    adapter: AdapterKind
    base_url: str | None = None  # the API root, e.g. https://api.openai.com/v1
    region: str | None = None  # Bedrock's AWS region
    batch_api: bool = False  # lanes run as the vendor's batch jobs through this adapter
    credentials: Credentials = "api_key"
    # Adapter-specific settings: Bedrock's batch role and bucket, a host's model list path...
    options: Mapping[str, str] = field(default_factory=dict)
    timeouts: Timeouts = field(default_factory=Timeouts)
    # The vendor API version spoken to it, pinned in data (providers.toml `api_version`, an
    # environment may override): "v1", "2023-06-01", "v1beta", "2023-09-30"...; Bedrock's
    # control plane (batch jobs) has its own, `control_api_version`.
    api_version: str = ""
    control_api_version: str = ""
    # Catalog model id -> the output limit of its lane on this provider (0: none), from the
    # catalog the environment was loaded with (catalog/environments.py).
    output_limits: Mapping[str, int] = field(default_factory=dict)

    def option(self, name: str, default: str = "") -> str:
        return self.options.get(name, default)

    def http(
        self, written_for: str, default_base_url: str, headers: Mapping[str, str], **options: Any
    ) -> VendorHttp:
        """The endpoint's HTTP for an adapter written for API version `written_for`: its base
        URL (the vendor's own when it names none), its timeouts, `headers` on every call;
        `options` are the vendor's (a test's transport, its status errors)."""
        self.require_api_version(written_for)
        return VendorHttp(
            self.base_url or default_base_url,
            vendor=self.slug,
            headers=headers,
            timeouts=self.timeouts,
            **options,
        )

    def require_api_version(self, written_for: str) -> None:
        """An adapter is written for one API version: refuse to build it for an endpoint
        pinned to another (the pin in data is enforced, not just documented)."""
        if self.api_version and self.api_version != written_for:
            raise ProviderNotConfigured(
                f"provider {self.slug!r} is pinned to API version {self.api_version!r}; its "
                f"{self.adapter} adapter speaks {written_for!r} (catalog/data/providers.toml)"
            )
