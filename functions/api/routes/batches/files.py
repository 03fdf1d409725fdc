"""Files: direct uploads (multipart or raw JSONL, streamed), signed-URL uploads confirmed by a
second call, and reads. The rules live in batchroute.services.batches.files; docs/files.md."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from python_multipart.multipart import parse_options_header
from starlette.concurrency import run_in_threadpool

from batchroute.domain.accounts.access import Principal
from batchroute.domain.batches.files import media_type
from batchroute.services.batches.files import FileService, SignedUploadView, UploadedPart, too_large
from functions.api.auth import require
from functions.api.deps import FilesDep
from functions.api.envelope import errors_doc
from functions.api.schemas.batches.files import (
    DIRECT_UPLOAD_BODY,
    CompleteUpload,
    FileEnvelope,
    PartsRequest,
    PlanEnvelope,
    SignedUploadOut,
    UploadStart,
)
from functions.api.streaming import MAX_FIELD_BYTES, StreamingForm, body_chunks, form_boundary, text

router = APIRouter(tags=["files"])


Creator = Annotated[Principal, Depends(require("batches:create"))]
Reader = Annotated[Principal, Depends(require("batches:read"))]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {
        401: "Missing, invalid or revoked credentials",
        403: "The role may not do this, or the file belongs to another organization",
        404: "No such file (`file_not_found`)",
        400: "`invalid_parts` (a part missing, out of order or with the wrong ETag), `not_multipart`, "
        "`upload_size_mismatch`, `file_too_large`, or the file type preflight",
        409: "`upload_incomplete`: no bytes were PUT to the upload URL yet; "
        "`upload_not_open`: the upload was already completed or cancelled",
        413: "`payload_too_large`: use the signed-URL upload",
    }
    return errors_doc({status: described[status] for status in statuses})


@router.post(
    "/v1/files",
    status_code=201,
    response_model=FileEnvelope,
    responses=_errors(401, 403, 413),
    summary="Upload a model-input JSONL file directly (small files; see /v1/files/uploads for large ones)",
    openapi_extra=DIRECT_UPLOAD_BODY,
)
async def upload_file(
    request: Request,
    principal: Creator,
    service: FilesDep,
    purpose: Annotated[str | None, Query(max_length=MAX_FIELD_BYTES)] = None,
) -> Any:
    limit = service.limits.max_direct_upload_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdecimal() and int(declared) > limit:
        raise too_large(limit)
    if media_type(request.headers.get("content-type")) == "multipart/form-data":
        record = await _upload_form(request, service, principal.org_id, purpose)
    else:
        record = await _upload_raw(request, service, principal.org_id, purpose)
    return JSONResponse(status_code=201, content={"file": record.to_api()})


@router.post(
    "/v1/files/uploads",
    status_code=201,
    response_model=SignedUploadOut,
    responses=_errors(400, 401, 403),
    summary="Start a large upload: a file in `uploading`, a signed URL to PUT its bytes to and, "
    "above 64 MiB, a multipart plan (signed part URLs)",
)
def start_upload(body: UploadStart, principal: Creator, service: FilesDep) -> SignedUploadView:
    signed = service.start_upload(
        principal.org_id,
        filename=body.filename,
        declared_bytes=body.bytes,
        content_type=body.content_type,
        purpose=body.purpose,
    )
    return signed.to_api()


@router.post(
    "/v1/files/{file_id}/complete",
    response_model=FileEnvelope,
    responses=_errors(400, 401, 403, 404, 409),
    summary="Confirm a signed upload (a multipart one with its parts' numbers and ETags): small files "
    "are checked now, large ones answer `uploaded` and are checked by a worker (idempotent)",
)
def complete_upload(
    file_id: str, principal: Creator, service: FilesDep, body: CompleteUpload | None = None
) -> dict[str, Any]:
    parts = None
    if body is not None and body.parts is not None:
        parts = [UploadedPart(part.part_number, part.etag) for part in body.parts]
    return {"file": service.complete_upload(principal.org_id, file_id, parts).to_api()}


@router.post(
    "/v1/files/{file_id}/parts",
    response_model=PlanEnvelope,
    responses=_errors(400, 401, 403, 404, 409),
    summary="Fresh signed URLs for parts of a multipart upload still in progress",
)
def part_urls(
    file_id: str, principal: Creator, service: FilesDep, body: PartsRequest | None = None
) -> dict[str, Any]:
    numbers = body.part_numbers if body is not None else None
    return {"multipart": service.part_urls(principal.org_id, file_id, numbers).to_api()}


@router.post(
    "/v1/files/{file_id}/cancel",
    response_model=FileEnvelope,
    responses=_errors(401, 403, 404, 409),
    summary="Cancel a signed upload in progress: its parts are dropped, the file ends `error` (idempotent)",
)
def cancel_upload(file_id: str, principal: Creator, service: FilesDep) -> dict[str, Any]:
    return {"file": service.cancel_upload(principal.org_id, file_id).to_api()}


@router.get(
    "/v1/files/{file_id}",
    response_model=FileEnvelope,
    responses=_errors(401, 403, 404),
    summary="A file: status, size, line counts and the first line errors",
)
def get_file(file_id: str, principal: Reader, service: FilesDep) -> dict[str, Any]:
    return {"file": service.file(principal.org_id, file_id).to_api()}


# -- streaming the request body (functions/api/streaming.py) --------------------------------


async def _upload_raw(request: Request, service: FileService, org_id: str, purpose: str | None) -> Any:
    _, params = parse_options_header(request.headers.get("content-disposition"))
    upload = service.begin_upload(
        org_id, filename=text(params.get(b"filename")), content_type=request.headers.get("content-type")
    )
    try:
        async for chunk in body_chunks(request, service.limits.max_direct_upload_bytes):
            await run_in_threadpool(upload.write, chunk)
        return await run_in_threadpool(lambda: upload.finish(purpose=purpose))
    except BaseException:
        await run_in_threadpool(upload.abort)
        raise


async def _upload_form(request: Request, service: FileService, org_id: str, purpose: str | None) -> Any:
    form = StreamingForm(
        form_boundary(request),
        lambda filename, kind: service.begin_upload(org_id, filename=filename, content_type=kind),
    )
    try:
        async for chunk in body_chunks(request, service.limits.max_direct_upload_bytes):
            await run_in_threadpool(form.write, chunk)
        upload = form.finish()
        return await run_in_threadpool(lambda: upload.finish(purpose=form.purpose or purpose))
    except BaseException:
        if form.upload is not None:
            await run_in_threadpool(form.upload.abort)
        raise
