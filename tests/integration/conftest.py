"""Integration fixtures: moto in-process (`mock_aws`) with every resource provisioned from
the same definitions the CDK stack uses."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from moto import mock_aws

from batchroute import resources
from batchroute.adapters.aws import reset_clients
from batchroute.config import get_settings
from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, LocalStack, provision


@pytest.fixture
def local_aws() -> Iterator[LocalStack]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        reset_clients()
        stack = provision(
            prefix=resources.resource_prefix("local"),
            account=LOCAL_ACCOUNT,
            region=LOCAL_REGION,
            endpoint_url=None,
        )
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
