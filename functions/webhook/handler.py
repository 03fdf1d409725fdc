"""Delivers results: signed webhooks and bucket delivery (the deliver queue)."""

from batchroute.wiring import workflow_handler

handler = workflow_handler("deliver", "deliver_bucket")
