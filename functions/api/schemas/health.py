"""Response models: operations, the health check and the runtime metadata."""

from __future__ import annotations

from pydantic import BaseModel


class Health(BaseModel):
    ok: bool
    service: str
    read_only: bool
