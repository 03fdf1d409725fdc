"""Batches on the vendor-compatible surface (docs/compat.md).

A compat batch is an ordinary batch: `BatchService.create` quotes it internally, reserves
its credits in one transaction and starts the same workflow. The only differences are the
items (the file's `{custom_id, method, url, body}` rows, read as native items as they
stream) and what rides along in the same transaction: the `compat` fields on the batch
(endpoint, input file, body format, the ids its output and error files will have) and the
records that list it and resolve those file ids (adapters/dynamo/compat.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.accounts.access import Principal, authorize
from batchroute.domain.batches.files import FileRecord
from batchroute.domain.batches.item_profile import ItemProfile
from batchroute.domain.batches.jsonl import LineError
from batchroute.domain.batches.metadata import parse_metadata
from batchroute.domain.batches.record import BatchRecord, CompatFields, SurfaceFields
from batchroute.domain.compat.batches import (
    BODY_FORMATS,
    COMPLETION_WINDOW,
    DEFAULT_BODY_FORMAT,
    ENDPOINTS,
    RowProblem,
    VendorBatchListView,
    VendorBatchView,
    batch_object,
    input_message,
    input_param,
    read_row,
    vendor_list,
    vendor_status,
)
from batchroute.domain.compat.expiration import refuse_expiration
from batchroute.domain.work_orders.work_orders import parse_work_order_id
from batchroute.errors import Conflict, Forbidden, InvalidRequest, NotFound, ServiceError
from batchroute.ids import has_prefix, new_id
from batchroute.services.batches.commands import CreateBatch
from batchroute.services.batches.create import BatchService, Surface, idempotency_conflict
from batchroute.services.batches.files import FileService
from batchroute.services.batches.reads import BatchReads
from batchroute.services.compat.files import COMPAT_PURPOSE, OutputFileRecords
from batchroute.transactions import TransactItem


class CompatRecords(OutputFileRecords, Protocol):
    """The compat records: the batch's own, and (`OutputFileRecords`) its output files'."""

    def batch_items(
        self, *, org_id: str, batch_id: str, output_file_id: str, error_file_id: str, created_at: str
    ) -> list[TransactItem]: ...

    def batch_ids(self, org_id: str, *, after: str | None, limit: int) -> tuple[list[str], bool]: ...


@dataclass(frozen=True)
class CompatBatchRequest:
    input_file_id: str
    endpoint: str
    completion_window: str = COMPLETION_WINDOW
    body_format: str | None = None
    metadata: Mapping[str, str] | None = None
    output_expires_after: object = None  # checked, then refused (domain/compat/expiration.py)


@dataclass(eq=False)
class CompatFileItems:
    """A compat input file read as native items (the quote pipeline's FileItems): each row
    converted as it streams; a bad row, or one whose url is not the batch's endpoint, stops
    the batch with a 400 naming the line."""

    files: FileService
    endpoint: str
    outputs: CompatRecords

    def open_items(self, org_id: str, file_id: str) -> Iterator[tuple[int, dict[str, Any] | LineError]]:
        try:
            record = self.files.file(org_id, file_id)
        except NotFound:
            raise self._not_an_input_file(org_id, file_id) from None
        if record.purpose != COMPAT_PURPOSE:
            raise InvalidRequest(
                "input_file_id must be a file uploaded with purpose batch.",
                code="invalid_input_file",
                details={"param": "input_file_id"},
            )
        return self._items(self.files.open_items(org_id, file_id))

    def file_ready(self, org_id: str, file_id: str) -> FileRecord:
        try:
            return self.files.file_ready(org_id, file_id)
        except NotFound:
            raise self._not_an_input_file(org_id, file_id) from None

    def item_profile(self, org_id: str, file_id: str) -> ItemProfile | None:
        """Never: rows are converted as they are read, so they are always streamed."""
        self.file_ready(org_id, file_id)
        return None

    def _not_an_input_file(self, org_id: str, file_id: str) -> ServiceError:
        """Why `input_file_id`, which names no stored file, is refused: the output or error
        file of a compat batch is no input file (400: its purpose is batch_output); an id that
        names no file at all is a 404 on `input_file_id`."""
        output = self.outputs.output_file(file_id) if has_prefix(file_id, "file") else None
        if output is None or output.deleted_at:
            return NotFound(
                f"No such file: {file_id[:64]}.", code="file_not_found", details={"param": "input_file_id"}
            )
        if output.org_id != org_id:
            return Forbidden("This file belongs to another organization.", code="forbidden")
        return InvalidRequest(
            f"File {file_id} has purpose batch_output (the {output.role} file of {output.batch_id}); "
            "input_file_id must be a file uploaded with purpose batch.",
            code="invalid_input_file",
            details={"param": "input_file_id"},
        )

    def _items(
        self, lines: Iterator[tuple[int, dict[str, Any] | LineError]]
    ) -> Iterator[tuple[int, dict[str, Any] | LineError]]:
        for line, parsed in lines:
            read = read_row(line, parsed)
            if isinstance(read, RowProblem):
                raise InvalidRequest(
                    read.text(), code="invalid_jsonl_line", details={"param": read.param, "line": line}
                )
            if read.url != self.endpoint:
                raise InvalidRequest(
                    f"Line {line}: url {read.url} is not the batch's endpoint {self.endpoint}.",
                    code="endpoint_mismatch",
                    details={"param": "endpoint", "line": line},
                )
            yield line, read.item


@dataclass(eq=False, kw_only=True)
class CompatBatches:
    batches: BatchService
    files: FileService
    reads: BatchReads
    records: CompatRecords
    clock: Clock

    def create(
        self, principal: Principal, request: CompatBatchRequest, idempotency_key: str | None = None
    ) -> VendorBatchView:
        authorize(principal, "batches:create")
        _check(request)
        now = self.clock.now()
        batch_id = new_id("batch", now)
        compat = CompatFields(
            endpoint=request.endpoint,
            input_file_id=request.input_file_id,
            completion_window=request.completion_window,
            body_format=request.body_format or DEFAULT_BODY_FORMAT,
            output_file_id=new_id("file", now),
            error_file_id=new_id("file", now),
        )
        service = self.batches.reading(CompatFileItems(self.files, request.endpoint, self.records))
        try:
            answer = service.create(
                principal,
                _command(request),
                idempotency_key or f"compat-{batch_id}",
                self._surface(principal.org_id, batch_id, compat, isoformat(now)),
            )
        except InvalidRequest as exc:
            if exc.code == "batch_preflight_failed":
                raise _preflight_error(exc, request.endpoint) from exc
            raise
        except (NotFound, Conflict) as exc:  # the metadata's work order: named by its whole path
            if exc.code.startswith("work_order_"):  # not found, closed, full
                raise type(exc)(
                    exc.message, code=exc.code, details={"param": "metadata.work_order_id"}
                ) from exc
            raise
        created = self.reads.owned(principal, str(json.loads(answer.body)["batch"]["id"]))
        if answer.replayed:
            _check_same_request(created, compat)
        return batch_object(created)

    def _surface(self, org_id: str, batch_id: str, compat: CompatFields, created_at: str) -> Surface:
        """A compat batch carries its `compat` fields and the records that list it and resolve
        its output and error file ids, written in its create transaction."""
        items = self.records.batch_items(
            org_id=org_id,
            batch_id=batch_id,
            output_file_id=str(compat.output_file_id),
            error_file_id=str(compat.error_file_id),
            created_at=created_at,
        )
        return Surface(
            "compat", batch_id=batch_id, fields=SurfaceFields(compat=compat), transact_items=tuple(items)
        )

    def get(self, principal: Principal, batch_id: str) -> VendorBatchView:
        return batch_object(self._owned(principal, batch_id))

    def list(self, principal: Principal, *, after: str | None, limit: int) -> VendorBatchListView:
        authorize(principal, "batches:read")
        if after is not None and not has_prefix(after, "batch"):
            raise InvalidRequest(
                "after must be a batch id.", code="invalid_cursor", details={"param": "after"}
            )
        ids, has_more = self.records.batch_ids(principal.org_id, after=after, limit=limit)
        data = [
            batch_object(batch) for batch in (self.reads.records.get(i) for i in ids) if batch is not None
        ]
        return vendor_list(data, has_more=has_more)

    def cancel(self, principal: Principal, batch_id: str) -> VendorBatchView:
        """The batch, `cancelling`. One that is `cancelling` already (canceled natively, its
        files not written yet) answers as it is, as the vendor's cancel does; a finished one
        (`completed`, `failed`, `expired`, `cancelled`) is `409 batch_not_cancellable`."""
        batch = self._owned(principal, batch_id)
        authorize(principal, "batches:create")
        if vendor_status(batch) != "cancelling":
            try:
                batch = self.batches.cancel(principal, batch_id, None)
            except Conflict:  # a concurrent cancel may have won the transition
                batch = self._owned(principal, batch_id)
                if vendor_status(batch) != "cancelling":
                    raise
        return batch_object(batch)

    def _owned(self, principal: Principal, batch_id: str) -> BatchRecord:
        unknown = NotFound(
            f"No such batch: {batch_id[:64]}.", code="batch_not_found", details={"param": "batch_id"}
        )
        if not has_prefix(batch_id, "batch"):
            raise unknown
        try:
            batch = self.reads.owned(principal, batch_id)
        except NotFound:  # a well-formed id of no batch: the same answer as any unknown id
            raise unknown from None
        if batch.source != "compat":
            raise NotFound(
                "This batch was not created on the vendor-compatible surface; read it at /v1/batches.",
                code="batch_not_found",
                details={"param": "batch_id"},
            )
        return batch


def _command(request: CompatBatchRequest) -> CreateBatch:
    """The native batch a compat request is: its input file, window and metadata, read as any
    batch body. A metadata `work_order_id` that is a work order id (`wo_...`, as the native
    field takes it) joins that work order (docs/work-orders.md); any other value is the
    customer's own tag, kept as plain metadata (the vendor's metadata is free-form)."""
    body: dict[str, Any] = {
        "input_file_id": request.input_file_id,
        "completion_window": request.completion_window,
    }
    if request.metadata:
        body["metadata"] = dict(request.metadata)
        work_order = _work_order_id(request.metadata.get("work_order_id"))
        if work_order is not None:
            body["work_order_id"] = work_order
    return CreateBatch.parse(body)


def _work_order_id(value: str | None) -> str | None:
    """The work order a metadata value names, or None when it is no `wo_` id."""
    try:
        return parse_work_order_id(value)
    except InvalidRequest:
        return None


def _check_same_request(created: BatchRecord, compat: CompatFields) -> None:
    """A replayed Idempotency-Key must name the same endpoint, input file and body format."""
    stored = created.compat or CompatFields()
    if (stored.endpoint, stored.input_file_id, stored.body_format) != (
        compat.endpoint,
        compat.input_file_id,
        compat.body_format,
    ):
        raise idempotency_conflict()


def _check(request: CompatBatchRequest) -> None:
    if request.endpoint not in ENDPOINTS:
        raise InvalidRequest(
            f"endpoint must be one of {', '.join(ENDPOINTS)}.",
            code="invalid_endpoint",
            details={"param": "endpoint"},
        )
    if request.completion_window != COMPLETION_WINDOW:
        raise InvalidRequest(
            "completion_window must be 24h.",
            code="invalid_completion_window",
            details={"param": "completion_window"},
        )
    if request.body_format is not None and request.body_format not in BODY_FORMATS:
        raise InvalidRequest(
            "body_format must be normalized or raw.",
            code="invalid_body_format",
            details={"param": "body_format"},
        )
    refuse_expiration(request.output_expires_after, "output_expires_after")
    try:
        parse_metadata(request.metadata)
    except InvalidRequest as exc:
        raise InvalidRequest(exc.message, code="invalid_metadata", details={"param": "metadata"}) from None


def _preflight_error(exc: InvalidRequest, endpoint: str) -> InvalidRequest:
    """The native preflight failure as the vendor reports a bad batch: the first problem, with
    the input line it is on and the request field (`body.messages`) as `param`."""
    errors = ((exc.details or {}).get("preflight") or {}).get("errors") or []
    if not errors:
        return exc
    first = errors[0]
    line = first.get("line")
    said = input_message(str(first["message"]), first.get("path"), endpoint)
    message = f"Line {line}: {said}" if line else said
    if len(errors) > 1:
        message += f" ({len(errors)} problems in all; the first is shown.)"
    return InvalidRequest(
        message,
        code=str(first.get("code") or exc.code),
        details={"param": input_param(first.get("path"), endpoint), "line": line, "preflight": exc.details},
    )
