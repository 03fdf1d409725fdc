"""Request and response models: model-input files, uploaded directly (multipart or raw
JSONL) or through a signed URL confirmed by a second call (docs/files.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class LineIssueOut(BaseModel):
    line: int
    code: str
    message: str


class FileOut(BaseModel):
    id: str
    object: Literal["file"]
    filename: str
    purpose: Literal["batch_input", "batch"]
    content_type: str
    bytes: int
    status: Literal["uploading", "uploaded", "processed", "error", "expired"]
    created_at: str
    line_count: int
    item_count: int
    error_count: int
    errors: list[LineIssueOut] = Field(description="the first 100 malformed lines")
    error: dict[str, str] | None = Field(description="why the file is unusable: {code, message}")
    sha256: str | None


class FileEnvelope(BaseModel):
    file: FileOut


class UploadTarget(BaseModel):
    url: str
    method: Literal["PUT"]
    headers: dict[str, str] = Field(description="send exactly these headers with the PUT")
    expires_at: str


class PartTarget(BaseModel):
    part_number: int
    url: str = Field(description="a signed S3 UploadPart URL: PUT this part's bytes to it")
    offset: int = Field(description="where the part starts in the file")
    bytes: int = Field(description="the part's size (every part but the last holds part_bytes)")


class MultipartPlanOut(BaseModel):
    method: Literal["PUT"]
    part_bytes: int
    part_count: int
    parts: list[PartTarget]
    expires_at: str = Field(description="when these part URLs stop working (fresh ones: POST .../parts)")


class SignedUploadOut(BaseModel):
    file: FileOut
    upload: UploadTarget = Field(description="one PUT of the whole file (up to 5 GB)")
    multipart: MultipartPlanOut | None = Field(
        default=None,
        description="above the multipart threshold (64 MiB): the parts to PUT instead, then "
        "complete with their part numbers and ETags",
    )


class PlanEnvelope(BaseModel):
    multipart: MultipartPlanOut


class PartsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    part_numbers: list[int] | None = Field(
        default=None, max_length=10_000, description="the parts to sign again; all by default"
    )


class UploadedPartIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    part_number: int = Field(ge=1, le=10_000)
    etag: str = Field(min_length=1, max_length=200, description="the ETag header the part's PUT answered")


class CompleteUpload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    parts: list[UploadedPartIn] | None = Field(
        default=None,
        max_length=10_000,
        description="a multipart upload's parts, in order; absent for one PUT",
    )


class UploadStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    filename: str = Field(min_length=1, max_length=255)
    bytes: int = Field(ge=1, description="the exact size of the file that will be PUT")
    content_type: str | None = Field(default=None, max_length=255, description="default application/jsonl")
    purpose: Literal["batch_input", "batch"] | None = None


# The direct upload's body: read as a stream by the route, so documented by hand.
DIRECT_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "the JSONL file"},
                        "purpose": {"enum": ["batch_input", "batch"], "default": "batch_input"},
                    },
                }
            },
            "application/jsonl": {
                "schema": {
                    "type": "string",
                    "format": "binary",
                    "description": "raw JSONL (also application/x-ndjson); filename from Content-Disposition",
                },
            },
        },
    }
}
