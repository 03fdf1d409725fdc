"""The deployment's app secret (keys API-key hashes and signs tokens).

Production reads it from Secrets Manager once per cold start; local and test use the
configured value."""

from __future__ import annotations

from functools import lru_cache

from batchroute.adapters.aws import client
from batchroute.config import get_settings


@lru_cache(maxsize=1)
def app_secret() -> bytes:
    settings = get_settings()
    if settings.app_secret_arn:
        value = client("secretsmanager").get_secret_value(SecretId=settings.app_secret_arn)["SecretString"]
        return str(value).encode("utf-8")
    return settings.app_secret.get_secret_value().encode("utf-8")
