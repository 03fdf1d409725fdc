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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

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

CREATE_FIELDS: Final = (
    "name",
    "endpoint_url",
    "region",
    "bucket",
    "prefix",
    "access_key_id",
    "secret_access_key",
    "enabled",
)
# Shown by GET: a body copied from a GET answer into PATCH may carry them unchanged.
READ_ONLY_FIELDS: Final = frozenset(
    {
        "id",
        "object",
        "access_key_id_last4",
        "secret_access_key_set",
        "created_at",
        "updated_at",
        "last_test",
    }
)

_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_AWS_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_SIGNING_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")  # e.g. "auto" for some providers
_PREFIX_CHARS = re.compile(r"^[A-Za-z0-9!_.*'()/=-]+$")
_KEY_ID = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII, no spaces
_SECRET = re.compile(r"^[\x21-\x7e]+$")


@dataclass(frozen=True)
class LastTest:
    ok: bool
    at: str
    key: str
    error_code: str | None = None
    error_message: str | None = None

    def to_api(self) -> dict[str, Any]:
        error = {"code": self.error_code, "message": self.error_message} if not self.ok else None
        return {"ok": self.ok, "at": self.at, "key": self.key, "error": error}


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

    def to_api(self) -> dict[str, Any]:
        """The public view: never the secret, not even sealed; the key id's last four only."""
        return {
            "id": self.target_id,
            "object": "delivery_target",
            "name": self.name,
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "enabled": self.enabled,
            "access_key_id_last4": self.access_key_id[-4:],
            "secret_access_key_set": bool(self.secret_sealed),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "last_test": self.last_test.to_api() if self.last_test else None,
        }

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


# -- validation ----------------------------------------------------------------------------
def parse_create(body: Any) -> dict[str, Any]:
    """The fields of a new target, checked (except the endpoint's SSRF check, which needs
    a resolver: the service runs it). Missing required fields are refused."""
    values = _parse_fields(body, allow_read_only=False)
    for required in ("bucket", "access_key_id", "secret_access_key"):
        if required not in values:
            raise _invalid(required, f"{required} is required.")
    values.setdefault("enabled", True)
    values.setdefault("prefix", "")
    values.setdefault("endpoint_url", None)
    values.setdefault("region", None)
    values.setdefault("name", None)
    _check_location(values.get("endpoint_url"), values.get("region"))
    return values


def parse_update(body: Any) -> dict[str, Any]:
    """The given fields of a partial update, checked; a new secret needs its key id too."""
    values = _parse_fields(body, allow_read_only=True)
    if ("secret_access_key" in values) != ("access_key_id" in values):
        raise _invalid(
            "secret_access_key",
            "access_key_id and secret_access_key are replaced together.",
        )
    return values


def apply_update(target: DeliveryTarget, changes: Mapping[str, Any], *, at: str) -> DeliveryTarget:
    """The target with `changes` (from parse_update) applied; the location is re-checked as a
    whole. The new secret, if any, is sealed by the caller (secret_sealed)."""
    endpoint_url = changes.get("endpoint_url", target.endpoint_url)
    region = changes.get("region", target.region)
    _check_location(endpoint_url, region)
    bucket = changes.get("bucket", target.bucket)
    name = changes.get("name", target.name if target.name != target.bucket else None) or bucket
    return replace(
        target,
        name=name,
        endpoint_url=endpoint_url,
        region=region,
        bucket=bucket,
        prefix=changes.get("prefix", target.prefix),
        access_key_id=changes.get("access_key_id", target.access_key_id),
        enabled=changes.get("enabled", target.enabled),
        updated_at=at,
        last_test=None if _location_changed(target, changes) else target.last_test,
    )


def _location_changed(target: DeliveryTarget, changes: Mapping[str, Any]) -> bool:
    """A test's outcome holds for the location and credentials it was made with."""
    watched = ("endpoint_url", "region", "bucket", "prefix", "access_key_id")
    return "secret_access_key" in changes or any(
        name in changes and changes[name] != getattr(target, name) for name in watched
    )


def _parse_fields(body: Any, *, allow_read_only: bool) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise _invalid(None, "The body must be a JSON object.")
    unknown = sorted(
        str(k) for k in body if k not in CREATE_FIELDS and not (allow_read_only and k in READ_ONLY_FIELDS)
    )
    if unknown:
        raise _invalid(unknown[0], f"Unknown field {unknown[0]!r}.", unknown=unknown)
    values: dict[str, Any] = {}
    if "name" in body:
        values["name"] = _name(body["name"])
    if "endpoint_url" in body:
        values["endpoint_url"] = _endpoint_url(body["endpoint_url"])
    if "region" in body:
        values["region"] = _region(body["region"])
    if "bucket" in body:
        values["bucket"] = _bucket(body["bucket"])
    if "prefix" in body:
        values["prefix"] = _prefix(body["prefix"])
    if "access_key_id" in body:
        values["access_key_id"] = _printable(
            "access_key_id", body["access_key_id"], ACCESS_KEY_ID_MIN, ACCESS_KEY_ID_MAX, _KEY_ID
        )
    if "secret_access_key" in body:
        values["secret_access_key"] = _printable(
            "secret_access_key", body["secret_access_key"], SECRET_MIN, SECRET_MAX, _SECRET
        )
    if "enabled" in body:
        if not isinstance(body["enabled"], bool):
            raise _invalid("enabled", "enabled must be true or false.")
        values["enabled"] = body["enabled"]
    return values


def _check_location(endpoint_url: str | None, region: str | None) -> None:
    if endpoint_url is None and region is None:
        raise _invalid("region", "Give region (AWS S3) or endpoint_url (an S3-compatible service).")
    if endpoint_url is None and region is not None and not _AWS_REGION.match(region):
        raise _invalid("region", f"{region!r} is not an AWS region (e.g. us-east-1).")


def _name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value.strip()) <= NAME_MAX or not value.isprintable():
        raise _invalid("name", f"name must be 1-{NAME_MAX} printable characters.")
    return value.strip()


def _endpoint_url(value: Any) -> str | None:
    """Shape only: an https origin without path, query, fragment or credentials. Whether its
    host is public is the SSRF guard's call (domain/network.py), made by the service."""
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


def _region(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _SIGNING_REGION.match(value):
        raise _invalid("region", "region must be a region name such as us-east-1.")
    return value


def _bucket(value: Any) -> str:
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


def _prefix(value: Any) -> str:
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
