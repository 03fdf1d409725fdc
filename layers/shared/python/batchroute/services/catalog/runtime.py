"""What GET /v1/runtime tells a caller about this deployment."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from batchroute.services.catalog.ports import DeploymentSettings


class CapabilityView(TypedDict):
    enabled: bool
    status: Literal["available", "disabled"]
    detail: NotRequired[str]


class CapabilitiesView(TypedDict):
    challenge_login: CapabilityView
    email_delivery: CapabilityView
    billing_checkout: CapabilityView
    internal_signing: CapabilityView
    operator_alerts: CapabilityView


class RoutingView(TypedDict):
    provider_allowlist: list[str]
    launch_provider_guard: bool


class RuntimeView(TypedDict):
    environment: str
    read_only: bool
    capabilities: CapabilitiesView
    provider_simulation: NotRequired[bool]  # authenticated callers only
    routing: NotRequired[RoutingView]  # authenticated callers only


def _capability(enabled: bool, *, detail: str | None = None) -> CapabilityView:
    status: CapabilityView = {"enabled": enabled, "status": "available" if enabled else "disabled"}
    if detail:
        status["detail"] = detail
    return status


def runtime_info(settings: DeploymentSettings, *, authenticated: bool) -> RuntimeView:
    """Anonymous callers get public-safe data only; provider simulation and routing guards
    are shown to authenticated callers."""
    local = settings.environment == "local"
    info: RuntimeView = {
        "environment": settings.environment,
        "read_only": settings.read_only,
        "capabilities": {
            "challenge_login": _capability(False),
            "email_delivery": _capability(True),
            "billing_checkout": _capability(
                local or settings.payments_secret_name is not None,
                detail="Credits are bought in the billing dashboard (Stripe Checkout"
                + (", the local payment emulator)." if local else ")."),
            ),
            "internal_signing": _capability(True),
            "operator_alerts": _capability(not local),
        },
    }
    if authenticated:
        info["provider_simulation"] = local
        info["routing"] = {
            "provider_allowlist": list(settings.provider_allowlist),
            "launch_provider_guard": settings.launch_provider_guard,
        }
    return info
