"""Scheduled sweeper (EventBridge): refreshes lane heartbeats, moves batches past their SLA
deadline to `expired`, settles stale chat holds, retries due webhooks."""

from batchroute.wiring import sweeper_handler

handler = sweeper_handler()
