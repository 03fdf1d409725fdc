"""The chat context: the direct path's in-process state and services, queued chat jobs."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.batches import BatchesWiring

if TYPE_CHECKING:
    from batchroute.services.chat.direct import DirectChat
    from batchroute.services.chat.jobs import ChatJobs
    from batchroute.services.chat.state import HoldKeeper, LaneStateCache, LaneStats


class ChatWiring(BatchesWiring):
    @cached_property
    def chat_lane_cache(self) -> LaneStateCache:
        from batchroute.services.chat.state import LaneStateCache

        return LaneStateCache(self.lane_states, self.settings.chat_lane_state_ttl_seconds)

    @cached_property
    def chat_lane_stats(self) -> LaneStats:
        from batchroute.services.chat.state import LaneStats

        return LaneStats()

    @cached_property
    def hold_keeper(self) -> HoldKeeper:
        from batchroute.services.chat.state import HoldKeeper

        return HoldKeeper(self.chat_holds, self.clock, limiter=self.rate_limiter)

    @cached_property
    def direct_chat(self) -> DirectChat:
        """Reused across requests: the lane-state cache, the observed lane records and the
        cached hard limits are what keep the hot path off DynamoDB."""
        from batchroute.services.chat.direct import DirectChat, DirectOptions
        from batchroute.services.chat.early_start import EarlyStarts

        settings = self.settings
        return DirectChat(
            catalog=self.catalog,
            lanes=self.chat_lane_cache,
            stats=self.chat_lane_stats,
            holds=self.hold_keeper,
            store=self.chat_holds,
            providers=self.providers,
            controls=self.controls,
            guards=self.guards,
            clock=self.clock,
            policies=self.route_policies,
            options=DirectOptions(
                first_byte_timeout_seconds=settings.chat_first_byte_timeout_seconds,
                checkpoint_seconds=settings.chat_usage_checkpoint_seconds,
            ),
            watch=self.billing_watch,
            limiter=self.rate_limiter,
            availability=self.lane_states,
            early=EarlyStarts(),
        )

    @cached_property
    def chat_jobs(self) -> ChatJobs:
        from batchroute.services.chat.jobs import ChatJobs

        return ChatJobs(batches=self.batches, records=self.batch_records, artifacts=self.artifacts)
