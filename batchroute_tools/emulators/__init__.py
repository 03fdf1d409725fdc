"""Local emulators of the AI vendors' APIs (docs/emulators.md): `build_emulators` mounts one
per catalog provider, each under its own path prefix, on one loopback server, with the models
the catalog routes to it (every lane's `provider_model_id`; an emulator refuses any other
model as its vendor does), and for the OpenAI-format ones which of those embed. `make run`
starts them and points every provider's endpoint at them (catalog/data/environments/local.toml)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from batchroute.catalog import builtin_catalog
from batchroute.config import Settings
from batchroute.domain.catalog.catalog import Catalog, Lane
from batchroute_tools.emulators.anthropic import AnthropicEmulator
from batchroute_tools.emulators.bedrock import BedrockEmulator
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.gemini import GeminiEmulator
from batchroute_tools.emulators.openai import OpenAIEmulator
from batchroute_tools.emulators.server import EmulatorServer, Vendor
from batchroute_tools.emulators.stripe import StripeEmulator

# The OpenAI-compatible hosts, each at /hosts/<slug>; those with an OpenAI-format batch API.
HOSTS = ("together", "groq", "fireworks", "deepinfra", "edge-eu", "edge-us")
HOSTS_WITH_BATCHES = frozenset({"together"})
VLLM_HOSTS = frozenset({"edge-eu", "edge-us"})  # the edge pools run vLLM (catalog/data/providers.toml)


def _models(catalog: Catalog, slug: str) -> tuple[str, ...]:
    """The models the catalog routes to provider `slug`, as the vendor names them."""
    return tuple(dict.fromkeys(_vendor_name(lane) for lane in catalog.lanes if lane.provider == slug))


def _vendor_name(lane: Lane) -> str:
    """The model as the service names it to the vendor (services/workflow/runner.py)."""
    return lane.provider_model_id or lane.model


def _windows(catalog: Catalog, slug: str) -> dict[str, int]:
    """The context window of each of `_models` (the smallest, were lanes to differ)."""
    windows: dict[str, int] = {}
    for lane in catalog.lanes:
        if lane.provider == slug and lane.context_window > 0:
            name = _vendor_name(lane)
            windows[name] = min(windows.get(name, lane.context_window), lane.context_window)
    return windows


def _embedding_models(catalog: Catalog, slug: str) -> tuple[str, ...]:
    """Those of `_models` the catalog sends embeddings to."""
    return tuple(
        dict.fromkeys(
            _vendor_name(lane)
            for lane in catalog.lanes
            if lane.provider == slug and "embeddings" in lane.operations
        )
    )


def build_vendors(
    behaviour: Behaviour,
    *,
    catalog: Catalog | None = None,
    s3: Any = None,
    clock: Callable[[], float] = time.time,
) -> list[Vendor]:
    catalog = catalog or builtin_catalog()
    vendors = [
        OpenAIEmulator(
            behaviour,
            provider="openai",
            prefix="/openai",
            models=_models(catalog, "openai"),
            embedding_models=_embedding_models(catalog, "openai"),
            windows=_windows(catalog, "openai"),
            clock=clock,
        ).vendor,
        AnthropicEmulator(
            behaviour,
            provider="anthropic",
            prefix="/anthropic",
            models=_models(catalog, "anthropic"),
            clock=clock,
        ).vendor,
        GeminiEmulator(
            behaviour, provider="google", prefix="/google", models=_models(catalog, "google"), clock=clock
        ).vendor,
    ]
    for slug in HOSTS:
        vendors.append(
            OpenAIEmulator(
                behaviour,
                provider=slug,
                prefix=f"/hosts/{slug}",
                models=_models(catalog, slug),
                embedding_models=_embedding_models(catalog, slug),
                windows=_windows(catalog, slug),
                vllm=slug in VLLM_HOSTS,
                batch=slug in HOSTS_WITH_BATCHES,
                responses_api=False,  # the hosts speak Chat Completions only
                clock=clock,
                prompt_cache=None,  # the hosts' answers report no cached tokens
            ).vendor
        )
    if s3 is not None:  # Bedrock's batch jobs read and write S3
        vendors.append(
            BedrockEmulator(
                behaviour, prefix="/bedrock", s3=s3, models=_models(catalog, "bedrock"), clock=clock
            ).vendor
        )
    return vendors


def payment_emulator(settings: Settings, *, webhook_url: str | None, auto_deliver: bool) -> StripeEmulator:
    """The payment emulator with the keys the service's settings hold (docs/payments.md)."""
    return StripeEmulator(
        secret_key=settings.stripe_secret_key.get_secret_value(),
        webhook_secret=settings.stripe_webhook_secret.get_secret_value(),
        webhook_url=webhook_url,
        auto_deliver=auto_deliver,
    )


def build_emulators(
    settings: Settings,
    *,
    s3: Any = None,
    sock: socket.socket | None = None,
    payments_webhook_url: str | None = None,
) -> EmulatorServer:
    """Every vendor's emulator on one server (not started), and the payment emulator at
    `/stripe`, sending its webhooks to `payments_webhook_url`."""
    behaviour = Behaviour(EmulatorConfig.from_settings(settings))
    payments = payment_emulator(settings, webhook_url=payments_webhook_url, auto_deliver=True)
    return EmulatorServer([*build_vendors(behaviour, s3=s3), payments.vendor], sock=sock)
