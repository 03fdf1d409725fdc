"""Scheduled sweeper (EventBridge): refreshes lane heartbeats, moves batches past their SLA
deadline to `expired`, settles stale chat holds, retries due webhooks; on the daily rule's
input, reconciles payments (docs/payments.md)."""

from batchroute.function_init import function_init

with function_init():  # no garbage collection during the imports (batchroute/function_init.py)
    from batchroute.wiring import sweeper_handler

    handler = sweeper_handler()
