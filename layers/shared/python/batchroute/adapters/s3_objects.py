"""S3 objects of one bucket, streamed: chunked reads, buffered part-by-part writes, signed URLs.

Nothing here holds a whole object: reads yield chunks of the response body, and a writer
keeps at most one multipart part (8 MiB) before sending it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from functools import cache
from typing import Any, Protocol, TypeVar

from botocore.config import Config

from batchroute.adapters.aws import GivenOrShared, new_client, shared_client
from batchroute.config import get_settings
from batchroute.domain.batches.files import CompletedPart, PartsRefused

PART_BYTES = 8 * 1024 * 1024  # S3 parts must be >= 5 MiB, except the last
READ_CHUNK_BYTES = 256 * 1024
# What S3 answers when the part list of a complete call does not match what was uploaded.
_REFUSED_PARTS = frozenset({"InvalidPart", "InvalidPartOrder", "EntityTooSmall", "NoSuchUpload"})


@cache
def presigning_client() -> Any:
    """An S3 client for signed URLs only: SigV4 (S3 refuses SigV2 on new buckets) and, locally,
    path-style URLs on the moto endpoint, so `curl -T file "<url>"` reaches it. Signing is
    local: this client never calls AWS."""
    settings = get_settings()
    style = "path" if settings.aws_endpoint_url else "virtual"
    return new_client(
        "s3",
        region_name=settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=Config(signature_version="s3v4", s3={"addressing_style": style}),
    )


def _is_missing(exc: Exception) -> bool:
    response = getattr(exc, "response", None) or {}
    return response.get("Error", {}).get("Code") in {"404", "NoSuchKey", "NotFound"}


_Value = TypeVar("_Value", contravariant=True)


class Sink(Protocol[_Value]):
    """A write that commits on `close()` and is discarded by `abort()`."""

    def write(self, value: _Value, /) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


def write_whole(sink: Sink[_Value], values: Iterable[_Value]) -> None:
    """Write every value and commit; whatever is raised on the way discards the write first."""
    try:
        for value in values:
            sink.write(value)
        sink.close()
    except BaseException:
        sink.abort()
        raise


@dataclass(eq=False)
class ObjectWriter:
    """Writes one object from a stream of chunks: a single `put_object` while the bytes fit in
    one part, a multipart upload once they outgrow it. `close()` commits, `abort()` discards."""

    s3: Any
    bucket: str
    key: str
    _: KW_ONLY
    content_type: str
    part_bytes: int = PART_BYTES
    bytes_written: int = field(default=0, init=False)
    _buffer: bytearray = field(default_factory=bytearray, init=False)
    _upload_id: str | None = field(default=None, init=False)
    _parts: list[dict[str, Any]] = field(default_factory=list, init=False)

    def write(self, data: bytes) -> None:
        self._buffer += data
        self.bytes_written += len(data)
        while len(self._buffer) >= self.part_bytes:
            part = bytes(self._buffer[: self.part_bytes])
            del self._buffer[: self.part_bytes]
            self._send_part(part)

    def close(self) -> None:
        if self._upload_id is None:
            self.s3.put_object(
                Bucket=self.bucket, Key=self.key, Body=bytes(self._buffer), ContentType=self.content_type
            )
        else:
            if self._buffer:
                self._send_part(bytes(self._buffer))
            self.s3.complete_multipart_upload(
                Bucket=self.bucket,
                Key=self.key,
                UploadId=self._upload_id,
                MultipartUpload={"Parts": self._parts},
            )
        self._buffer.clear()

    def abort(self) -> None:
        """Discard what was sent; the bucket's abort-multipart rule is the backstop."""
        self._buffer.clear()
        if self._upload_id is not None:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self._upload_id)
            self._upload_id = None

    def _send_part(self, part: bytes) -> None:
        if self._upload_id is None:
            started = self.s3.create_multipart_upload(
                Bucket=self.bucket, Key=self.key, ContentType=self.content_type
            )
            self._upload_id = str(started["UploadId"])
        number = len(self._parts) + 1
        sent = self.s3.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self._upload_id, PartNumber=number, Body=part
        )
        self._parts.append({"PartNumber": number, "ETag": sent["ETag"]})


@dataclass(eq=False, repr=False)
class S3Objects:
    bucket: str
    s3: Any = shared_client("s3")
    presigner: Any = GivenOrShared(presigning_client)

    def writer(self, key: str, *, content_type: str, part_bytes: int = PART_BYTES) -> ObjectWriter:
        return ObjectWriter(self.s3, self.bucket, key, content_type=content_type, part_bytes=part_bytes)

    def size(self, key: str) -> int | None:
        """The object's size in bytes, or None when there is no such object."""
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise
        return int(head["ContentLength"])

    def chunks(
        self, key: str, *, chunk_bytes: int = READ_CHUNK_BYTES, start: int = 0, missing_ok: bool = False
    ) -> Iterator[bytes]:
        """The object's bytes in order from byte `start`, `chunk_bytes` at a time, straight from
        the response body (a ranged GET when `start` > 0). With `missing_ok`, a missing object
        has no bytes: one GET, where asking `size` first would be two requests."""
        extra = {"Range": f"bytes={start}-"} if start > 0 else {}
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key, **extra)["Body"]
        except Exception as exc:
            if missing_ok and _is_missing(exc):
                return
            raise
        try:
            yield from body.iter_chunks(chunk_size=chunk_bytes)
        finally:
            body.close()

    def presigned_put(self, key: str, *, content_type: str, expires_in: int) -> str:
        """A URL that lets its holder PUT this one key (with this Content-Type) until it expires.

        Locally the cached client points at the moto server, so the URL does too."""
        presigner = self.presigner
        url: str = presigner.generate_presigned_url(
            "put_object",
            Params={"Bucket": self.bucket, "Key": key, "ContentType": content_type},
            ExpiresIn=expires_in,
            HttpMethod="PUT",
        )
        return url

    def presigned_part(self, key: str, upload_id: str, number: int, *, expires_in: int) -> str:
        """A URL that lets its holder PUT part `number` of one multipart upload until it expires."""
        presigner = self.presigner
        url: str = presigner.generate_presigned_url(
            "upload_part",
            Params={"Bucket": self.bucket, "Key": key, "UploadId": upload_id, "PartNumber": number},
            ExpiresIn=expires_in,
            HttpMethod="PUT",
        )
        return url

    def presigned_read(self, key: str, *, expires_in: int) -> str:
        """A URL that lets its holder GET this one key, as it is stored, until it expires."""
        presigner = self.presigner
        url: str = presigner.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": key}, ExpiresIn=expires_in
        )
        return url

    def presigned_get(self, key: str, *, expires_in: int, filename: str, content_type: str) -> str:
        """A URL that lets its holder GET this one key until it expires, answered with the
        given file name (Content-Disposition) and type: S3 serves the bytes, not the API."""
        presigner = self.presigner
        safe_name = "".join(ch for ch in filename if ch.isalnum() or ch in "._-")[:128] or "file"
        url: str = presigner.generate_presigned_url(
            "get_object",
            Params={
                "Bucket": self.bucket,
                "Key": key,
                "ResponseContentDisposition": f'attachment; filename="{safe_name}"',
                "ResponseContentType": content_type,
            },
            ExpiresIn=expires_in,
            HttpMethod="GET",
        )
        return url

    def copy(self, source_key: str, target_key: str) -> None:
        """Server-side copy (single request: objects up to 5 GB)."""
        self.s3.copy_object(
            Bucket=self.bucket, Key=target_key, CopySource={"Bucket": self.bucket, "Key": source_key}
        )

    def delete(self, key: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=key)

    def put(self, key: str, body: bytes, *, content_type: str) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type)

    # -- a multipart upload that outlives one invocation (chunked Finalize) -----------------------
    def start_multipart(self, key: str, *, content_type: str) -> str:
        started = self.s3.create_multipart_upload(Bucket=self.bucket, Key=key, ContentType=content_type)
        return str(started["UploadId"])

    def upload_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        """Send part `number` (re-sending the same number replaces it); its ETag."""
        sent = self.s3.upload_part(
            Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body
        )
        return str(sent["ETag"])

    def complete_multipart(self, key: str, upload_id: str, parts: list[CompletedPart]) -> None:
        """Join the parts into the object; PartsRefused when S3 refuses the part list."""
        try:
            self.s3.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except Exception as exc:
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
            if code in _REFUSED_PARTS:
                raise PartsRefused(str(code)) from exc
            raise

    def abort_multipart(self, key: str, upload_id: str) -> None:
        """Discard an upload; one already completed or aborted is not an error."""
        try:
            self.s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except Exception as exc:
            code = (getattr(exc, "response", None) or {}).get("Error", {}).get("Code")
            if code != "NoSuchUpload":
                raise

    def keys(self, prefix: str) -> Iterator[str]:
        """Every key under `prefix`, a listing page (1,000 keys) at a time."""
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
            for entry in page.get("Contents", []):
                yield str(entry["Key"])

    def delete_many(self, keys: list[str]) -> None:
        """Delete up to 1,000 keys in one request; a key already gone is not an error."""
        if not keys:
            return
        answer = self.s3.delete_objects(
            Bucket=self.bucket, Delete={"Objects": [{"Key": key} for key in keys], "Quiet": True}
        )
        failed = answer.get("Errors") or []
        if failed:
            raise RuntimeError(f"S3 refused to delete {len(failed)} object(s): {failed[0].get('Code')}")
