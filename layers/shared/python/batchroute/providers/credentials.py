"""Provider API keys: one secret per provider per environment in AWS Secrets Manager,
`<prefix>-provider-<slug>` (`resources.provider_secret_name`), created empty by the CDK
stack and filled by the operator (docs/providers.md, Enabling a provider).

Read through powertools' `parameters` with a max age, so a rotated key is picked up within
minutes without a redeploy, and a warm function does not call Secrets Manager per request. A
key is never logged, never put in an error message or a result row: an empty or missing
secret is reported by name only (ProviderNotConfigured), and the key itself travels only in
the vendor request's headers.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from batchroute import resources
from batchroute.errors import PermanentError

KEY_MAX_AGE_SECONDS = 300


class ProviderNotConfigured(PermanentError):
    """No adapter can serve this provider here (not enabled in this environment, or no key)."""

    code = "provider_not_configured"


class ProviderKeys:
    def __init__(self, prefix: str, *, secretsmanager: Any, max_age: int = KEY_MAX_AGE_SECONDS) -> None:
        self.prefix = prefix
        self.max_age = max_age
        self._provider = SecretsProvider(boto3_client=secretsmanager)

    def secret_name(self, slug: str) -> str:
        return resources.provider_secret_name(self.prefix, slug)

    def api_key(self, slug: str) -> str:
        """The provider's key (cached up to `max_age` seconds); ProviderNotConfigured when the
        secret is missing or empty."""
        name = self.secret_name(slug)
        try:
            value = self._provider.get(name, max_age=self.max_age)
        except GetParameterError as exc:
            raise ProviderNotConfigured(
                f"the API key of provider {slug} cannot be read: put it in the secret {name}"
            ) from exc
        key = value.decode() if isinstance(value, bytes) else str(value or "")
        if not key.strip():
            raise ProviderNotConfigured(
                f"the API key of provider {slug} is not set: put it in the secret {name}"
            )
        return key.strip()
