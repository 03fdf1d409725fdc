"""Request and response models: delivery targets (customer buckets reached through the S3
API) and a batch's delivery to them (docs/delivery-targets.md).

The bodies are checked here, each field by the domain's own rule (`invalid_delivery_target`
with `details.field`); the service adds the SSRF guard's `https_required` / `unsafe_url`.
The secret access key is write-only: no answer carries it, not even sealed.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from batchroute.domain.delivery.targets import (
    ACCESS_KEY_ID_MAX,
    ACCESS_KEY_ID_MIN,
    ENDPOINT_URL_MAX,
    NAME_MAX,
    PREFIX_MAX,
    SECRET_MAX,
    SECRET_MIN,
    CreateTarget,
    UpdateTarget,
    missing_field,
    parse_access_key_id,
    parse_bucket,
    parse_enabled,
    parse_endpoint_url,
    parse_name,
    parse_prefix,
    parse_region,
    parse_secret_access_key,
)
from functions.api.schemas.common import SOME_TEXT, ContractBody, domain_rule, ignored, omittable, read_only

_ENDPOINT = (
    "An S3-compatible service's origin (https, public: private, loopback and metadata hosts "
    "are refused); omit for AWS S3"
)
_REGION = "The AWS region (required without endpoint_url), or the endpoint's signing region"
_BUCKET = (
    "The bucket name (S3 naming rules: 3-63 lowercase letters, digits, dots, hyphens; not an IP "
    "address, no two dots or a dot and a hyphen side by side, no prefix or suffix S3 reserves)"
)
_PREFIX = "A folder in the bucket (no empty, . or .. part); objects land under <prefix>/<batch_id>/"
_SECRET = "Write-only: stored encrypted (KMS), never returned"  # noqa: S105 - a description


PRINTABLE = r"^[!-~]+$"  # printable ASCII, no spaces
Name = Annotated[
    str | None,
    domain_rule(
        parse_name, Annotated[str, Field(min_length=1, max_length=NAME_MAX, pattern=SOME_TEXT)] | None
    ),
]
# an origin: scheme://host[:port], no path, query or fragment (a trailing slash is dropped)
ORIGIN = r"^\s*[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+/*\s*$"
EndpointUrl = Annotated[
    str | None,
    domain_rule(
        parse_endpoint_url, Annotated[str, Field(max_length=ENDPOINT_URL_MAX, pattern=ORIGIN)] | None
    ),
]
Region = Annotated[
    str | None, domain_rule(parse_region, Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,31}$")] | None)
]
Bucket = Annotated[
    str, domain_rule(parse_bucket, Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")])
]
Prefix = Annotated[
    str,
    domain_rule(
        parse_prefix, Annotated[str, Field(max_length=PREFIX_MAX, pattern=r"^[A-Za-z0-9!_.*'()/=-]*$")] | None
    ),
]
AccessKeyId = Annotated[
    str,
    domain_rule(
        parse_access_key_id,
        Annotated[str, Field(min_length=ACCESS_KEY_ID_MIN, max_length=ACCESS_KEY_ID_MAX, pattern=PRINTABLE)],
    ),
]
SecretAccessKey = Annotated[
    str,
    domain_rule(
        parse_secret_access_key,
        Annotated[str, Field(min_length=SECRET_MIN, max_length=SECRET_MAX, pattern=PRINTABLE)],
    ),
]
Enabled = Annotated[bool, domain_rule(parse_enabled, bool)]


class _TargetFields(ContractBody):
    """A target's fields, each checked by the domain's own rule."""

    model_config = ConfigDict(extra="forbid")
    error_code: ClassVar[str] = "invalid_delivery_target"

    name: Name = omittable("A label; the bucket name by default")
    endpoint_url: EndpointUrl = omittable(_ENDPOINT, format="uri")
    region: Region = omittable(_REGION)
    bucket: Bucket = omittable(_BUCKET)
    prefix: Prefix = omittable(_PREFIX)
    access_key_id: AccessKeyId = omittable("The access key id the service writes with")
    secret_access_key: SecretAccessKey = omittable(_SECRET, writeOnly=True)
    enabled: Enabled = omittable("Default true; a disabled target receives nothing")


_REQUIRED = ("bucket", "access_key_id", "secret_access_key")


class DeliveryTargetCreate(_TargetFields):
    """A bucket to push batch artifacts to. Unknown fields are refused."""

    model_config = ConfigDict(json_schema_extra={"required": list(_REQUIRED)})

    def command(self) -> CreateTarget:
        """The new target, with its defaults; a required field left out is refused."""
        for name in _REQUIRED:
            if getattr(self, name) is None:
                raise missing_field(name)
        # a field left out (None: no field takes null but the defaulted ones) keeps its default
        given = {f.name: getattr(self, f.name) for f in fields(CreateTarget)}
        return CreateTarget(**{name: value for name, value in given.items() if value is not None})


class DeliveryTargetUpdate(_TargetFields):
    """Fields to change: only those given change. A new secret_access_key comes with its
    access_key_id. Unknown fields are refused; the read-only fields of a GET are ignored."""

    name: Name = omittable("A label; null: the bucket name")
    access_key_id: AccessKeyId = omittable("Replaced together with secret_access_key")
    enabled: Enabled = omittable("false stops deliveries to this target")
    id: Annotated[Any, ignored(str)] = read_only()
    object: Annotated[Any, ignored(str)] = read_only()
    access_key_id_last4: Annotated[Any, ignored(str)] = read_only()
    secret_access_key_set: Annotated[Any, ignored(bool)] = read_only()
    created_at: Annotated[Any, ignored(str)] = read_only()
    updated_at: Annotated[Any, ignored(str)] = read_only()
    last_test: Annotated[Any, ignored(dict[str, Any] | None)] = read_only()

    def command(self) -> UpdateTarget:
        """The fields given (not the read-only ones sent back), and only those."""
        given = self.given()
        return UpdateTarget(given=frozenset(given), **given)


class BucketErrorOut(BaseModel):
    code: str = Field(description="The bucket's own code (AccessDenied, NoSuchBucket, ...) or ours")
    message: str


class TargetTestOut(BaseModel):
    """The outcome of writing a sample object: 200 either way; `ok` says which."""

    target_id: str
    bucket: str
    ok: bool
    at: str
    key: str = Field(description="The sample object's key: <prefix>/batchroute-test-<time>.json")
    error: BucketErrorOut | None


class LastTestOut(BaseModel):
    ok: bool
    at: str
    key: str
    error: BucketErrorOut | None


class DeliveryTargetOut(BaseModel):
    id: str = Field(description="dt_<ulid>")
    object: Literal["delivery_target"]
    name: str
    endpoint_url: str | None
    region: str | None
    bucket: str
    prefix: str
    enabled: bool
    access_key_id_last4: str = Field(description="The last four characters of the access key id")
    secret_access_key_set: bool = Field(description="A secret is stored (it is never shown)")
    created_at: str
    updated_at: str
    last_test: LastTestOut | None


class DeliveryTargetList(BaseModel):
    object: Literal["list"]
    data: list[DeliveryTargetOut]
    limit: int = Field(description="How many targets an organization may register")


class DeliveryTargetDeleted(BaseModel):
    id: str
    object: Literal["delivery_target"]
    deleted: Literal[True]


class DeliveryErrorOut(BaseModel):
    code: str
    message: str
    target_id: str | None


class TargetDeliveryOut(BaseModel):
    target_id: str
    name: str
    bucket: str
    prefix: str
    state: Literal["pending", "delivered", "failed"]
    last_error: DeliveryErrorOut | None
    delivered_at: str | None
    objects: list[str] = Field(description="Keys written in the target's bucket")
    bytes_delivered: int


class BucketDeliveryOut(BaseModel):
    """A batch's delivery to the org's buckets."""

    state: Literal["pending", "delivering", "delivered", "failed"]
    attempts: int
    max_attempts: int = Field(description="Attempts the current round may make before it stops")
    last_error: DeliveryErrorOut | None
    last_attempt_at: str | None
    next_attempt_at: str | None = Field(description="When a failed delivery is retried; null: not retried")
    delivered_at: str | None
    redeliveries: int
    created_at: str | None
    targets: list[TargetDeliveryOut]


class RedeliveryOut(BaseModel):
    batch_id: str
    delivery: BucketDeliveryOut
