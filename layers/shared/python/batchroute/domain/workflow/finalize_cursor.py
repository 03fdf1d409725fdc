"""The Finalize step's cursor as stored (`BATCH#<id>`/`CURSOR#finalize`): where the chunked
merge stands between invocations (services/workflow/finalize.py `FinalizeCursor` reads and
writes it). Pure: the stored shapes only."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from batchroute.domain.batches.files import CompletedPart
from batchroute.domain.workflow.results import MergeTallyItem


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


class FinalizeCursorItem(TypedDict):
    """The whole cursor (numbers read back may be Decimals: the reader takes `int` of them)."""

    chunk_count: int
    missing_code: str
    missing_message: str
    unrun_canceled: bool
    results_upload: str
    errors_upload: str
    position: int
    state: str
    results_parts: list[CompletedPart]
    errors_parts: list[CompletedPart]
    results_bytes: int
    results_lines: int
    errors_lines: int
    carry: NotRequired[str | None]  # absent when stored as null
    offsets: list[int]
    tally: MergeTallyItem
