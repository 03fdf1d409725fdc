"""The parts of the Lambda runtime a locally invoked handler sees: its context and its lookup."""

from __future__ import annotations

import importlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from batchroute import resources

# Lambda's handler signature: (event, context) -> response.
Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class LambdaContext:
    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    timeout_seconds: int
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = "local"
    # Monotonic deadline: the local runner does not kill a handler that overruns,
    # but handlers that budget their work by the remaining time see the real figure.
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"
        self._deadline = time.monotonic() + self.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def context_for(function_key: str, *, prefix: str, region: str, account: str) -> LambdaContext:
    """A fresh context (new request id, full time budget) for one invocation of a function."""
    function = next(f for f in resources.FUNCTIONS if f.key == function_key)
    name = f"{prefix}-{function.key}"
    return LambdaContext(
        function_name=name,
        invoked_function_arn=f"arn:aws:lambda:{region}:{account}:function:{name}",
        memory_limit_in_mb=function.memory_mb,
        timeout_seconds=function.timeout_seconds,
    )


def load_handler(function_key: str) -> Handler:
    """Import functions.<key>.handler.handler, the very callable CDK deploys for that function.

    Import it only after the service's environment is set: handler modules read their
    settings at import time, as they do on a Lambda cold start.
    """
    function = next(f for f in resources.FUNCTIONS if f.key == function_key)
    module_name, _, attribute = function.handler.rpartition(".")
    handler: Handler = getattr(importlib.import_module(module_name), attribute)
    return handler
