"""AWS Bedrock: `make_sync` / `make_batch` build the adapters of an endpoint
(docs/providers.md, AWS Bedrock). Bedrock authenticates with the function's IAM role, so
`api_key` is unused.

Endpoint -> boto3:

    endpoint.region                 -> region_name of every client
    endpoint.base_url (when set)    -> endpoint_url of bedrock-runtime (the local emulator)
    option control_url              -> endpoint_url of the bedrock control plane (locally)
    option s3_url                   -> endpoint_url of S3 (locally: moto)
    endpoint.timeouts               -> connect / read time-outs (a stream's: the longer of
                                       first_byte and idle); botocore retries off
    endpoint.api_version            -> the bedrock-runtime API version, and
    endpoint.control_api_version    -> the bedrock one: the installed botocore must carry
                                       their service models (else ProviderNotConfigured)
    options batch_bucket, batch_role_arn, batch_prefix, batch_kms_key_id,
            batch_timeout_hours, batch_min_records -> BatchSettings (client.py)
"""

from __future__ import annotations

from batchroute.providers.bedrock.client import (
    CONTROL_SERVICE,
    RUNTIME_SERVICE,
    BatchSettings,
    BedrockBatch,
    BedrockClients,
    BedrockConverse,
)
from batchroute.providers.endpoints import ProviderEndpoint


def clients_for(endpoint: ProviderEndpoint) -> BedrockClients:
    return BedrockClients(
        region=endpoint.region,
        runtime_url=endpoint.base_url or None,
        control_url=endpoint.option("control_url") or None,
        s3_url=endpoint.option("s3_url") or None,
        timeouts=endpoint.timeouts,
        api_versions={
            RUNTIME_SERVICE: endpoint.api_version,
            CONTROL_SERVICE: endpoint.control_api_version,
        },
    )


def make_sync(endpoint: ProviderEndpoint, api_key: str | None) -> BedrockConverse:
    del api_key  # IAM
    return BedrockConverse(endpoint.slug, clients_for(endpoint))


def make_batch(endpoint: ProviderEndpoint, api_key: str | None) -> BedrockBatch:
    del api_key  # IAM
    return BedrockBatch(endpoint.slug, clients_for(endpoint), BatchSettings.from_endpoint(endpoint))


__all__ = ["BatchSettings", "BedrockBatch", "BedrockClients", "BedrockConverse", "make_batch", "make_sync"]
