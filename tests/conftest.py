"""Test-wide environment: fake AWS credentials and the local settings, set before any
service module reads its settings."""

from __future__ import annotations

import os

from hypothesis import settings

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

# Property tests draw the same examples on every run (a seed derived from each test, no
# example database), so `make test` gives one answer on every machine and in CI. To look
# for new failing examples, draw afresh: `HYPOTHESIS_PROFILE=explore make test-unit`. No
# per-example deadline: an example is judged by what it returns, not by how long a loaded
# 2-core machine took to run it (a 200 ms deadline failed examples that pass in 40 ms).
settings.register_profile("repeatable", derandomize=True, database=None, deadline=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
