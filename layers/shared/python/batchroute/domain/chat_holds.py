"""Why opening a chat hold was refused: the hold transaction's conditions, by name
(adapters/dynamo/chat_holds.py raises it; the chat services turn it into the spec's codes)."""

from __future__ import annotations

from typing import Literal

from batchroute.domain.rate_limits import WindowCounts

Refusal = Literal[
    "funds", "controls_changed", "spend_moved", "conflict", "rate_limit", "policy_changed", "key_unconfirmed"
]


class HoldRefused(Exception):
    """The open transaction was refused; `reason` says by which condition (`rate_limit`:
    the rate counters, whose counts are in `rate_counts`)."""

    def __init__(self, reason: Refusal, rate_counts: dict[str, WindowCounts] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rate_counts = rate_counts
