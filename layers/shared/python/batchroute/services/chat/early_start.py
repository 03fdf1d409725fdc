"""The first lane's provider request, sent while the chat hold commits.

A direct chat request waits twice before its first byte: for the hold (one DynamoDB
transaction: the credit, the spending limit, the rate limit, the key and the route policy,
checked together) and for the provider's first token. Neither needs the other, so the
request to the plan's first lane goes out on a worker thread as the hold's transaction does
(`DirectChat.open`). Nothing of its answer reaches the client before the hold has committed:
`open` waits for the hold first, and only then takes the provider's first event.

When the hold is refused (no credit, the hard spending limit, the rate limit, a revoked key,
a changed route policy) the caller gets the refusal at once, and the early request is closed
as soon as it has answered: its bytes are dropped, nothing is charged. So that a caller who
keeps sending refused requests does not keep opening provider requests, an org whose hold
was refused in the last `refused_seconds` runs the old way, hold first (docs/chat.md,
"Before the first byte").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from time import monotonic

from batchroute.domain.chat.routing import DirectLane
from batchroute.providers.base import StreamEvent

# A provider stream and its first event (the first event was read to know the lane answers).
Opened = tuple[Iterator[StreamEvent], StreamEvent]
MAX_REMEMBERED_ORGS = 10_000


@dataclass(frozen=True)
class EarlyStart:
    """The first lane's request, under way."""

    lane: DirectLane
    future: Future[Opened]

    def take(self, lane: DirectLane) -> Opened:
        """The stream and its first event (waiting for them); raises what opening it raised."""
        assert lane is self.lane, "an early start is taken by the lane it was started for"
        return self.future.result()

    def abandon(self) -> None:
        """Not used (the hold was refused, or the plan changed): close it once it answers."""
        self.future.add_done_callback(_close)


def _close(future: Future[Opened]) -> None:
    if not future.cancelled() and future.exception() is None:
        events, _ = future.result()
        close = getattr(events, "close", None)
        if close is not None:
            close()


class EarlyStarts:
    """Starts first-lane requests on a small pool, except for orgs recently refused a hold."""

    def __init__(
        self, *, workers: int = 16, refused_seconds: float = 60.0, now: Callable[[], float] = monotonic
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chat-early-start")
        self._refused_seconds = refused_seconds
        self._now = now
        self._refused: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, org_id: str, lane: DirectLane, begin: Callable[[], Opened]) -> EarlyStart | None:
        """`begin` on the pool, or None for an org refused a hold lately (it holds first)."""
        with self._lock:
            until = self._refused.get(org_id)
            if until is not None and until > self._now():
                return None
            self._refused.pop(org_id, None)
        return EarlyStart(lane, self._pool.submit(begin))

    def refused(self, org_id: str) -> None:
        """The org's hold was refused: its next requests hold first for a while."""
        with self._lock:
            self._refused[org_id] = self._now() + self._refused_seconds
            self._refused.move_to_end(org_id)
            while len(self._refused) > MAX_REMEMBERED_ORGS:
                self._refused.popitem(last=False)
