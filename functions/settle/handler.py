"""Finalizes and settles batches, and handles failures (the settle queue)."""

from batchroute.wiring import workflow_handler

handler = workflow_handler("finalize", "settle", "fail")
