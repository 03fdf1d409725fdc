"""Where a webhook may point: the one set of rules for a batch's `webhook`, a queued chat
job's `batch.webhook` and the org's default delivery webhook (docs/webhooks.md).

A target is `{url, secret}`: the URL public HTTPS (the SSRF guard in domain/delivery/network.py: no
private, loopback or metadata address, checked on what the name resolves to) and at most
2048 characters; the secret a string of 8-256 characters. Every problem is reported, each
with the field's path, so a preflight can list them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from batchroute.errors import InvalidRequest

WEBHOOK_SECRET_MIN: Final = 8
WEBHOOK_SECRET_MAX: Final = 256
WEBHOOK_URL_MAX: Final = 2048
WEBHOOK_FIELDS: Final = ("url", "secret")


@dataclass(frozen=True)
class TargetProblem:
    code: str
    message: str
    path: str  # the field, e.g. `webhook.secret`
    details: dict[str, Any] | None = None


def webhook_target_problems(
    webhook: object, *, check_url: Callable[[str], object], field: str = "webhook"
) -> list[TargetProblem]:
    """Every problem of the target `webhook` (empty when it is acceptable); `check_url`
    raises InvalidRequest for a URL the guard refuses (`UrlGuard.check`)."""
    if not isinstance(webhook, Mapping):
        return [TargetProblem("invalid_field", f"{field} must be an object {{url, secret}}.", field)]
    problems = [
        TargetProblem(
            "unknown_field", f"{field}.{key} is not a field of a webhook (url, secret).", f"{field}.{key}"
        )
        for key in webhook
        if key not in WEBHOOK_FIELDS
    ]
    url = webhook.get("url")
    if not isinstance(url, str) or not url:
        problems.append(TargetProblem("missing_field", f"{field}.url is required.", f"{field}.url"))
    elif len(url) > WEBHOOK_URL_MAX:
        problems.append(
            TargetProblem(
                "invalid_url", f"{field}.url must be at most {WEBHOOK_URL_MAX} characters.", f"{field}.url"
            )
        )
    else:
        try:
            check_url(url)
        except InvalidRequest as refused:
            problems.append(TargetProblem(refused.code, refused.message, f"{field}.url", refused.details))
    secret = webhook.get("secret")
    if not isinstance(secret, str) or not WEBHOOK_SECRET_MIN <= len(secret) <= WEBHOOK_SECRET_MAX:
        problems.append(
            TargetProblem(
                "invalid_webhook_secret",
                f"{field}.secret must be a string of {WEBHOOK_SECRET_MIN}-{WEBHOOK_SECRET_MAX} characters.",
                f"{field}.secret",
            )
        )
    return problems
