"""The payments secret in Secrets Manager (moto) never holds the emulator's public webhook
secret in a deployed environment: an event signed with it would credit anyone (issue 27)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from batchroute.adapters.stripe_payments import PaymentsNotConfigured, SecretsManagerStripeKeys


@pytest.fixture
def secrets() -> Iterator[object]:
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")


def test_a_payments_secret_holding_the_public_webhook_secret_is_refused(secrets: object) -> None:
    # Given one secret with the emulator's public webhook secret and one with the processor's own
    for name, webhook in (("public", "whsec_emulator"), ("own", "whsec_own")):
        secrets.create_secret(  # type: ignore[attr-defined]
            Name=name, SecretString=json.dumps({"secret_key": "sk_live_x", "webhook_secret": webhook})
        )
    # Then the first makes payments unavailable, naming why; the second is used
    with pytest.raises(PaymentsNotConfigured, match="public webhook secret"):
        SecretsManagerStripeKeys("public", secretsmanager=secrets)()
    assert SecretsManagerStripeKeys("own", secretsmanager=secrets)().webhook_secret == "whsec_own"
