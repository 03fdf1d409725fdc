"""The local provisioner creates what the parity test does not compare with the template
(bucket hardening, KMS, SES sender, a runnable workflow), and the runner's environment is
one the service's Settings accept."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from batchroute import resources
from batchroute.config import Settings
from batchroute_tools.local import environment
from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, LocalStack, provision

PREFIX = resources.resource_prefix("local")


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    # Read-only checks: one provisioned account serves the whole module.
    with mock_aws():
        yield provision(prefix=PREFIX, account=LOCAL_ACCOUNT, region=LOCAL_REGION, endpoint_url=None)


def _client(service: str) -> Any:
    make_client: Any = boto3.client
    return make_client(service, region_name=LOCAL_REGION)


def test_every_declared_resource_is_named_in_the_stack(stack: LocalStack) -> None:
    assert set(stack.tables) == {t.key for t in resources.TABLES}
    assert (
        set(stack.queue_urls)
        == set(stack.dlq_urls)
        == set(stack.queue_arns)
        == {q.key for q in resources.QUEUES}
    )
    assert stack.buckets == {b.key: b.physical_name(PREFIX, LOCAL_ACCOUNT) for b in resources.BUCKETS}
    assert stack.state_machine_arn.endswith(f":stateMachine:{resources.state_machine_name(PREFIX)}")


def test_buckets_are_private_and_encrypted(stack: LocalStack) -> None:
    s3 = _client("s3")
    for bucket in resources.BUCKETS:
        name = stack.buckets[bucket.key]
        block = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
        assert all(block.values())
        encryption = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]
        assert encryption["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"


def test_only_buckets_declared_with_cors_have_it(stack: LocalStack) -> None:
    s3 = _client("s3")
    for bucket in resources.BUCKETS:
        name = stack.buckets[bucket.key]
        if bucket.cors:
            assert s3.get_bucket_cors(Bucket=name)["CORSRules"]
        else:
            with pytest.raises(s3.exceptions.ClientError, match="NoSuchCORSConfiguration"):
                s3.get_bucket_cors(Bucket=name)


def test_kms_key_and_email_sender_exist(stack: LocalStack) -> None:
    key = _client("kms").describe_key(KeyId=stack.kms_key_id)["KeyMetadata"]
    assert key["Enabled"]
    assert stack.email_sender == Settings.model_fields["email_sender"].default
    assert stack.email_sender in _client("ses").list_identities(IdentityType="EmailAddress")["Identities"]


def test_state_machine_definition_is_the_rendered_workflow(stack: LocalStack) -> None:
    definition = json.loads(
        _client("stepfunctions").describe_state_machine(stateMachineArn=stack.state_machine_arn)["definition"]
    )
    assert definition["StartAt"] == json.loads(resources.workflow_definition_template())["StartAt"]
    assert definition["States"]["Route"]["Parameters"]["QueueUrl"] == stack.queue_urls["route"]
    assert definition["States"]["RecordExecution"]["Parameters"]["TableName"] == stack.tables["batches"]
    assert "${" not in json.dumps(definition)


def test_service_environment_is_what_settings_read(stack: LocalStack) -> None:
    # Given a stack on a moto server endpoint
    served = dataclasses.replace(stack, endpoint_url="http://127.0.0.1:5999")
    # When the service reads the runner's environment
    settings = Settings.from_environ(environment.service_environment(served, api_url="http://127.0.0.1:8123"))
    # Then the service sees the local stack through its one settings model
    assert settings.environment == "local"
    assert settings.aws_endpoint_url == "http://127.0.0.1:5999"
    assert settings.prefix == PREFIX
    assert settings.queue_urls == stack.queue_urls
    assert settings.buckets == stack.buckets
    assert settings.state_machine_arn == stack.state_machine_arn
    assert settings.kms_key_id == stack.kms_key_id
    assert settings.public_base_url == "http://127.0.0.1:8123"
    assert {t.key: settings.table_name(t.key) for t in resources.TABLES} == stack.tables


def test_service_environment_needs_the_server_endpoint(stack: LocalStack) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        environment.service_environment(stack, api_url="http://127.0.0.1:8000")


def test_stack_file_is_written_and_removed_only_by_its_owner(stack: LocalStack, tmp_path: Path) -> None:
    # Given a stack file written by this process
    path = tmp_path / ".local" / "stack.json"
    environment.write_stack_file(path, stack, api_url="http://127.0.0.1:8000")
    document = json.loads(path.read_text())
    assert document["pid"] == os.getpid()
    assert document["api_url"] == "http://127.0.0.1:8000"
    assert document["tables"] == stack.tables
    assert document["state_machine_arn"] == stack.state_machine_arn
    # When another runner has replaced it, then removing leaves theirs alone
    path.write_text(json.dumps({**document, "pid": -1}))
    environment.remove_stack_file(path)
    assert path.exists()
    # When it is ours, then it is removed; a missing file is fine
    environment.write_stack_file(path, stack, api_url="http://127.0.0.1:8000")
    environment.remove_stack_file(path)
    assert not path.exists()
    environment.remove_stack_file(path)
