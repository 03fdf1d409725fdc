"""The vendor's Uploads API (docs/compat.md): an Upload collects Parts, and completing it
assembles them, in the order the caller names, into one File. Pure rules and records.

Statuses: `pending` (taking parts), `completed` (the File exists), `cancelled`; a pending
upload past `expires_at` reports `expired` and takes nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal, TypedDict

from batchroute.domain.compat.batches import VendorFileView, unix

UploadStatus = Literal["pending", "completed", "cancelled"]
UPLOAD_LIFETIME: Final = timedelta(hours=1)  # the vendor's: an upload expires an hour after creation
MAX_PARTS: Final = 10_000


class UploadView(TypedDict):
    """The vendor's Upload object; `file` the File it made, once completed."""

    id: str
    object: Literal["upload"]
    bytes: int
    created_at: int | None
    expires_at: int | None
    filename: str
    purpose: str
    status: str
    file: VendorFileView | None


class UploadPartView(TypedDict):
    id: str
    object: Literal["upload.part"]
    created_at: int | None
    upload_id: str


@dataclass(frozen=True)
class UploadRecord:
    upload_id: str
    org_id: str
    filename: str
    purpose: str
    mime_type: str
    bytes: int  # declared at creation; the parts must add up to it
    status: UploadStatus
    created_at: str
    expires_at: str
    file_id: str | None = None  # once completed

    def effective_status(self, now: datetime) -> str:
        expires = unix(self.expires_at)
        if self.status == "pending" and expires is not None and now.timestamp() >= expires:
            return "expired"
        return self.status

    def to_api(self, now: datetime, file: VendorFileView | None = None) -> UploadView:
        return {
            "id": self.upload_id,
            "object": "upload",
            "bytes": self.bytes,
            "created_at": unix(self.created_at),
            "expires_at": unix(self.expires_at),
            "filename": self.filename,
            "purpose": self.purpose,
            "status": self.effective_status(now),
            "file": file,
        }


@dataclass(frozen=True)
class UploadPart:
    part_id: str
    upload_id: str
    bytes: int
    created_at: str
    s3_key: str

    def to_api(self) -> UploadPartView:
        return {
            "id": self.part_id,
            "object": "upload.part",
            "created_at": unix(self.created_at),
            "upload_id": self.upload_id,
        }


def part_key(org_id: str, upload_id: str, part_id: str) -> str:
    """Where a part's bytes wait in the uploads bucket: under `staging/`, which the bucket's
    lifecycle rule expires after 2 days, so parts of an abandoned upload leave nothing behind."""
    return f"staging/{org_id}/{upload_id}/{part_id}"
