"""Finalizes and settles batches, and handles failures (the settle queue)."""

from batchroute.function_init import function_init

with function_init():  # no garbage collection during the imports (batchroute/function_init.py)
    from batchroute.wiring import workflow_handler

    handler = workflow_handler("finalize", "settle", "fail")
