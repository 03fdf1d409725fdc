"""Integration fixtures: moto in-process (`mock_aws`) with every resource provisioned from
the same definitions the CDK stack uses."""

from __future__ import annotations

import copy
import copyreg
import functools
import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws
from moto.core.base_backend import BackendDict
from moto.core.config import DefaultConfig
from moto.dynamodb.responses import DynamoHandler
from moto.kms import models as kms_models
from moto.s3.responses import S3Response
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

from batchroute import resources
from batchroute.adapters.aws import reset_clients
from batchroute.config import get_settings
from batchroute_tools.local import moto_answers
from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, LocalStack, provision

# The in-process suites answer every provider from the in-process simulator (no HTTP): the
# adapters have their own suites against the vendor emulators (test_emulator_*.py), and the
# end-to-end suite runs the whole stack through them as `make run` does.
os.environ.setdefault("SIMULATED_PROVIDERS", "1")

# moto by default drops boto3's default session on every start, so each test's first clients
# re-read botocore's service models and endpoint rules from disk (seconds per test); the
# fake credentials the tests set make keeping it safe.
MOTO_CONFIG: DefaultConfig = {
    "core": {"mock_credentials": True, "reset_boto3_session": False},
    "stepfunctions": {"execute_state_machine": True},
}


# Each test provisions its own stack on moto (`local_aws`); two steps of that cost the same
# every time and depend only on their input, so they are done once per process:
# - moto gives every KMS key an RSA private key, a symmetric one too, which never uses it
#   (about 60 ms of key generation);
# - moto validates a state machine's definition by parsing it with its ASL grammar (about a
#   third of a second), and the definition is the same in every test. A definition that
#   fails validation raises, which is not cached.
kms_models.generate_private_key = functools.cache(kms_models.generate_private_key)
StepFunctionsParserBackend._validate_definition = staticmethod(  # type: ignore[method-assign]
    functools.cache(StepFunctionsParserBackend._validate_definition)
)


# DynamoDB answers are written from their wire form, as the local stack's moto server writes
# them (moto's generic serializer was two thirds of all DynamoDB time in an API test).
moto_answers.install()


@pytest.fixture
def local_aws() -> Iterator[LocalStack]:
    with mock_aws(config=MOTO_CONFIG):
        reset_clients()
        stack = _fresh_stack()
        saved = {k: os.environ.get(k) for k in ("QUEUE_URLS", "BUCKETS", "STATE_MACHINE_ARN", "KMS_KEY_ID")}
        os.environ["QUEUE_URLS"] = json.dumps(stack.queue_urls)
        os.environ["BUCKETS"] = json.dumps(stack.buckets)
        os.environ["STATE_MACHINE_ARN"] = stack.state_machine_arn
        os.environ["KMS_KEY_ID"] = stack.kms_key_id
        get_settings.cache_clear()
        try:
            yield stack
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            get_settings.cache_clear()
            reset_clients()


# Provisioning (tables, queues, buckets, key, state machine, secrets: ~60 moto calls, a third
# of a second) was the largest part of most tests' set-up, and its outcome is the same every
# time. So the first test of a process provisions its stack, which is kept with a deep copy of
# every moto backend the provisioning filled; each later test, on moto freshly reset, gets its
# own deep copy of those backends (a few milliseconds), the same stack as if provisioned anew.
_provisioned: tuple[LocalStack, dict[BackendDict[Any], dict[tuple[str, str], Any]]] | None = None

# A backend holds locks (an SQS queue's message condition, an S3 key's lock): a copy gets new ones.
copyreg.pickle(threading.Condition, lambda condition: (threading.Condition, ()))
copyreg.pickle(type(threading.Lock()), lambda lock: (threading.Lock, ()))
copyreg.pickle(type(threading.RLock()), lambda lock: (threading.RLock, ()))


def _fresh_stack() -> LocalStack:
    global _provisioned
    if _provisioned is None:
        stack = provision(
            prefix=resources.resource_prefix("local"),
            account=LOCAL_ACCOUNT,
            region=LOCAL_REGION,
            endpoint_url=None,
        )
        filled = {
            backends: {(account, region): copy.deepcopy(b) for account, region, b in backends.iter_backends()}
            for backends in BackendDict._instances  # type: ignore[attr-defined]
        }
        _provisioned = (stack, filled)
        return stack
    stack, filled = _provisioned
    for backends, kept in filled.items():
        for (account, region), backend in kept.items():
            backends[account][region] = copy.deepcopy(backend)
    return stack


@pytest.fixture
def stack(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalStack]:
    """A pipeline test's stack: `quiet_simulation` (no latency, jobs done at once, every lane's
    heartbeat). A module that needs another defines its own `stack`, which overrides this."""
    from tests.integration.batch_pipeline_support import quiet_simulation

    quiet_simulation(monkeypatch, tmp_path)
    yield local_aws
    get_settings.cache_clear()


@pytest.fixture
def serializable_transactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB isolates transactions (serializable) and makes every single-item operation
    atomic; moto's in-process backend reads, checks and writes without a lock, so threads
    could interleave inside one operation (a transaction deep-copying an item another thread
    is updating raises inside moto). Give moto that isolation, one DynamoDB call at a time, so
    the test probes our conditions, not moto's thread safety: the race windows the tests open
    lie between calls, where they lie on DynamoDB too. S3 calls likewise: moto lists a bucket
    by iterating the very dict another thread's DeleteObjects shrinks (S3 itself lists
    consistently while objects are deleted)."""
    lock = threading.RLock()
    original: Callable[..., Any] = DynamoHandler.call_action

    def isolated(self: DynamoHandler) -> Any:
        with lock:
            return original(self)

    monkeypatch.setattr(DynamoHandler, "call_action", isolated)
    for name in ("bucket_response", "key_response", "ambiguous_response"):
        monkeypatch.setattr(S3Response, name, _one_at_a_time(lock, getattr(S3Response, name)))


def _one_at_a_time(lock: threading.RLock, call: Callable[..., Any]) -> Callable[..., Any]:
    def isolated(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return call(*args, **kwargs)

    return isolated
