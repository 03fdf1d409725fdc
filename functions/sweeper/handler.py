"""Scheduled sweeper (EventBridge): refreshes lane heartbeats, moves batches past their SLA
deadline to `expired`, settles stale chat holds, retries due webhooks; on the daily rule's
input, reconciles payments (docs/payments.md)."""

from batchroute.wiring import sweeper_handler

handler = sweeper_handler()
