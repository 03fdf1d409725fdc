"""Logger, Tracer and Metrics, created once and shared by every handler."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

from batchroute.config import get_settings

_settings = get_settings()

logger = Logger(service=_settings.service_name, level=_settings.log_level)
# Tracing is off outside AWS: there is no X-Ray daemon locally.
# Only botocore is patched: the API's hot path makes no other outbound calls worth a subsegment,
# and patching httpx would import it on every cold start.
tracer = Tracer(
    service=_settings.service_name,
    disabled=_settings.environment == "local",
    patch_modules=("botocore",),
)
metrics = Metrics(namespace="BatchRoute", service=_settings.service_name)
metrics.set_default_dimensions(environment=_settings.environment)
