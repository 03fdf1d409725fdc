"""Request and response models of the vendor-compatible surface under /v1/compat/v1
(docs/compat.md): the vendor's File, Upload, Upload part and Batch objects, and their bodies."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from batchroute.domain.compat.expiration import ANCHOR, MAX_SECONDS, MIN_SECONDS


class VendorFile(BaseModel):
    id: str
    object: Literal["file"]
    bytes: int
    created_at: int | None
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error", "expired"]
    status_details: str | None
    expires_at: int | None


class VendorFileList(BaseModel):
    object: Literal["list"]
    data: list[VendorFile]
    first_id: str | None
    last_id: str | None
    has_more: bool


class VendorFileDeleted(BaseModel):
    id: str
    object: Literal["file"]
    deleted: bool


class VendorUpload(BaseModel):
    id: str
    object: Literal["upload"]
    bytes: int
    created_at: int | None
    expires_at: int | None
    filename: str
    purpose: str
    status: Literal["pending", "completed", "cancelled", "expired"]
    file: VendorFile | None


class VendorUploadPart(BaseModel):
    id: str
    object: Literal["upload.part"]
    created_at: int | None
    upload_id: str


# The vendor's expiration policy: taken as any object, so that one rule
# (domain/compat/expiration.py) checks it on every route, the multipart upload's too.
EXPIRATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Not supported: checked, then refused (docs/compat.md, Retention)",
    "properties": {
        "anchor": {"type": "string", "enum": [ANCHOR]},
        "seconds": {"type": "integer", "minimum": MIN_SECONDS, "maximum": MAX_SECONDS},
    },
    "required": ["anchor", "seconds"],
}
ExpiresAfter = Annotated[dict[str, Any] | None, WithJsonSchema(EXPIRATION_SCHEMA)]


class UploadCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    bytes: int = Field(ge=1)
    filename: str = Field(min_length=1, max_length=255)
    mime_type: str = Field(min_length=1, max_length=255)
    purpose: str = Field(min_length=1, max_length=64)
    expires_after: ExpiresAfter = None


class UploadComplete(BaseModel):
    model_config = ConfigDict(extra="forbid")

    part_ids: list[str] = Field(min_length=1)
    md5: str | None = Field(default=None, max_length=64)


def multipart_body(description: str, fields: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A multipart/form-data request body for `openapi_extra`: the routes stream these bodies
    themselves, so FastAPI cannot infer them."""
    schema = {"type": "object", "required": required, "properties": fields}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"multipart/form-data": {"schema": schema}},
        }
    }


class VendorBatchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_file_id: str = Field(min_length=1, max_length=64)
    endpoint: str = Field(description="/v1/chat/completions, /v1/responses or /v1/embeddings")
    completion_window: str = Field(description="24h")
    body_format: Literal["normalized", "raw"] | None = Field(
        default=None, description="default body format of the output file (normalized)"
    )
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = None
    output_expires_after: ExpiresAfter = None


class RequestCounts(BaseModel):
    total: int
    completed: int
    failed: int


class InputTokensDetails(BaseModel):
    cached_tokens: int


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int


class VendorBatchUsage(BaseModel):
    """The tokens of the answers delivered, once the batch's files are written."""

    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class VendorBatch(BaseModel):
    id: str
    object: Literal["batch"]
    endpoint: str | None
    model: str | None = Field(description="The one model the requests name; null when they name several")
    input_file_id: str | None
    completion_window: str
    status: Literal[
        "validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"
    ]
    output_file_id: str | None
    error_file_id: str | None
    errors: dict[str, Any] | None
    created_at: int | None
    in_progress_at: int | None
    expires_at: int | None
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: RequestCounts
    usage: VendorBatchUsage | None = Field(description="null until the output and error files are written")
    metadata: dict[str, str] | None
    body_format: Literal["normalized", "raw"]


class VendorBatchList(BaseModel):
    object: Literal["list"]
    data: list[VendorBatch]
    first_id: str | None
    last_id: str | None
    has_more: bool
