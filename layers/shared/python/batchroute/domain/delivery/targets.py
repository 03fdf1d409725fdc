"""Delivery targets: a customer-owned bucket, reached through the S3 API, that a batch's
result, error and receipt artifacts are pushed to when it ends (docs/delivery-targets.md).

Here are the rules of what a target may be, and the record the service keeps:

- `endpoint_url` (an S3-compatible service: https, public, through the SSRF guard; the
  guard itself runs in the service, which holds the resolver) or `region` (AWS S3), or both
  (the endpoint's signing region);
- `bucket` under the S3 naming rules, `prefix` a safe relative key prefix;
- `access_key_id` and `secret_access_key` (write-only: sealed with KMS by the service and
  never returned; the answer shows the key id's last four characters only);
- `enabled` (default true) and a `name` (default: the bucket).

Every refusal is an InvalidRequest naming its field (`invalid_delivery_target`).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Final, Literal, Protocol, TypedDict
from urllib.parse import urlsplit

from batchroute.domain.views import view_of
from batchroute.errors import InvalidRequest

MAX_TARGETS_PER_ORG: Final = 5
NAME_MAX: Final = 64
PREFIX_MAX: Final = 512
ACCESS_KEY_ID_MIN: Final = 3
ACCESS_KEY_ID_MAX: Final = 128
SECRET_MIN: Final = 8
SECRET_MAX: Final = 256
ENDPOINT_URL_MAX: Final = 2048
SECRET_PURPOSE: Final = "delivery_target_secret"  # noqa: S105 - a KMS context value

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_SIGNING_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")  # e.g. "auto" for some providers
_PREFIX_CHARS = re.compile(r"^[A-Za-z0-9!_.*'()/=-]+$")
_KEY_ID = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces
_SECRET = re.compile(r"^[\x21-\x7e]+$")


class BucketErrorView(TypedDict):
    code: str | None
    message: str | None


class LastTestView(TypedDict):
    """A target's last test as shown: `error` null when it passed."""

    ok: bool
    at: str
    key: str
    error: BucketErrorView | None


class TargetTestView(LastTestView):
    target_id: str
    bucket: str


class TargetPlace(TypedDict):
    """Where a target delivers: an S3-compatible endpoint or an AWS region, a bucket, a prefix."""

    endpoint_url: str | None
    region: str | None
    bucket: str
    prefix: str


class DeliveryTargetView(TargetPlace):
    """A target as shown: never the secret, not even sealed; the key id's last four only."""

    id: str
    object: Literal["delivery_target"]
    name: str
    enabled: bool
    access_key_id_last4: str
    secret_access_key_set: bool
    created_at: str
    updated_at: str
    last_test: LastTestView | None


@dataclass(frozen=True)
class LastTest:
    ok: bool
    at: str
    key: str
    error_code: str | None = None
    error_message: str | None = None

    def to_api(self) -> LastTestView:
        error: BucketErrorView | None = (
            {"code": self.error_code, "message": self.error_message} if not self.ok else None
        )
        return view_of(self, LastTestView, error=error)


@dataclass(frozen=True, slots=True)
class TargetTest:
    """The answer of a target's test: the sample object's outcome, kept as its `last_test`."""

    target_id: str
    bucket: str
    test: LastTest

    def to_api(self) -> TargetTestView:
        return {"target_id": self.target_id, "bucket": self.bucket, **self.test.to_api()}


@dataclass(frozen=True)
class DeliveryTarget:
    target_id: str
    org_id: str
    name: str
    bucket: str
    access_key_id: str
    secret_sealed: str = field(repr=False)
    endpoint_url: str | None = None
    region: str | None = None
    prefix: str = ""
    enabled: bool = True
    created_at: str = ""
    updated_at: str = ""
    last_test: LastTest | None = None

    def to_api(self) -> DeliveryTargetView:
        """The public view: never the secret, not even sealed; the key id's last four only."""
        return view_of(
            self,
            DeliveryTargetView,
            id=self.target_id,
            object="delivery_target",
            access_key_id_last4=self.access_key_id[-4:],
            secret_access_key_set=bool(self.secret_sealed),
            last_test=self.last_test.to_api() if self.last_test else None,
        )

    def object_key(self, *parts: str) -> str:
        """`<prefix>/<parts...>`, or just the parts without a prefix."""
        return "/".join(p for p in (self.prefix, *parts) if p)


class Readable(Protocol):
    """A stream an upload reads from (our artifact, opened in our bucket)."""

    def read(self, size: int = -1, /) -> bytes: ...


class BucketRefused(Exception):
    """The customer's bucket (or the way to it) refused an operation: `code` is the bucket's
    own error code where it gave one (AccessDenied, NoSuchBucket, ...) or ours
    (`endpoint_unreachable`, `timeout`, `unsafe_url`, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message[:500]


def secret_context(org_id: str, target_id: str) -> dict[str, str]:
    """The KMS encryption context of a target's secret: bound to its org and target."""
    return {"org_id": org_id, "target_id": target_id, "purpose": SECRET_PURPOSE}


def batch_object_keys(target: DeliveryTarget, batch_id: str) -> dict[str, str]:
    """Where each artifact of a batch lands in the target."""
    return {
        "results": target.object_key(batch_id, "results.jsonl"),
        "errors": target.object_key(batch_id, "errors.jsonl"),
        "receipt": target.object_key(batch_id, "receipt.json"),
    }


def probe_object_key(target: DeliveryTarget, at: datetime) -> str:
    return target.object_key(f"batchroute-test-{at.strftime('%Y%m%dT%H%M%S%fZ')}.json")


# -- the commands ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CreateTarget:
    """A new target's fields, each checked at the edge by the request model
    (functions/api/schemas/delivery/targets.py, with the parsers below), with their defaults."""

    bucket: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    name: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    prefix: str = ""
    enabled: bool = True

    def target(self, *, target_id: str, org_id: str, sealed: str, at: str) -> DeliveryTarget:
        """The new target: these fields (the name defaults to the bucket), the secret sealed."""
        given = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "secret_access_key"}
        given["name"] = self.name or self.bucket
        return DeliveryTarget(target_id, org_id, secret_sealed=sealed, created_at=at, updated_at=at, **given)


@dataclass(frozen=True, slots=True)
class UpdateTarget:
    """A partial update: only the fields named in `given` change (each checked at the edge)."""

    given: frozenset[str]
    name: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    bucket: str | None = None
    prefix: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    enabled: bool | None = None

    def pick(self, name: str, current: Any) -> Any:
        """The given value of `name`, or `current` when it was not given."""
        return getattr(self, name) if name in self.given else current


def missing_field(name: str) -> InvalidRequest:
    """A required field of a new target left out."""
    return _invalid(name, f"{name} is required.")


def check_new(command: CreateTarget) -> None:
    """A new target's location as a whole. The endpoint's SSRF check needs a resolver: the
    service runs it."""
    _check_location(command.endpoint_url, command.region)


def check_update(changes: UpdateTarget) -> None:
    """A partial update's own rule: a new secret needs its key id too."""
    if ("secret_access_key" in changes.given) != ("access_key_id" in changes.given):
        raise _invalid(
            "secret_access_key",
            "access_key_id and secret_access_key are replaced together.",
        )


def apply_update(target: DeliveryTarget, changes: UpdateTarget, *, at: str) -> DeliveryTarget:
    """The target with `changes` applied; the location is re-checked as a whole. The new
    secret, if any, is sealed by the caller (secret_sealed)."""
    endpoint_url = changes.pick("endpoint_url", target.endpoint_url)
    region = changes.pick("region", target.region)
    _check_location(endpoint_url, region)
    bucket = changes.pick("bucket", target.bucket)
    name = changes.pick("name", target.name if target.name != target.bucket else None) or bucket
    return replace(
        target,
        name=name,
        endpoint_url=endpoint_url,
        region=region,
        bucket=bucket,
        prefix=changes.pick("prefix", target.prefix),
        access_key_id=changes.pick("access_key_id", target.access_key_id),
        enabled=changes.pick("enabled", target.enabled),
        updated_at=at,
        last_test=None if _location_changed(target, changes) else target.last_test,
    )


def _location_changed(target: DeliveryTarget, changes: UpdateTarget) -> bool:
    """A test's outcome holds for the location and credentials it was made with."""
    watched = ("endpoint_url", "region", "bucket", "prefix", "access_key_id")
    return "secret_access_key" in changes.given or any(
        name in changes.given and getattr(changes, name) != getattr(target, name) for name in watched
    )


def _check_location(endpoint_url: str | None, region: str | None) -> None:
    if endpoint_url is None and region is None:
        raise _invalid("region", "Give region (AWS S3) or endpoint_url (an S3-compatible service).")
    if endpoint_url is None and region is not None and not _AWS_REGION.match(region):
        raise _invalid("region", f"{region!r} is not an AWS region (e.g. us-east-1).")


# -- the rules of the request models' fields --------------------------------------------------
def parse_name(value: Any, _name: str = "name") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= NAME_MAX or not value.isprintable():
        raise _invalid("name", f"name must be 1-{NAME_MAX} printable characters.")
    return value.strip()


def parse_endpoint_url(value: Any, _name: str = "endpoint_url") -> str | None:
    """Shape only: an https origin without path, query, fragment or credentials. Whether its
    host is public is the SSRF guard's call (domain/delivery/network.py), made by the service."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > ENDPOINT_URL_MAX:
        raise _invalid(
            "endpoint_url", f"endpoint_url must be a URL of at most {ENDPOINT_URL_MAX} characters."
        )
    url = value.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise _invalid("endpoint_url", "endpoint_url is malformed.", code="invalid_url") from exc
    if parts.path or parts.query or parts.fragment:
        raise _invalid(
            "endpoint_url",
            "endpoint_url is the service's origin (scheme, host, port): put the bucket in bucket "
            "and the folder in prefix.",
            code="invalid_url",
        )
    return url


def parse_region(value: Any, _name: str = "region") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SIGNING_REGION.match(value):
        raise _invalid("region", "region must be a region name such as us-east-1.")
    return value


def parse_bucket(value: Any, _name: str = "bucket") -> str:
    """S3's bucket naming rules (general purpose buckets)."""
    if not isinstance(value, str) or not _BUCKET.match(value):
        raise _invalid(
            "bucket",
            "bucket must be 3-63 characters of lowercase letters, digits, dots and hyphens, "
            "starting and ending with a letter or digit.",
        )
    if ".." in value or ".-" in value or "-." in value:
        raise _invalid("bucket", "bucket must not have adjacent dots, or a dot next to a hyphen.")
    if _is_ipv4(value):
        raise _invalid("bucket", "bucket must not be formatted as an IP address.")
    if value.startswith(_BUCKET_RESERVED_PREFIXES) or value.endswith(_BUCKET_RESERVED_SUFFIXES):
        raise _invalid("bucket", "bucket uses a prefix or suffix S3 reserves.")
    return value


def parse_prefix(value: Any, _name: str = "prefix") -> str:
    """A relative folder: no leading or trailing slash is kept, no empty, `.` or `..` part."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > PREFIX_MAX:
        raise _invalid("prefix", f"prefix must be a string of at most {PREFIX_MAX} characters.")
    trimmed = value.strip("/")
    if not trimmed:
        return ""
    if not _PREFIX_CHARS.match(trimmed):
        raise _invalid(
            "prefix", "prefix may hold letters, digits, '/' and the characters ! _ . * ' ( ) = - only."
        )
    if any(part in ("", ".", "..") for part in trimmed.split("/")):
        raise _invalid("prefix", "prefix must not have empty, '.' or '..' parts.")
    return trimmed


def parse_access_key_id(value: Any, name: str = "access_key_id") -> str:
    return _printable(name, value, ACCESS_KEY_ID_MIN, ACCESS_KEY_ID_MAX, _KEY_ID)


def parse_secret_access_key(value: Any, name: str = "secret_access_key") -> str:
    return _printable(name, value, SECRET_MIN, SECRET_MAX, _SECRET)


def parse_enabled(value: Any, name: str = "enabled") -> bool:
    if not isinstance(value, bool):
        raise _invalid(name, f"{name} must be true or false.")
    return value


def _printable(name: str, value: Any, low: int, high: int, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not low <= len(value) <= high or not pattern.match(value):
        raise _invalid(name, f"{name} must be {low}-{high} printable characters without spaces.")
    return value


def _is_ipv4(value: str) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return False
    return True


def _invalid(
    field_name: str | None, message: str, *, code: str = "invalid_delivery_target", **extra: Any
) -> InvalidRequest:
    details: dict[str, Any] = {"field": field_name} if field_name else {}
    details.update(extra)
    return InvalidRequest(message, code=code, details=details or None)
