"""Model-input files: the record, where its bytes live, and the preflight `file_type` check.

Statuses (docs/files.md): `uploading` (a signed upload URL was issued, bytes not yet
confirmed), `uploaded` (bytes confirmed, checks not finished; only seen if a confirm call
died half-way), `processed` (checked; usable as `input_file_id`), `error` (stored but
unusable: malformed lines or an unsupported file type), `expired` (bytes reclaimed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, TypedDict, get_args

from batchroute.domain.batches.jsonl import LineError, LineErrorView
from batchroute.domain.batches.preflight import IssueView
from batchroute.domain.views import view_of


class CompletedPart(TypedDict):
    """One part of a multipart upload as S3 completes it (`CompleteMultipartUpload`): an
    input file's parts (services/batches/files.py) and Finalize's artifact parts."""

    PartNumber: int
    ETag: str


FileStatus = Literal["uploading", "uploaded", "processed", "error", "expired"]
# `batch_input` for the native API; `batch` is the vendor-compatible surface's purpose.
Purpose = Literal["batch_input", "batch"]
PURPOSES: Final[tuple[Purpose, ...]] = get_args(Purpose)
DEFAULT_PURPOSE: Final[Purpose] = "batch_input"
DEFAULT_CONTENT_TYPE: Final = "application/jsonl"
MAX_FILENAME_CHARS: Final = 255

SNIFF_BYTES: Final = 4096  # the first bytes looked at to tell JSON Lines from anything else

JSONL_MEDIA_TYPES: Final = frozenset(
    {
        "application/jsonl",
        "application/x-jsonl",
        "application/jsonlines",
        "application/x-jsonlines",
        "application/json-lines",
        "application/ndjson",
        "application/x-ndjson",
        "text/jsonl",
        "text/x-jsonl",
        "text/plain",
        # What many clients send for a file part of unknown type: the bytes decide.
        "application/octet-stream",
    }
)
JSONL_EXTENSIONS: Final = frozenset({".jsonl", ".ndjson", ".jsonlines", ".json", ".txt"})

# Leading bytes of common binary formats, for a message that says what was sent.
_SIGNATURES: Final[tuple[tuple[bytes, str], ...]] = (
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a zip archive (or an Office document)"),
    (b"PK\x05\x06", "an empty zip archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"Rar!", "a RAR archive"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\xd0\xcf\x11\xe0", "a legacy Office document"),
    (b"PAR1", "a Parquet file"),
)
_ACTION = "Upload UTF-8 JSON Lines: one JSON object per line, as a .jsonl file (application/jsonl)."


def media_type(content_type: str | None) -> str:
    """`Application/JSONL; charset=utf-8` -> `application/jsonl`."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def extension(filename: str | None) -> str:
    name = (filename or "").rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def sniff(head: bytes) -> str | None:
    """What is wrong with a file that starts with `head`, or None if it may be JSON Lines.

    An empty or blank head passes: emptiness is a line-level problem, not a type."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    for signature, name in _SIGNATURES:
        if head.startswith(signature):
            return f"the file is {name}, not JSON Lines"
    if b"\x00" in head:
        return "the file holds binary data (NUL bytes), not JSON Lines"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # a character cut at the end of the head is fine
            return "the file is not UTF-8 text"
        text = head[: exc.start].decode("utf-8")
    stripped = text.lstrip()
    if stripped and stripped[0] not in "{[":
        return "the file does not start with JSON (expected '{' on the first line)"
    return None


def file_type_issue(
    *, content_type: str | None, filename: str | None, head: bytes | None
) -> IssueView | None:
    """The preflight `file_type` issue for an upload, or None when it may be JSON Lines.

    `head` (the first SNIFF_BYTES) is None when the bytes are not there yet (a signed upload
    is declared before its bytes arrive)."""
    problem = None
    kind = media_type(content_type)
    suffix = extension(filename)
    if kind and kind not in JSONL_MEDIA_TYPES:
        problem = f"content type {kind} is not supported; send application/jsonl"
    elif suffix and suffix not in JSONL_EXTENSIONS:
        problem = f"a {suffix} file is not supported; upload a .jsonl file"
    elif head is not None:
        problem = sniff(head)
    if problem is None:
        return None
    return unsupported_file_type(f"Unsupported file: {problem}.")


def unsupported_file_type(message: str) -> IssueView:
    """The preflight issue (error.details.preflight.errors[]) for a refused file."""
    return {
        "category": "file_type",
        "code": "unsupported_file_type",
        "message": message,
        "action": _ACTION,
        "path": "file",
    }


MIB: Final = 1024 * 1024
MIN_PART_BYTES: Final = 5 * MIB  # S3: every part but the last holds at least 5 MiB
MAX_PARTS: Final = 10_000  # S3: at most 10,000 parts in one multipart upload


class PartsRefused(Exception):
    """S3 refused to complete a multipart upload from the parts named (an ETag that is not
    the part's, a part missing or too small, or no such upload)."""


def part_size(total_bytes: int, preferred: int = 64 * MIB) -> int:
    """The part size for a multipart upload of `total_bytes`: `preferred` (at least S3's
    5 MiB), grown in whole MiB when `preferred` would need more than 10,000 parts."""
    if total_bytes < 1:
        raise ValueError("a multipart upload holds at least one byte")
    size = max(preferred, MIN_PART_BYTES)
    if part_count(total_bytes, size) > MAX_PARTS:
        size = part_count(part_count(total_bytes, MAX_PARTS), MIB) * MIB
    return size


def part_count(total_bytes: int, part_bytes: int) -> int:
    """How many parts `total_bytes` takes at `part_bytes` each (the last may be shorter)."""
    return -(-total_bytes // part_bytes)


def part_range(number: int, total_bytes: int, part_bytes: int) -> tuple[int, int]:
    """Part `number` (1-based) as the byte range [start, end) of the file."""
    if not 1 <= number <= part_count(total_bytes, part_bytes):
        raise ValueError(f"part {number} is outside 1..{part_count(total_bytes, part_bytes)}")
    start = (number - 1) * part_bytes
    return start, min(start + part_bytes, total_bytes)


def final_key(org_id: str, file_id: str) -> str:
    """Where a file's bytes live in the uploads bucket once confirmed."""
    return f"files/{org_id}/{file_id}"


def profile_key(org_id: str, file_id: str, sha256: str) -> str:
    """Where a file's item profile too large for its record lives (domain/batches/item_profile.py),
    next to the file's bytes and named by their checksum."""
    return f"files/{org_id}/{file_id}.item-profile.{sha256}.json"


def staging_key(org_id: str, file_id: str) -> str:
    """Where a signed upload lands; the bucket's lifecycle rule expires `staging/` after 2 days."""
    return f"staging/{org_id}/{file_id}"


class FileView(TypedDict):
    """A file as the API shows it."""

    id: str
    object: Literal["file"]
    filename: str
    purpose: Purpose
    content_type: str
    bytes: int
    status: FileStatus
    created_at: str
    line_count: int
    item_count: int
    error_count: int
    errors: list[LineErrorView]
    error: dict[str, str] | None
    sha256: str | None


@dataclass(frozen=True)
class FileRecord:
    file_id: str
    org_id: str
    filename: str
    purpose: Purpose
    content_type: str
    bytes: int  # declared while `uploading`, measured afterwards
    status: FileStatus
    created_at: str
    s3_key: str
    updated_at: str | None = None
    line_count: int = 0
    item_count: int = 0
    error_count: int = 0
    errors: tuple[LineError, ...] = field(default_factory=tuple)
    error: dict[str, str] | None = None  # why the whole file is unusable: {code, message}
    sha256: str | None = None
    upload_expires_at: str | None = None  # signed uploads: when the upload URL stops working
    # multipart signed uploads: S3's upload id (server-side only, never shown) and the part size
    upload_id: str | None = None
    part_bytes: int | None = None
    # the item profile computed by the checks (domain/batches/item_profile.py, JSON text; server-side only)
    item_profile: str | None = None

    @property
    def usable(self) -> bool:
        return self.status == "processed"

    def to_api(self) -> FileView:
        return view_of(
            self, FileView, id=self.file_id, object="file", errors=[issue.to_api() for issue in self.errors]
        )
