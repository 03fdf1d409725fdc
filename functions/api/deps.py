"""Dependencies shared by the routers, as Annotated aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from batchroute.clock import Clock, SystemClock
from batchroute.config import Settings, get_settings

_system_clock = SystemClock()


def get_clock() -> Clock:
    return _system_clock


SettingsDep = Annotated[Settings, Depends(get_settings)]
ClockDep = Annotated[Clock, Depends(get_clock)]
