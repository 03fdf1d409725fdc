"""The vendor-compatible surface's files and uploads under /v1/compat/v1 (docs/compat.md):
upload a batch input file, list the files, read a File object and its content (inputs, and
the output and error files of batches), delete a file, and the Uploads API for files larger
than one request."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool

from batchroute.domain.accounts.access import Principal
from batchroute.domain.compat.batches import (
    BodyFormat,
    VendorFileDeletedView,
    VendorFileListView,
    VendorFileView,
)
from batchroute.domain.compat.expiration import refuse_expiration
from batchroute.domain.compat.uploads import UploadView
from batchroute.errors import InvalidRequest
from batchroute.ids import new_id
from batchroute.services.batches.files import UploadTooLarge, too_large
from batchroute.services.compat.files import COMPAT_PURPOSE, CompatUpload, input_file_object
from functions.api.auth import require
from functions.api.compat_envelope import COMPAT_ERRORS, compat_errors_doc
from functions.api.deps import CompatFilesDep, CompatUploadsDep
from functions.api.schemas.compat.compat import (
    UploadComplete,
    UploadCreate,
    VendorFile,
    VendorFileDeleted,
    VendorFileList,
    VendorUpload,
    VendorUploadPart,
    multipart_body,
)
from functions.api.streaming import StreamingForm, body_chunks, form_boundary

router = APIRouter(prefix="/v1/compat/v1", tags=["vendor-compatible"], responses=COMPAT_ERRORS)

BODY_FORMAT_HEADER = "x-service-body-format"
FORM_SLACK_BYTES = 16 * 1024  # multipart boundaries and part headers around an upload part


Creator = Annotated[Principal, Depends(require("batches:create"))]
Reader = Annotated[Principal, Depends(require("batches:read"))]


# -- files ---------------------------------------------------------------------------------------
@router.post(
    "/files",
    response_model=VendorFile,
    summary="Upload a batch input file (JSONL of {custom_id, method, url, body} requests)",
    openapi_extra=multipart_body(
        "The JSONL file and purpose `batch`; every row is checked, and a bad row is refused naming its line",
        {
            "file": {"type": "string", "format": "binary"},
            "purpose": {"enum": ["batch"]},
        },
        ["file", "purpose"],
    ),
)
async def upload_file(request: Request, principal: Creator, files: CompatFilesDep) -> Any:
    limit = files.files.limits.max_direct_upload_bytes
    declared = request.headers.get("content-length", "")
    form = StreamingForm[CompatUpload](
        form_boundary(request),
        lambda filename, kind: files.begin_upload(principal, filename=filename, content_type=kind),
        text_fields=EXPIRATION_FIELDS,
    )
    try:
        if declared.isdecimal() and int(declared) > limit:
            raise UploadTooLarge(
                f"A request may carry at most {limit} bytes; upload larger files with the Uploads API "
                "(POST /v1/compat/v1/uploads, or client.uploads.upload_file_chunked).",
                details={"max_bytes": limit, "param": "file"},
            )
        async for chunk in body_chunks(request, limit, refuse=_file_too_large):
            await run_in_threadpool(form.write, chunk)
        upload = form.finish()
        if form.purpose != COMPAT_PURPOSE:
            raise InvalidRequest(
                "purpose must be batch.", code="invalid_purpose", details={"param": "purpose"}
            )
        refuse_expiration(_expires_after(form.fields), "expires_after")
        record = await run_in_threadpool(upload.finish)
    except BaseException:  # 413 included: the global handler answers it in the vendor's shape
        if form.upload is not None:
            await run_in_threadpool(form.upload.abort)
        raise
    return input_file_object(record)


@router.get(
    "/files",
    response_model=VendorFileList,
    summary="The org's files of purpose batch and its batches' output and error files, by id",
)
def list_files(
    principal: Reader,
    files: CompatFilesDep,
    after: Annotated[str | None, Query(description="A file id: the page starts after it")] = None,
    limit: Annotated[
        int, Query(ge=1, le=10000, description="At most this many files (a page holds at most 100)")
    ] = 10000,
    order: Annotated[Literal["asc", "desc"], Query(description="By id, that is by creation")] = "desc",
    purpose: Annotated[str | None, Query(description="batch or batch_output; another lists none")] = None,
) -> VendorFileListView:
    return files.list(principal, after=after, limit=limit, descending=order == "desc", purpose=purpose)


@router.get("/files/{file_id}", response_model=VendorFile, summary="A File object (`expired` once reclaimed)")
def get_file(file_id: str, principal: Reader, files: CompatFilesDep) -> VendorFileView:
    return files.file_object(principal, file_id)


@router.delete(
    "/files/{file_id}",
    response_model=VendorFileDeleted,
    responses=compat_errors_doc(
        {
            409: "A native batch over the file has not read it yet (`file_in_use`), or its upload "
            "is not complete (`file_not_ready`)"
        }
    ),
    summary="Delete a file: 404 from then on; its bytes go (docs/compat.md, Deleting files)",
)
def delete_file(file_id: str, principal: Creator, files: CompatFilesDep) -> VendorFileDeletedView:
    return files.delete(principal, file_id)


@router.get(
    "/files/{file_id}/content",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/jsonl": {}}, "description": "The file's bytes"},
        307: {
            "description": "A large file: `Location` is a signed URL, valid a few minutes, from "
            "which storage serves the bytes (an output or error file's rendered in the body format "
            "`x-service-body-format` names)",
            "headers": {"Location": {"schema": {"type": "string", "format": "uri"}}},
        },
        **compat_errors_doc({409: "The file's upload has not been completed (`file_not_ready`)"}),
        410: {"description": "The bytes were reclaimed by retention"},
    },
    summary="A file's bytes; output and error files in the body format asked for",
)
def file_content(
    file_id: str,
    principal: Reader,
    files: CompatFilesDep,
    body_format: Annotated[BodyFormat | None, Query(description="normalized (default) or raw")] = None,
) -> Response:
    # Never buffered whole: a large file is served by storage, the rest is streamed (on AWS
    # through the streaming function: docs/chat.md, "On AWS").
    content = files.content(principal, file_id, body_format)
    headers = {BODY_FORMAT_HEADER: content.body_format} if content.body_format else {}
    if content.url is not None:
        return RedirectResponse(
            content.url, status_code=307, headers={**headers, "cache-control": "no-store"}
        )
    assert content.chunks is not None
    return StreamingResponse(
        iterate_in_threadpool(content.chunks), media_type="application/jsonl", headers=headers
    )


# -- uploads -------------------------------------------------------------------------------------
_NOT_PENDING = compat_errors_doc(
    {409: "The upload is completed, cancelled or expired: it takes no more parts (`upload_not_pending`)"}
)
_SETTLING = compat_errors_doc(
    {
        409: "The upload is completed, cancelled or expired (`upload_not_pending`), or another call "
        "is completing it (`concurrent_update`: retry shortly)"
    }
)


@router.post("/uploads", response_model=VendorUpload, summary="Start an upload that takes parts")
def create_upload(body: UploadCreate, principal: Creator, uploads: CompatUploadsDep) -> UploadView:
    return uploads.create(
        principal,
        filename=body.filename,
        purpose=body.purpose,
        bytes_=body.bytes,
        mime_type=body.mime_type,
        expires_after=body.expires_after,
    )


@router.post(
    "/uploads/{upload_id}/parts",
    response_model=VendorUploadPart,
    responses=_NOT_PENDING,
    summary="Add a part (at most one request's worth of bytes)",
    openapi_extra=multipart_body(
        "The part's bytes", {"data": {"type": "string", "format": "binary"}}, ["data"]
    ),
)
async def add_part(request: Request, upload_id: str, principal: Creator, uploads: CompatUploadsDep) -> Any:
    record = await run_in_threadpool(uploads.open_for_parts, principal, upload_id)
    limit = uploads.files.files.limits.max_direct_upload_bytes
    part_id = new_id("part", uploads.clock.now())
    writer = uploads.part_writer(record, part_id)
    form = StreamingForm(form_boundary(request), lambda _name, _kind: writer, file_field=b"data")
    try:
        # The limit is on the part's bytes; the form around them may add a little.
        async for chunk in body_chunks(
            request, limit + FORM_SLACK_BYTES, refuse=lambda _: _part_too_large(limit)
        ):
            await run_in_threadpool(form.write, chunk)
        form.finish()
        if writer.bytes_written > limit:
            raise _part_too_large(limit)
        await run_in_threadpool(writer.close)
    except BaseException:
        await run_in_threadpool(writer.abort)
        raise
    return await run_in_threadpool(
        lambda: uploads.add_part(record, part_id=part_id, size=writer.bytes_written)
    )


# The SDK sends `expires_after` as the form fields `expires_after[anchor]`, `expires_after[seconds]`.
EXPIRATION_FIELDS = (b"expires_after", b"expires_after[anchor]", b"expires_after[seconds]")


def _expires_after(fields: dict[str, str]) -> object:
    """The form's `expires_after` as the JSON routes take it (None when absent)."""
    if "expires_after" in fields:
        return fields["expires_after"]  # not an object: refused naming the field
    policy: dict[str, object] = {}
    for name in ("anchor", "seconds"):
        value = fields.get(f"expires_after[{name}]")
        if value is not None:
            policy[name] = int(value) if name == "seconds" and value.isdecimal() else value
    return policy or None


def _file_too_large(limit: int) -> UploadTooLarge:
    refusal = too_large(limit)
    return UploadTooLarge(refusal.message, details={**(refusal.details or {}), "param": "file"})


def _part_too_large(limit: int) -> UploadTooLarge:
    return UploadTooLarge(
        f"A part may hold at most {limit} bytes: pass part_size={limit} (or less) to upload_file_chunked.",
        details={"max_bytes": limit, "param": "data"},
    )


@router.post(
    "/uploads/{upload_id}/complete",
    response_model=VendorUpload,
    responses=_SETTLING,
    summary="Assemble the parts into a File",
)
def complete_upload(
    upload_id: str, body: UploadComplete, principal: Creator, uploads: CompatUploadsDep
) -> UploadView:
    return uploads.complete(principal, upload_id, part_ids=body.part_ids, md5=body.md5)


@router.post(
    "/uploads/{upload_id}/cancel",
    response_model=VendorUpload,
    responses=_SETTLING,
    summary="Cancel an upload",
)
def cancel_upload(upload_id: str, principal: Creator, uploads: CompatUploadsDep) -> UploadView:
    return uploads.cancel(principal, upload_id)
