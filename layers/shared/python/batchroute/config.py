"""The one settings model. Nothing else in the service reads os.environ.

Validated at cold start (`get_settings()` in each handler module); unsafe values are
refused in production.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from batchroute import resources

Environment = Literal["production", "test", "local"]

# Only ever valid outside production; production must bring its own secret.
DEV_APP_SECRET = "local-development-secret-not-for-production"  # noqa: S105
# The payment emulator's key (docs/payments.md): never Stripe's.
DEV_STRIPE_KEY = "sk_test_emulator"
# The payment emulator's webhook signing secret: public, so it must never verify a
# production event (anyone could sign one with it).
DEV_WEBHOOK_SECRET = "whsec_emulator"  # noqa: S105 - public by design, refused in production


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    environment: Environment = "local"
    service_name: str = resources.SERVICE
    aws_region: str = "us-east-1"
    # Set only in local mode (the embedded moto server); on AWS the SDK default is used.
    aws_endpoint_url: str | None = None
    resource_prefix: str = ""
    queue_urls: dict[str, str] = Field(default_factory=dict)
    buckets: dict[str, str] = Field(default_factory=dict)
    state_machine_arn: str = ""
    kms_key_id: str | None = None
    # Recurring schedules' triggers on AWS (docs/schedules.md): the EventBridge Scheduler
    # group, the role the scheduler assumes and the function it invokes. Empty (local mode):
    # the sweeper fires due schedules from the due index alone.
    schedule_group_name: str = ""
    schedule_role_arn: str = ""
    schedule_target_arn: str = ""

    # Secret used to key API-key hashes and sign tokens. Production reads it from
    # Secrets Manager (app_secret_arn); local and test may set it directly.
    app_secret: SecretStr = SecretStr(DEV_APP_SECRET)
    app_secret_arn: str | None = None

    # Where the service's links point (console, verification, reset, checkout return); kept
    # without a trailing slash, so a link is `{public_base_url}/path`.
    public_base_url: str = "http://127.0.0.1:8000"
    # Origins besides PUBLIC_BASE_URL's whose pages may make cookie-authenticated writes (the
    # console's other names); a write with the session cookie from any other origin is 403
    # `forbidden_origin` (docs/auth.md, "Cross-site writes").
    console_origins: list[str] = Field(default_factory=list)
    email_sender: str = "no-reply@batchroute.local"
    local_outbox_dir: str = ".local/outbox"

    read_only: bool = False
    # Outside production only: admits http(s)://127.0.0.1[:port] as a webhook URL and as a
    # delivery target's endpoint_url (docs/webhooks.md, docs/delivery-targets.md).
    allow_loopback_webhooks: bool = False
    content_store_enabled: bool = True
    signup_credit_usd: Decimal | None = None
    # Routing guards: an empty allowlist admits every built-in provider; the launch guard
    # keeps providers not yet launched out of routing outside local mode.
    provider_allowlist: list[str] = Field(default_factory=list)
    launch_provider_guard: bool = True
    # Cache-aware routing (docs/routing.md): rank lanes on their expected cost with the
    # batch's shared prompt prefixes cached. Off only to compare (bench/cache_example.py).
    cache_aware_routing: bool = True
    log_level: str = "INFO"

    # Catalog live state (docs/catalog.md): a lane whose last heartbeat is older than the
    # TTL is `stale_heartbeat` (no live record at all counts as stale too). Locally the
    # providers are simulated; the slugs listed here answer their health check as down, so
    # their lanes go stale (SIMULATED_PROVIDERS_DOWN='["groq"]').
    lane_heartbeat_ttl_seconds: int = Field(default=300, ge=30, le=86_400)
    simulated_providers_down: list[str] = Field(default_factory=list)

    # Rate limits and retention (docs/rate-limits.md, docs/billing-controls.md): requests
    # allowed per rolling window. Authenticated callers: per API key (or signed-in user) and
    # per account over `rate_limit_window_seconds`; anonymous endpoints per client IP.
    rate_limits_enabled: bool = True
    rate_limit_window_seconds: int = Field(default=60, ge=1, le=86_400)
    rate_limit_per_key: int = Field(default=600, ge=1)
    rate_limit_per_account: int = Field(default=1200, ge=1)
    rate_limit_register_per_ip: int = Field(default=10, ge=1)
    rate_limit_register_window_seconds: int = Field(default=3600, ge=1, le=86_400)
    rate_limit_login_per_ip: int = Field(default=100, ge=1)
    rate_limit_login_per_ip_email: int = Field(default=20, ge=1)
    rate_limit_login_window_seconds: int = Field(default=600, ge=1, le=86_400)
    rate_limit_password_per_ip: int = Field(default=5, ge=1)
    rate_limit_password_per_email: int = Field(default=5, ge=1)
    rate_limit_password_window_seconds: int = Field(default=3600, ge=1, le=86_400)
    # The local server's proxies (docs/rate-limits.md, "The client IP"): X-Forwarded-For is
    # honoured only from these addresses; by default from none, so the client IP is the
    # socket peer. On AWS the client IP is API Gateway's sourceIp and this is not read.
    trusted_proxies: list[str] = Field(default_factory=list)
    # Account lockout (docs/rate-limits.md, "Account lockout"): this many failed sign-ins for
    # one address within the window, from any IPs, lock its password sign-in for
    # `login_lockout_seconds`; the account's user is emailed once per lockout.
    login_lockout_failures: int = Field(default=10, ge=1)
    login_lockout_window_seconds: int = Field(default=900, ge=1, le=86_400)
    login_lockout_seconds: int = Field(default=900, ge=1, le=86_400)
    retention_grace_hours: int = Field(default=72, ge=1, le=24 * 30)
    # Retention GC (docs/retention.md): at most this many batches reclaimed or rescheduled
    # per sweep (the sweeper runs once a minute).
    retention_sweep_batches: int = Field(default=50, ge=1, le=1000)

    # Files (docs/files.md). A direct upload (POST /v1/files) passes through API Gateway and
    # the 6 MB Lambda payload limit, base64-encoded for multipart: 4 MiB is what fits; larger
    # files (up to max_file_bytes) go through a signed S3 upload URL valid for
    # file_upload_url_seconds. Each JSONL line may be at most max_jsonl_line_bytes.
    max_direct_upload_bytes: int = Field(default=4 * 1024 * 1024, ge=1)
    max_file_bytes: int = Field(default=2 * 1024**3, ge=1, le=5 * 1024**3)
    file_upload_url_seconds: int = Field(default=900, ge=60, le=12 * 3600)
    # A signed upload declared above this goes up as an S3 multipart upload in parts of
    # file_part_bytes (grown when 10,000 parts would not hold it), and its checks run off the
    # request path (docs/files.md, Multipart).
    file_multipart_threshold_bytes: int = Field(default=64 * 1024**2, ge=5 * 1024**2)
    file_part_bytes: int = Field(default=64 * 1024**2, ge=5 * 1024**2, le=5 * 1024**3)
    # Downloads of stored files larger than this are a redirect to a signed S3 URL valid for
    # file_download_url_seconds: the function never holds (or relays) the bytes.
    file_download_redirect_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    file_download_url_seconds: int = Field(default=300, ge=10, le=3600)
    max_jsonl_line_bytes: int = Field(default=1024 * 1024, ge=1024)
    # JSON request bodies (docs/limits.md): the same 4 MiB, for the same reason. A JSON body
    # travels inside the Lambda event as an escaped string, so 4 MiB is what always fits the
    # 6 MB invocation payload behind API Gateway; locally the same number. Larger inputs go
    # through file uploads.
    max_json_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)

    # Providers (docs/providers.md). Transient provider errors are retried per item with
    # exponential backoff and full jitter: delay = uniform(0, min(cap, base * 2**(n-1))).
    # Every environment calls the providers through their real adapters, as its data file
    # says (catalog/data/environments/<env>.toml); locally those point at the vendor
    # emulators (`vendor_emulator_url`, docs/emulators.md), which answer deterministically:
    # a whole answer takes `simulated_latency_ms`; a stream waits `simulated_ttft_ms` for its
    # first byte, then `simulated_inter_token_ms` per chunk; a vendor batch job stays in
    # progress for `simulated_batch_poll_seconds`; `simulated_completion_tokens` fixes
    # completion usage (0 = derived from the request); a job holding `[simulate:stuck_batch]`
    # reports `simulated_stuck_batch_percent` of its requests done until it is cancelled
    # (40; 0: a vendor that answered nothing yet); `simulated_providers_down` (above)
    # drops every connection to those providers. `simulated_providers` (local only) answers
    # from the in-process simulator instead, without HTTP (the in-process test suites, where
    # the adapters have suites of their own); `simulated_capacity` caps its in-flight calls.
    # API keys are read from Secrets Manager for at most `provider_key_max_age_seconds`.
    vendor_emulator_url: str = "http://127.0.0.1:8010"
    simulated_providers: bool = False
    provider_key_max_age_seconds: int = Field(default=300, ge=0, le=3600)
    # The role Bedrock batch inference jobs run as (the CDK stack creates it).
    bedrock_batch_role_arn: str = ""
    provider_retry_max_attempts: int = Field(default=4, ge=1, le=10)
    provider_retry_base_seconds: float = Field(default=0.5, ge=0, le=60)
    provider_retry_cap_seconds: float = Field(default=30.0, ge=0, le=900)
    # How often a running vendor batch job is polled (locally: at most half a simulated job).
    provider_batch_poll_interval_seconds: float = Field(default=60.0, gt=0, le=3600)
    simulated_latency_ms: int = Field(default=50, ge=0, le=60_000)
    simulated_ttft_ms: int = Field(default=150, ge=0, le=60_000)
    simulated_inter_token_ms: int = Field(default=15, ge=0, le=10_000)
    simulated_batch_poll_seconds: float = Field(default=1.0, ge=0, le=86_400)
    simulated_capacity: int = Field(default=0, ge=0)
    simulated_completion_tokens: int = Field(default=0, ge=0)
    simulated_stuck_batch_percent: int = Field(default=40, ge=0, le=99)
    # Deadline rescue (docs/batches.md): no lane is judged before it ran this long (a job
    # just submitted says nothing). The local e2e stack sets a few seconds.
    rescue_min_observation_seconds: int = Field(default=600, ge=0, le=86_400)

    # Chat completions (docs/chat.md). The direct path keeps the lanes' live state in process
    # for `chat_lane_state_ttl_seconds` (no DynamoDB read before the first byte while warm);
    # a provider that sends no first byte within `chat_first_byte_timeout_seconds` counts as
    # down (the next lane is tried); a stream writes its usage so far to its request record
    # every `chat_usage_checkpoint_seconds`, and the sweeper settles a chat hold still open
    # after `chat_hold_stale_seconds` (its function died) at the last checkpoint: longer than
    # the streaming function may run, so no hold of a live stream is ever taken for stale.
    chat_lane_state_ttl_seconds: float = Field(default=15.0, ge=0, le=300)
    chat_first_byte_timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    chat_usage_checkpoint_seconds: float = Field(default=2.0, gt=0, le=600)
    chat_hold_stale_seconds: int = Field(default=300, gt=resources.STREAM_TIMEOUT_SECONDS, le=86_400)

    # Payments (docs/payments.md): Stripe through its SDK. In AWS the keys come from the
    # Secrets Manager secret `payments_secret_name` (JSON {secret_key, webhook_secret}); without
    # it (local, tests) from the two settings below, which match the payment emulator's
    # defaults. `payments_api_url` points the SDK at the emulator (default in local mode:
    # `<vendor_emulator_url>/stripe`); AWS environments talk to Stripe itself. An auto top-up is
    # charged by the sweeper unless `auto_topup_charge_inline` (then by whoever moved the
    # balance); a pending attempt whose processor answer never came is read back from the
    # processor after `auto_topup_stuck_seconds`.
    payments_secret_name: str | None = None
    payments_api_url: str | None = None
    stripe_secret_key: SecretStr = SecretStr(DEV_STRIPE_KEY)
    stripe_webhook_secret: SecretStr = SecretStr(DEV_WEBHOOK_SECRET)
    auto_topup_charge_inline: bool = False
    auto_topup_stuck_seconds: int = Field(default=600, ge=60, le=86_400)
    # A paid checkout credits only once the processor's own copy of the session says it is
    # paid (docs/payments.md "What credits a wallet"); unset: on everywhere but local mode
    # (the emulator's events are the emulator's word). Never off in production.
    payments_confirm_with_processor: bool | None = None

    @field_validator("public_base_url")
    @classmethod
    def _no_trailing_slash(cls, url: str) -> str:
        return url.rstrip("/")

    @model_validator(mode="after")
    def _simulation_is_local(self) -> Settings:
        if self.simulated_providers and self.environment != "local":
            raise ValueError("SIMULATED_PROVIDERS is for local tests only")
        return self

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> Settings:
        if self.environment != "production":
            return self
        problems = []
        if self.aws_endpoint_url:
            problems.append("AWS_ENDPOINT_URL must not be set in production")
        if self.payments_api_url:
            problems.append("PAYMENTS_API_URL must not be set in production (it talks to Stripe)")
        if not self.payments_secret_name and self.stripe_secret_key.get_secret_value() == DEV_STRIPE_KEY:
            problems.append("production needs PAYMENTS_SECRET_NAME (or its own STRIPE_SECRET_KEY)")
        if not self.payments_secret_name and self.stripe_webhook_secret.get_secret_value() in (
            "",
            DEV_WEBHOOK_SECRET,
        ):
            # however the processor key is given: a key from the environment does not bring
            # the webhook secret with it, and the emulator's public one would verify anything
            problems.append("production needs PAYMENTS_SECRET_NAME (or its own STRIPE_WEBHOOK_SECRET)")
        if self.payments_confirm_with_processor is False:
            problems.append("PAYMENTS_CONFIRM_WITH_PROCESSOR is never false in production")
        if self.allow_loopback_webhooks:
            problems.append("ALLOW_LOOPBACK_WEBHOOKS is never allowed in production")
        if not self.app_secret_arn and self.app_secret.get_secret_value() == DEV_APP_SECRET:
            problems.append("production needs APP_SECRET_ARN (or its own APP_SECRET)")
        if self.public_base_url.startswith("http://"):
            problems.append("PUBLIC_BASE_URL must be https in production")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def effective_payments_api_url(self) -> str | None:
        """Where the payment processor's SDK sends its calls: None is Stripe itself."""
        if self.payments_api_url:
            return self.payments_api_url
        return self.vendor_emulator_url.rstrip("/") + "/stripe" if self.environment == "local" else None

    @property
    def confirms_payments_with_processor(self) -> bool:
        """Whether a paid checkout is confirmed with the processor before it credits."""
        if self.payments_confirm_with_processor is not None:
            return self.payments_confirm_with_processor
        return self.environment != "local"

    @property
    def prefix(self) -> str:
        return self.resource_prefix or resources.resource_prefix(self.environment)

    def table_name(self, key: str) -> str:
        return resources.table(key).physical_name(self.prefix)

    @property
    def effective_signup_credit_usd(self) -> Decimal:
        if self.signup_credit_usd is not None:
            return self.signup_credit_usd
        return Decimal("25") if self.environment == "local" else Decimal("0")

    @property
    def retention_grace(self) -> timedelta:
        """How long after a batch ends (or is canceled) before its objects may be reclaimed
        (docs/retention.md): `retention_grace_hours`."""
        return timedelta(hours=self.retention_grace_hours)

    @property
    def cookie_secure(self) -> bool:
        return self.environment != "local"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """Each field from the upper-case variable of its name; JSON for maps and lists.

        (A few lines instead of pydantic-settings: it costs ~50 ms of cold start.)"""
        values: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = environ.get(name.upper())
            if raw is None:
                continue
            structured = field.annotation is not None and getattr(field.annotation, "__origin__", None) in (
                dict,
                list,
            )
            values[name] = json.loads(raw) if structured else raw
        return cls.model_validate(values)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_environ(os.environ)
