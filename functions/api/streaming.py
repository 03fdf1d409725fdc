"""Request bodies read as they arrive: a byte limit, and multipart/form-data parsed as it
streams (python-multipart's push parser), so an upload is never held whole."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Generic, Literal, Protocol, TypeVar

from fastapi import Request
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header

from batchroute.errors import InvalidRequest
from batchroute.services.batches.files import too_large

MAX_FIELD_BYTES = 64  # short text fields such as `purpose`


class Sink(Protocol):
    def write(self, chunk: bytes) -> None: ...


SinkT = TypeVar("SinkT", bound=Sink)


async def body_chunks(
    request: Request, limit: int, refuse: Callable[[int], Exception] = too_large
) -> AsyncIterator[bytes]:
    """The request body as it arrives, refused (`refuse(limit)`) once it passes `limit` bytes."""
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise refuse(limit)
        if chunk:
            yield chunk


def text(value: bytes | None) -> str | None:
    return value.decode("utf-8", errors="replace") if value else None


def form_boundary(request: Request) -> bytes:
    _, params = parse_options_header(request.headers.get("content-type"))
    boundary = params.get(b"boundary")
    if not boundary:
        raise InvalidRequest("A multipart body needs a boundary.", code="invalid_multipart")
    return bytes(boundary)


class StreamingForm(Generic[SinkT]):
    """multipart/form-data parsed as it streams: the `file_field` part feeds a sink (made by
    `begin(filename, content_type)`) chunk by chunk, `purpose` and the `text_fields` are read
    as short text (the latter into `fields`), other fields are skipped."""

    def __init__(
        self,
        boundary: bytes,
        begin: Callable[[str | None, str | None], SinkT],
        *,
        file_field: bytes = b"file",
        text_fields: tuple[bytes, ...] = (),
    ) -> None:
        self._begin = begin
        self._file_field = file_field
        self._text_fields = text_fields
        self.upload: SinkT | None = None
        self.purpose: str | None = None
        self.fields: dict[str, str] = {}
        self._field_name = ""
        self._headers: dict[bytes, bytes] = {}
        self._name = bytearray()
        self._value = bytearray()
        self._target: Literal["file", "purpose", "text", "skip"] = "skip"
        self._field = bytearray()
        self._parser = MultipartParser(
            boundary,
            callbacks={
                "on_part_begin": self._part_begin,
                "on_header_field": lambda data, start, end: self._name.extend(data[start:end]),
                "on_header_value": lambda data, start, end: self._value.extend(data[start:end]),
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._part_data,
                "on_part_end": self._part_end,
            },
        )

    def write(self, chunk: bytes) -> None:
        try:
            self._parser.write(chunk)
        except MultipartParseError as exc:
            raise InvalidRequest("The multipart body is malformed.", code="invalid_multipart") from exc

    def finish(self) -> SinkT:
        self._parser.finalize()
        if self._parser.state != MultipartState.END:  # cut short: a part may be missing its end
            raise InvalidRequest(
                "The multipart body ends before its closing boundary.", code="invalid_multipart"
            )
        if self.upload is None:
            name = self._file_field.decode()
            raise InvalidRequest(
                f"The form has no `{name}` part.", code="file_required", details={"param": name}
            )
        return self.upload

    def _part_begin(self) -> None:
        self._headers = {}
        self._target = "skip"

    def _header_end(self) -> None:
        self._headers[bytes(self._name).lower()] = bytes(self._value)
        self._name.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        _, params = parse_options_header(self._headers.get(b"content-disposition"))
        name = params.get(b"name")
        if name == self._file_field:
            if self.upload is not None:
                field = self._file_field.decode()
                raise InvalidRequest(f"Send one `{field}` part per upload.", code="multiple_files")
            self.upload = self._begin(text(params.get(b"filename")), text(self._headers.get(b"content-type")))
            self._target = "file"
        elif name == b"purpose" or (name is not None and name in self._text_fields):
            self._target = "purpose" if name == b"purpose" else "text"
            self._field_name = bytes(name).decode("utf-8", errors="replace")
            self._field.clear()

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._target == "file":
            assert self.upload is not None
            self.upload.write(bytes(data[start:end]))
        elif self._target in ("purpose", "text"):
            self._field.extend(data[start:end])
            if len(self._field) > MAX_FIELD_BYTES:
                code = "invalid_purpose" if self._target == "purpose" else "invalid_request"
                raise InvalidRequest(
                    f"The `{self._field_name}` field is too long.",
                    code=code,
                    details={"param": self._field_name} if self._target == "text" else None,
                )

    def _part_end(self) -> None:
        value = self._field.decode("utf-8", errors="replace").strip()
        if self._target == "purpose":
            self.purpose = value
        elif self._target == "text":
            self.fields[self._field_name] = value
        self._target = "skip"
