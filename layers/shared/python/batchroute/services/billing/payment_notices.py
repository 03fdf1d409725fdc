"""Auto top-up notices recorded as billing events, once per key: the stand-in `Notifier` until
the billing watch (which also emails and sends the signed alert webhook) is wired in its
place (docs/payments.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol


class EventRecorder(Protocol):
    def record_once(
        self,
        org_id: str,
        *,
        kind: str,
        period_key: str,
        event_type: str,
        details: dict[str, Any],
        at: datetime,
    ) -> dict[str, Any] | None: ...


class EventNotifier:
    def __init__(self, events: EventRecorder) -> None:
        self.events = events

    def notify(
        self, org_id: str, event_type: str, details: dict[str, Any], *, at: datetime, once_key: str
    ) -> dict[str, Any] | None:
        return self.events.record_once(
            org_id, kind=event_type, period_key=once_key, event_type=event_type, details=details, at=at
        )


class Notifier(Protocol):
    def notify(
        self, org_id: str, event_type: str, details: dict[str, Any], *, at: datetime, once_key: str
    ) -> dict[str, Any] | None: ...


class DeferredNotifier:
    """A notifier found at the first notice, not when the auto top-up is built: the billing
    watch both listens to the auto top-up and notifies for it, so neither can be built first."""

    def __init__(self, resolve: Callable[[], Notifier]) -> None:
        self._resolve = resolve

    def notify(
        self, org_id: str, event_type: str, details: dict[str, Any], *, at: datetime, once_key: str
    ) -> dict[str, Any] | None:
        return self._resolve().notify(org_id, event_type, details, at=at, once_key=once_key)
