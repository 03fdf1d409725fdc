"""What the sync and async file uploads share: the upload source (bytes or a path, read in
chunks with a progress callback) and the choice between a direct and a signed-URL upload.

The service takes a direct upload (`POST /v1/files`) of at most 4 MiB: a synchronous Lambda
invocation carries 6 MB and the body arrives base64-encoded (docs/files.md). Anything larger
goes to the signed URL (`POST /v1/files/uploads`, `PUT`, `complete`), up to 2 GiB. Above the
service's multipart threshold (64 MiB) the start answer carries a multipart plan: each part is
PUT to its own signed URL (retried on its own), and `complete` names the parts and their ETags;
the service then checks the file off the request path, so the upload waits for `processed`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

DIRECT_UPLOAD_MAX_BYTES = 4 * 1024 * 1024
MAX_FILE_BYTES = 2 * 1024 * 1024 * 1024
PENDING_STATUSES = frozenset({"uploading", "uploaded"})  # checks not finished yet
CHUNK_BYTES = 256 * 1024
JSONL = "application/jsonl"

UploadMethod = Literal["auto", "direct", "signed"]
Progress = Callable[[int, int], None]  # (bytes sent so far, total bytes)
Source = bytes | str | os.PathLike[str]


@dataclass(frozen=True)
class UploadSource:
    filename: str
    size: int
    data: bytes | None = None
    path: Path | None = None

    def chunks(self, on_progress: Progress | None = None) -> Iterator[bytes]:
        """The bytes from the first, reporting progress after each chunk; a new iterator for
        every attempt, so a retried upload starts over."""
        sent = 0
        if on_progress is not None:
            on_progress(0, self.size)
        for chunk in self._read():
            yield chunk
            sent += len(chunk)
            if on_progress is not None:
                on_progress(sent, self.size)

    def part_chunks(self, offset: int, size: int, on_progress: Progress | None = None) -> Iterator[bytes]:
        """Bytes [offset, offset + size) in chunks, reporting the whole file's progress (a
        retried part reports again from its own start)."""
        sent = offset
        if on_progress is not None:
            on_progress(sent, self.size)
        for chunk in self._read(offset, offset + size):
            yield chunk
            sent += len(chunk)
            if on_progress is not None:
                on_progress(sent, self.size)

    def _read(self, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        stop = self.size if end is None else end
        if self.data is not None:
            for at in range(start, stop, CHUNK_BYTES):
                yield self.data[at : min(at + CHUNK_BYTES, stop)]
            return
        assert self.path is not None
        with self.path.open("rb") as handle:
            handle.seek(start)
            left = stop - start
            while left > 0 and (chunk := handle.read(min(CHUNK_BYTES, left))):
                left -= len(chunk)
                yield chunk


def upload_source(source: Source, filename: str | None = None) -> UploadSource:
    if isinstance(source, bytes):
        return UploadSource(filename or "upload.jsonl", len(source), data=source)
    path = Path(source)
    return UploadSource(filename or path.name, path.stat().st_size, path=path)


def use_direct(method: UploadMethod, size: int, direct_max_bytes: int = DIRECT_UPLOAD_MAX_BYTES) -> bool:
    if method not in ("auto", "direct", "signed"):
        raise ValueError(f"upload method must be auto, direct or signed, not {method!r}")
    if method == "auto":
        return size <= direct_max_bytes
    return method == "direct"


def direct_headers(source: UploadSource) -> dict[str, str]:
    """A direct upload's headers. Header values are ASCII: each character of the filename
    that is not printable ASCII (or is a quote or backslash) is sent as `_`, so
    `données.jsonl` is stored as `donn_es.jsonl` (a signed upload keeps the name whole)."""
    name = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in source.filename)
    return {
        "Content-Type": JSONL,
        "Content-Disposition": f'attachment; filename="{name}"',
        "Content-Length": str(source.size),
    }


def start_body(filename: str, size: int, content_type: str | None, purpose: str | None) -> dict[str, object]:
    """The body of `POST /v1/files/uploads` (absent fields left out)."""
    body = {"filename": filename, "bytes": size, "content_type": content_type, "purpose": purpose}
    return {k: v for k, v in body.items() if v is not None}


def part_headers(size: int) -> dict[str, str]:
    """A part's PUT: only its length (a part URL signs no content type; never the API key)."""
    return {"Content-Length": str(size)}


def complete_body(etags: dict[int, str]) -> dict[str, object]:
    """The body of `POST /v1/files/{id}/complete` for a multipart upload: every part, in order."""
    return {"parts": [{"part_number": number, "etag": etags[number]} for number in sorted(etags)]}
