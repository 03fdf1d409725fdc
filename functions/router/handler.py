"""Takes in input files, routes batches and runs lanes (the route and lanes queues)."""

from batchroute.wiring import workflow_handler

handler = workflow_handler("intake", "route", "run_lane")
