"""The settings as a route dependency, apart from `functions.api.deps` so that a route needing
nothing else (liveness) does not import every service on its first request
(docs/cold-start.md)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from batchroute.config import Settings, get_settings

SettingsDep = Annotated[Settings, Depends(get_settings)]
