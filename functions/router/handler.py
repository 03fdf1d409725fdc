"""Takes in input files, routes batches and runs lanes (the route and lanes queues), and checks
confirmed large uploads (`check_file` on the route queue)."""

from batchroute.function_init import function_init

with function_init():  # no garbage collection during the imports (batchroute/function_init.py)
    from batchroute.wiring import workflow_handler

    handler = workflow_handler("intake", "route", "run_lane", "check_file")
