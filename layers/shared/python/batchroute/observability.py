"""Logger, Tracer and Metrics, created once and shared by every handler.

Log keys that belong to one invocation (the Lambda context, the correlation id, a workflow
step's batch and step) are kept per thread and task (powertools' thread-safe keys, a
ContextVar) and removed when the invocation ends: a warm Lambda's next invocation, and the
other functions and API requests that share one process under `make run`, never carry them.
Use `lambda_logging` on every handler and `invocation_keys` for keys of part of one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import wrapt
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities import jmespath_utils

from batchroute import resources
from batchroute.config import get_settings

# Nothing here reads the settings at import: powertools reads its own variables (the level from
# POWERTOOLS_LOG_LEVEL / LOG_LEVEL, which the CDK stack sets; tracing is off outside a Lambda
# runtime, as locally, where there is no X-Ray daemon), and the metrics' environment dimension
# is set on a function's first invocation (`lambda_logging`).
logger = Logger(service=resources.SERVICE)
# Only botocore is patched: the API's hot path makes no other outbound calls worth a subsegment,
# and patching httpx would import it on every cold start. It is patched when botocore's session
# module is first imported (every client is made from a session, boto3's included), not at
# init: the patch imports botocore, ~80 ms that the API's init no longer pays
# (docs/cold-start.md). The patch wraps botocore's classes, so every client is traced as before.
tracer = Tracer(service=resources.SERVICE, auto_patch=False)
wrapt.when_imported("botocore.session")(lambda _module: tracer.patch(modules=("botocore",)))
metrics = Metrics(namespace="BatchRoute", service=resources.SERVICE)

Handler = TypeVar("Handler", bound=Callable[..., Any])
_cold_start = True


@contextmanager
def invocation_keys(**keys: object) -> Iterator[None]:
    """Log `keys` on every line of this thread or task until the block ends."""
    before = logger.thread_safe_get_current_keys()
    logger.thread_safe_append_keys(**keys)
    try:
        yield
    finally:
        logger.thread_safe_remove_keys([k for k in keys if k not in before])
        restored = {k: before[k] for k in keys if k in before}
        if restored:
            logger.thread_safe_append_keys(**restored)


def lambda_logging(correlation_id_path: str | None = None) -> Callable[[Handler], Handler]:
    """A Lambda handler's log keys (function name, memory, ARN, request id, cold start, and the
    correlation id found at `correlation_id_path` in the event), for that invocation only."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def run(event: dict[str, Any], context: Any, *args: Any, **kwargs: Any) -> Any:
            global _cold_start
            if _cold_start:
                metrics.set_default_dimensions(environment=get_settings().environment)
            keys: dict[str, object] = {
                "cold_start": _cold_start,
                "function_name": getattr(context, "function_name", None),
                "function_memory_size": getattr(context, "memory_limit_in_mb", None),
                "function_arn": getattr(context, "invoked_function_arn", None),
                "function_request_id": getattr(context, "aws_request_id", None),
            }
            _cold_start = False
            if correlation_id_path:
                keys["correlation_id"] = jmespath_utils.query(envelope=correlation_id_path, data=event)
            with invocation_keys(**keys):
                return handler(event, context, *args, **kwargs)

        return run  # type: ignore[return-value]

    return decorate
