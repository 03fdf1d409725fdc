"""Per-environment settings, read from the `environments` map in cdk.json's context."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from aws_cdk import aws_logs as logs
from constructs import Construct

ENVIRONMENTS = ("production", "test")
CONTEXT_KEY = "environments"

# CloudWatch Logs accepts only these retention periods.
_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS,
}


@dataclass(frozen=True)
class EnvironmentConfig:
    name: str
    public_base_url: str
    email_sender: str
    log_level: str
    log_retention_days: int
    api_throttling_rate_limit: int
    api_throttling_burst_limit: int
    api_5xx_rate_threshold: float
    waf_requests_per_ip_per_5_minutes: int
    alarm_email: str = ""
    # Optional: the console's own domain names on the CloudFront distribution and their ACM
    # certificate (us-east-1, CloudFront's region); without them, the *.cloudfront.net name.
    console_domain_names: tuple[str, ...] = ()
    console_certificate_arn: str = ""

    @property
    def is_production(self) -> bool:
        return self.name == "production"

    @property
    def log_retention(self) -> logs.RetentionDays:
        return _RETENTION[self.log_retention_days]

    @property
    def email_domain(self) -> str:
        return self.email_sender.rpartition("@")[2]

    @classmethod
    def from_context(cls, scope: Construct, name: str) -> EnvironmentConfig:
        environments = scope.node.try_get_context(CONTEXT_KEY)
        if not isinstance(environments, dict) or name not in environments:
            raise ValueError(f"cdk.json context has no '{CONTEXT_KEY}.{name}' entry")
        return cls.from_mapping(name, environments[name])

    @classmethod
    def from_mapping(cls, name: str, values: dict[str, Any]) -> EnvironmentConfig:
        known = {f.name for f in fields(cls)} - {"name"}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown settings for environment {name}: {sorted(unknown)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        config = cls(name=name, **values)
        config.validate()
        return config

    def validate(self) -> None:
        problems = []
        if not self.public_base_url.startswith("https://"):
            problems.append("public_base_url must be https")
        if "@" not in self.email_sender:
            problems.append("email_sender must be an email address")
        if self.log_retention_days not in _RETENTION:
            problems.append(f"log_retention_days must be one of {sorted(_RETENTION)}")
        if not 0 < self.api_5xx_rate_threshold < 1:
            problems.append("api_5xx_rate_threshold is a fraction between 0 and 1")
        if self.waf_requests_per_ip_per_5_minutes < 10:
            problems.append("waf_requests_per_ip_per_5_minutes must be at least 10 (WAF's minimum)")
        problems += self._console_domain_problems()
        if problems:
            raise ValueError(f"environment {self.name}: " + "; ".join(problems))

    def _console_domain_problems(self) -> list[str]:
        if bool(self.console_domain_names) != bool(self.console_certificate_arn):
            return ["console_domain_names and console_certificate_arn go together"]
        if not self.console_domain_names:
            return []
        problems = []
        if not self.console_certificate_arn.startswith("arn:aws:acm:us-east-1:"):
            problems.append("console_certificate_arn must be an ACM certificate in us-east-1 (CloudFront's)")
        host = self.public_base_url.removeprefix("https://").split("/", 1)[0]
        if host not in self.console_domain_names:
            # Checkout returns, emails and webhooks link to public_base_url: the console's origin.
            problems.append("public_base_url must be one of console_domain_names")
        return problems
