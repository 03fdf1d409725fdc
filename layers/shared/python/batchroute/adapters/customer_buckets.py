"""A customer's bucket through the S3 API, with the customer's own credentials
(docs/delivery-targets.md).

One short-lived client per target and attempt: the target's endpoint (path-style
addressing and checksums only where required, which every S3-compatible service accepts;
every request pinned to an address the SSRF guard checked, adapters/pinned_s3.py) or AWS S3
in its region; short time-outs, a deadline per request, two tries, no credentials from the
environment. A customer endpoint's answers are read in small bounded amounts (1 MiB for a
control answer, a read's own limit for an object) and never past the request's deadline.
Uploads stream from a file-like source through boto3's transfer manager, so a large
artifact goes up in 8 MiB multipart parts without being held in memory.

Every failure becomes `BucketRefused(code, message)`: the bucket's own error code
(`AccessDenied`, `NoSuchBucket`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, ...) or
`endpoint_unreachable` / `timeout` / `response_too_large` / `object_too_large`. Messages come
from the service's answer, which never holds the secret; the secret itself is only an
argument here and is never logged.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from typing import Any, BinaryIO

from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from batchroute.adapters.aws import new_client
from batchroute.adapters.pinned_s3 import PinnedSender
from batchroute.adapters.s3_objects import S3Objects
from batchroute.domain.delivery.network import UrlGuard
from batchroute.domain.delivery.targets import BucketRefused, DeliveryTarget, Readable

PART_BYTES = 8 * 1024 * 1024
DEFAULT_SIGNING_REGION = "us-east-1"
_TRANSFER = TransferConfig(
    multipart_threshold=PART_BYTES, multipart_chunksize=PART_BYTES, max_concurrency=4, use_threads=True
)


@dataclass(eq=False)
class CustomerBucket:
    target: DeliveryTarget
    s3: Any

    def put(self, key: str, body: bytes, *, content_type: str) -> None:
        try:
            self.s3.put_object(Bucket=self.target.bucket, Key=key, Body=body, ContentType=content_type)
        except Exception as exc:
            raise refusal(exc) from None

    def upload(self, key: str, source: Readable, *, content_type: str) -> None:
        """Stream `source` to `key` (multipart above PART_BYTES)."""
        try:
            self.s3.upload_fileobj(
                source,
                self.target.bucket,
                key,
                ExtraArgs={"ContentType": content_type},
                Config=_TRANSFER,
            )
        except Exception as exc:
            raise refusal(exc) from None

    # -- reads: a schedule's input files under a prefix (docs/schedules.md) ----------------
    def keys(self, prefix: str, *, limit: int) -> list[str]:
        """Object keys under `prefix`, in key order, at most `limit`."""
        found: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": self.target.bucket, "Prefix": prefix}
        try:
            while len(found) < limit:
                page = self.s3.list_objects_v2(**kwargs, MaxKeys=min(1000, limit - len(found)))
                found.extend(str(o["Key"]) for o in page.get("Contents", []) if not o["Key"].endswith("/"))
                if not page.get("IsTruncated"):
                    break
                kwargs["ContinuationToken"] = page["NextContinuationToken"]
        except Exception as exc:
            raise refusal(exc) from None
        return found[:limit]

    def read(self, key: str, *, max_bytes: int) -> bytes:
        """One object's bytes; BucketRefused `object_too_large` past `max_bytes`. At most
        `max_bytes + 1` bytes (and one network chunk) are taken off the wire, whatever the
        object's size: the body streams and is closed once read."""
        too_large = BucketRefused("object_too_large", f"{key} is larger than {max_bytes} bytes")
        try:
            response = self.s3.get_object(Bucket=self.target.bucket, Key=key)
        except Exception as exc:
            raise refusal(exc) from None
        stream = response["Body"]
        try:
            if int(response.get("ContentLength") or 0) > max_bytes:
                raise too_large
            body: bytes = stream.read(max_bytes + 1)
        except BucketRefused:
            raise
        except Exception as exc:
            raise refusal(exc) from None
        finally:
            stream.close()
        if len(body) > max_bytes:
            raise too_large
        return body


@dataclass(eq=False)
class CustomerBuckets:
    """Opens a target's bucket with its (unsealed) secret."""

    guard: UrlGuard = field(default_factory=UrlGuard)
    _: KW_ONLY
    connect_timeout: float = 5
    read_timeout: float = 30
    # Each request to a customer endpoint (connect, upload, answer) ends within this many
    # seconds, plus at most one read time-out (adapters/pinned_s3.py), and is not tried again
    # once cut off: a read time-out's try (30 s) and a second try to the deadline (45 + 30 s)
    # stay inside the deliver worker's 120 s; an 8 MiB part needs ~190 KB/s to make it.
    deadline_seconds: float = 45
    max_attempts: int = 2

    def for_probes(self) -> CustomerBuckets:
        """For `POST /v1/delivery-targets/{id}/test`: one try, short time-outs and a 10 s
        deadline (so at most 10 + 10 s on the wire), so the answer comes well inside API
        Gateway's 29 seconds even from an endpoint that hangs or drips."""
        return CustomerBuckets(
            self.guard, connect_timeout=3, read_timeout=10, deadline_seconds=10, max_attempts=1
        )

    def open(self, target: DeliveryTarget, secret_access_key: str) -> CustomerBucket:
        custom = target.endpoint_url is not None
        config = Config(
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            # botocore's `max_attempts` counts retries only; `total_max_attempts` counts tries.
            retries={"mode": "standard", "total_max_attempts": self.max_attempts},
            s3={"addressing_style": "path" if custom else "virtual"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            # A target without an endpoint is the customer's bucket at AWS: never where the
            # service's own clients are pointed (AWS_ENDPOINT_URL: local mode's moto, where
            # no customer key is checked and every org's objects are)
            ignore_configured_endpoint_urls=True,
        )
        s3 = new_client(
            "s3",
            region_name=target.region or DEFAULT_SIGNING_REGION,
            endpoint_url=target.endpoint_url,
            aws_access_key_id=target.access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=None,
            config=config,
        )
        if custom:  # connect only to addresses the SSRF guard checked (adapters/pinned_s3.py)
            s3.meta.events.register_first(
                "before-send.s3",
                PinnedSender(
                    self.guard,
                    connect_timeout=self.connect_timeout,
                    read_timeout=self.read_timeout,
                    deadline_seconds=self.deadline_seconds,
                ),
            )
        return CustomerBucket(target, s3)


def refusal(exc: Exception) -> BucketRefused:
    """A boto3 failure as the code and message the customer sees."""
    if isinstance(exc, BucketRefused):
        return exc
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(error.get("Code") or status or "bucket_error")
        message = str(error.get("Message") or f"the bucket answered HTTP {status}")
        return BucketRefused(code, message)
    if isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
        return BucketRefused("timeout", "the bucket's endpoint did not answer in time")
    if isinstance(exc, EndpointConnectionError):
        return BucketRefused("endpoint_unreachable", "could not connect to the bucket's endpoint")
    if isinstance(exc, BotoCoreError):
        return BucketRefused("bucket_error", type(exc).__name__)
    # boto3's transfer manager wraps failures (S3UploadFailedError) with the ClientError's text.
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ClientError | BotoCoreError | BucketRefused):
        return refusal(cause)
    text = str(exc)
    for code in ("AccessDenied", "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        if code in text:
            return BucketRefused(code, text)
    return BucketRefused("bucket_error", type(exc).__name__)


@dataclass(eq=False)
class ArtifactSource:
    """The batch's artifacts in our bucket, opened as streams for the upload."""

    objects: S3Objects

    def open(self, key: str) -> BinaryIO | None:
        """The object's body as a stream, or None when there is no such object."""
        try:
            body: BinaryIO = self.objects.s3.get_object(Bucket=self.objects.bucket, Key=key)["Body"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}:
                return None
            raise
        return body
