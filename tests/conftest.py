"""Test-wide environment: fake AWS credentials and the local settings, set before any
service module reads its settings."""

from __future__ import annotations

import os

_DEFAULTS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "ENVIRONMENT": "local",
    "POWERTOOLS_METRICS_NAMESPACE": "BatchRoute",
    "POWERTOOLS_TRACE_DISABLED": "1",
    "POWERTOOLS_DEV": "0",
    "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
}
for name, value in _DEFAULTS.items():
    os.environ.setdefault(name, value)
# Tests never reach a real endpoint: moto intercepts in-process calls.
os.environ.pop("AWS_ENDPOINT_URL", None)
