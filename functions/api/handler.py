"""API Lambda: API Gateway -> Mangum -> the FastAPI app."""

from __future__ import annotations

from typing import Any

from batchroute.function_init import function_init

with function_init():  # no garbage collection during the imports (batchroute/function_init.py)
    from aws_lambda_powertools.logging import correlation_paths
    from aws_lambda_powertools.metrics import MetricUnit
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from mangum import Mangum

    from batchroute.observability import lambda_logging, metrics, tracer
    from functions.api import snapstart
    from functions.api.app import app

    _asgi = Mangum(app, lifespan="off")
    snapstart.install()  # SnapStart's runtime hooks, on Lambda only (functions/api/snapstart.py)


@lambda_logging(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    metrics.add_metric(name="ApiRequests", unit=MetricUnit.Count, value=1)
    return dict(_asgi(event, context))  # type: ignore[arg-type]  # powertools' context type, same object
