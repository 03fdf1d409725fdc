"""`make run`: the whole service on embedded AWS (moto), in the foreground.

moto_server starts the local AWS, provision creates every resource from
batchroute.resources, poller plays Lambda's SQS event source mappings,
scheduler plays the EventBridge rule that fires the sweeper, and __main__ ties
them together behind uvicorn serving the FastAPI app.
"""
