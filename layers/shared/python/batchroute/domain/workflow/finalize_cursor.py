"""The Finalize step's cursor (`BATCH#<id>`/`CURSOR#finalize`): where the chunked merge
stands between invocations (services/workflow/finalize.py moves it; adapters/dynamo/
batch_records.py stores it, its parts and tally in the shapes S3 and `MergeTally` give)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypedDict

from batchroute.domain.batches.files import CompletedPart
from batchroute.domain.workflow.results import MergeTally, MergeTallyItem


class CursorChanges(TypedDict, total=False):
    """What one advance of the cursor sets: a committed slice's progress, or `state` done."""

    state: str
    position: int
    tally: MergeTallyItem
    results_parts: list[CompletedPart]
    errors_parts: list[CompletedPart]
    results_bytes: int
    results_lines: int
    errors_lines: int
    carry: str | None
    offsets: list[int]


@dataclass(frozen=True, slots=True)
class UploadPart:
    """One sent part of a multipart upload, as S3 completes it."""

    number: int
    etag: str

    def to_s3(self) -> CompletedPart:
        return {"PartNumber": self.number, "ETag": self.etag}


@dataclass(frozen=True, slots=True)
class FinalizeCursor:
    """The step's cursor item (`CURSOR#finalize`): where the merge stands between invocations."""

    chunk_count: int
    missing_code: str
    missing_message: str
    unrun_canceled: bool
    results_upload: str
    errors_upload: str
    position: int = 0
    state: str = "running"
    results_parts: tuple[UploadPart, ...] = ()
    errors_parts: tuple[UploadPart, ...] = ()
    results_bytes: int = 0
    results_lines: int = 0
    errors_lines: int = 0
    carry: str | None = None
    offsets: tuple[int, ...] = ()
    tally: MergeTally = field(default_factory=MergeTally)

    def slice_changes(self) -> CursorChanges:
        """What a committed slice sets on the stored cursor: all it moves but `state` (set
        only when the merge is done)."""
        return {
            "position": self.position,
            "tally": self.tally.to_dict(),
            "results_parts": [part.to_s3() for part in self.results_parts],
            "errors_parts": [part.to_s3() for part in self.errors_parts],
            "results_bytes": self.results_bytes,
            "results_lines": self.results_lines,
            "errors_lines": self.errors_lines,
            "carry": self.carry,
            "offsets": list(self.offsets),
        }


def stored_parts(stored: Iterable[CompletedPart]) -> tuple[UploadPart, ...]:
    """Parts as S3 completes them (`to_s3`), read back."""
    return tuple(UploadPart(int(p["PartNumber"]), str(p["ETag"])) for p in stored)
