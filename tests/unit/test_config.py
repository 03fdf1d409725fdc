from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError

from batchroute import resources
from batchroute.config import Settings


def test_production_refuses_unsafe_defaults() -> None:
    # Given production with local defaults / When validated / Then every unsafe value is named
    with pytest.raises(ValidationError) as caught:
        Settings(
            environment="production",
            aws_endpoint_url="http://127.0.0.1:5000",
            allow_loopback_webhooks=True,
            payments_api_url="http://127.0.0.1:8010/stripe",
        )
    message = str(caught.value)
    assert "AWS_ENDPOINT_URL" in message
    assert "ALLOW_LOOPBACK_WEBHOOKS" in message
    assert "APP_SECRET_ARN" in message
    assert "PAYMENTS_API_URL" in message and "PAYMENTS_SECRET_NAME" in message


def test_production_accepts_safe_values() -> None:
    settings = Settings(
        environment="production",
        app_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:x",
        public_base_url="https://api.example.com",
        payments_secret_name="batchroute-production-payments-stripe",
    )
    assert settings.effective_payments_api_url is None  # Stripe itself
    assert settings.effective_signup_credit_usd == Decimal("0")
    assert settings.cookie_secure


def test_public_base_url_is_kept_without_a_trailing_slash() -> None:
    # every link the service sends is `{public_base_url}/path`: one slash, however it was set
    assert Settings(public_base_url="https://api.example.com/").public_base_url == "https://api.example.com"
    assert Settings(public_base_url="https://api.example.com").public_base_url == "https://api.example.com"


def test_environment_is_an_enum() -> None:
    with pytest.raises(ValidationError):
        Settings(environment="dev")  # type: ignore[arg-type]


def test_names_follow_the_resource_definitions() -> None:
    settings = Settings(environment="test")
    assert settings.table_name("batches") == "batchroute-test-batches"
    assert Settings(environment="local").effective_signup_credit_usd == Decimal("25")


def test_settings_read_the_environment() -> None:
    # Given upper-case variables, JSON for maps and lists / When read / Then typed fields
    settings = Settings.from_environ(
        {
            "QUEUE_URLS": '{"route": "http://q/route"}',
            "PROVIDER_ALLOWLIST": '["groq"]',
            "READ_ONLY": "1",
            "SIGNUP_CREDIT_USD": "12.5",
            "UNRELATED": "x",
        }
    )
    assert settings.queue_urls == {"route": "http://q/route"}
    assert settings.provider_allowlist == ["groq"]
    assert settings.read_only is True
    assert settings.signup_credit_usd == Decimal("12.5")


def test_bad_values_are_refused_at_cold_start() -> None:
    with pytest.raises(ValidationError):
        Settings.from_environ({"READ_ONLY": "maybe"})


@pytest.mark.parametrize("webhook_secret", [None, "", "whsec_emulator"])
def test_production_refuses_the_public_webhook_secret_however_the_key_is_given(
    webhook_secret: str | None,
) -> None:
    # Given production with its own processor key from the environment but no secret name
    # (issue 27: an event signed with the emulator's public secret credited $1,000)
    given = {} if webhook_secret is None else {"stripe_webhook_secret": webhook_secret}
    with pytest.raises(ValidationError) as caught:
        Settings(
            environment="production",
            app_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:x",
            public_base_url="https://api.example.com",
            stripe_secret_key="sk_live_own",
            **given,  # type: ignore[arg-type]
        )
    assert "STRIPE_WEBHOOK_SECRET" in str(caught.value)
    # And with its own signing secret it starts
    Settings(
        environment="production",
        app_secret_arn="arn:aws:secretsmanager:us-east-1:1:secret:x",
        public_base_url="https://api.example.com",
        stripe_secret_key="sk_live_own",
        stripe_webhook_secret="whsec_own",  # type: ignore[arg-type]
    )


def test_a_paid_checkout_is_confirmed_with_the_processor_everywhere_but_local_mode() -> None:
    # Locally the emulator's events are trusted with the service's record; elsewhere the
    # processor's own copy of the session decides (docs/payments.md "What credits a wallet")
    assert Settings(environment="local").confirms_payments_with_processor is False
    assert Settings(environment="test").confirms_payments_with_processor is True
    safe = {
        "environment": "production",
        "app_secret_arn": "arn:aws:secretsmanager:us-east-1:1:secret:x",
        "public_base_url": "https://api.example.com",
        "payments_secret_name": "batchroute-production-payments-stripe",
    }
    assert Settings(**safe).confirms_payments_with_processor is True
    # A test may turn it on locally (against the emulator); production never turns it off
    on = Settings.from_environ({"PAYMENTS_CONFIRM_WITH_PROCESSOR": "true"})
    assert on.confirms_payments_with_processor is True
    with pytest.raises(ValidationError, match="PAYMENTS_CONFIRM_WITH_PROCESSOR"):
        Settings(**safe, payments_confirm_with_processor=False)


def test_a_chat_hold_is_stale_only_after_the_streaming_function_may_run() -> None:
    # A live stream's hold is never taken for a dead one's: the threshold outlasts the function
    limit = resources.STREAM_TIMEOUT_SECONDS
    assert Settings().chat_hold_stale_seconds > limit
    assert (
        Settings.from_environ({"CHAT_HOLD_STALE_SECONDS": str(limit + 1)}).chat_hold_stale_seconds
        == limit + 1
    )
    with pytest.raises(ValidationError, match="chat_hold_stale_seconds"):
        Settings.from_environ({"CHAT_HOLD_STALE_SECONDS": str(limit)})
