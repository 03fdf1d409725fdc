"""Response models: operations, the health check and the runtime metadata."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from batchroute.config import Environment
from functions.api.schemas.common import Absent


class Health(BaseModel):
    ok: bool
    service: str
    read_only: bool


class CapabilityStatus(BaseModel):
    enabled: bool
    status: Literal["available", "disabled"]
    detail: str | Absent = None


class Capabilities(BaseModel):
    challenge_login: CapabilityStatus
    email_delivery: CapabilityStatus
    billing_checkout: CapabilityStatus
    internal_signing: CapabilityStatus
    operator_alerts: CapabilityStatus


class RuntimeRouting(BaseModel):
    provider_allowlist: list[str] = Field(description="Empty: every provider")
    launch_provider_guard: bool


class RuntimeOut(BaseModel):
    """This deployment. Anonymous callers get public-safe data only."""

    environment: Environment
    read_only: bool
    capabilities: Capabilities
    provider_simulation: bool | Absent = Field(default=None, description="Authenticated callers only")
    routing: RuntimeRouting | Absent = Field(default=None, description="Authenticated callers only")
