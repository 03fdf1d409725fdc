"""Result rows: the per-lane result line, the final artifact row, and the chunk merge. Pure.

Each lane writes `results/<lane_key>/<chunk>.<writer>.jsonl` sorted by seq (docs/batches.md). The
final artifact walks the input chunk in order and merges every lane's result file of that
chunk by seq (a k-way merge over sorted streams: memory stays flat): every input seq gets
exactly one row, the first result found for it, or a failed row made by `missing(seq)`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NotRequired, TypedDict

from batchroute.domain.catalog.pricing import NO_USAGE, TokenUsage, UsageFields
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.stored import from_counters
from batchroute.domain.views import view_of


class LineError(TypedDict):
    """An item's error in a result line (`ItemError.to_dict()`)."""

    code: str
    message: str
    transient: NotRequired[bool]


class PublicError(TypedDict):
    code: str
    message: str


class _ItemAnswer(TypedDict):
    """What a result line and an artifact row both say of an item: `output` and `raw` are the
    vendor's answer, JSON by nature."""

    customer_item_id: Any
    status: str
    output: dict[str, Any] | None
    raw: dict[str, Any] | None


class ResultLine(_ItemAnswer):
    """One line of a lane's result chunk (`results/<lane_key>/<chunk>.<writer>.jsonl`, docs/batches.md):
    the item's provider result, the lane that ran it, and (once Finalize reads it) its lane key."""

    seq: int
    error: LineError | None
    usage: UsageFields
    model: str
    provider: str
    lane_id: str
    attempts: int
    lane_key: NotRequired[str]


class ArtifactRow(_ItemAnswer):
    """One row of results.jsonl / errors.jsonl (docs/batches.md, Results)."""

    sequence_number: int
    error: PublicError | None
    model: NotRequired[str | None]
    provider: NotRequired[str | None]
    usage: NotRequired[UsageFields | None]


def public_error(error: LineError | None) -> PublicError | None:
    """An item error as the result row shows it: `{code, message}`."""
    if not error:
        return None
    return {"code": str(error.get("code") or "error"), "message": str(error.get("message") or "")}


def artifact_row(line: ResultLine) -> ArtifactRow:
    """The results.jsonl row of one result line: the native result row (`customer_item_id`,
    `status`, `output`, `error`) plus `sequence_number`, `raw` (kept for body_format=raw),
    and for a completed row the `model`, `provider` and `usage` that answered it (the
    vendor-compatible output needs them); the read API shows only the native fields."""
    completed = line.get("status") == "completed"
    row: ArtifactRow = {
        "customer_item_id": line.get("customer_item_id"),
        "sequence_number": int(line["seq"]),
        "status": "completed" if completed else "failed",
        "output": line.get("output") if completed else None,
        "error": None if completed else public_error(line.get("error")),
        "raw": line.get("raw"),
    }
    if completed:
        row["model"] = line.get("model")
        row["provider"] = line.get("provider")
        row["usage"] = line.get("usage")
    return row


def missing_row(seq: int, customer_item_id: Any, *, code: str, message: str) -> ArtifactRow:
    """The row of an item that got no result (cancelled, expired, never run)."""
    return {
        "customer_item_id": customer_item_id,
        "sequence_number": seq,
        "status": "failed",
        "output": None,
        "error": {"code": code, "message": message},
        "raw": None,
    }


@dataclass
class LaneTally:
    """What one lane delivered in the final artifact: its rows and the usage of its
    completed rows (failed rows are never charged)."""

    completed: int = 0
    failed: int = 0
    usage: TokenUsage = NO_USAGE  # of its completed rows
    # rows its vendor job gave after the lane handed those items over (deadline rescue,
    # failover): recorded, never delivered or charged (docs/batches.md, "A late result")
    late: int = 0

    def add(self, line: ResultLine) -> None:
        if line.get("status") == "completed":
            self.completed += 1
            self.usage += TokenUsage.from_fields(line.get("usage") or {})
        else:
            self.failed += 1

    def to_dict(self) -> dict[str, int]:
        """The lane's tally (`lane_tallies`); the cache counts and tool calls only when there
        are any."""
        return {
            "completed": self.completed,
            "failed": self.failed,
            **self.usage.to_tally(),
            **({"late": self.late} if self.late else {}),
        }

    @classmethod
    def from_dict(cls, tally: Mapping[str, int]) -> LaneTally:
        return from_counters(cls, tally, usage=TokenUsage.from_tally(tally))


@dataclass
class ChunkTally(LaneTally):
    """A lane's chunk as it finishes (`finish_chunk`, `hand_over`): its `items` leave
    `running` as completed, failed, canceled, or handed over (back to pending, for a failover
    lane); the lane adds the usage of the completed ones. The counts move by it once.
    `position` is the chunk's index in the lane's list (the watermarks count in that order)."""

    position: int = 0
    items: int = 0
    canceled: int = 0
    handed_over: int = 0
    # "<chunk>:<writer>" of the result file these counts are of (noted on the lane record
    # by the write that finishes the chunk); None when the chunk answered nothing
    result_writer: str | None = None

    def count_moves(self) -> dict[str, int]:
        """How the batch's counts move, by count name."""
        left = {"completed": self.completed, "failed": self.failed, "canceled": self.canceled}
        return {"running": -self.items, **left, "pending": self.handed_over}

    def rest_handed_over(self) -> ChunkTally:
        """The chunk of a lane that fails over: what it did not answer goes to its successor."""
        return replace(self, canceled=0, handed_over=self.items - self.completed - self.failed)


@dataclass(frozen=True)
class HandOver:
    """A lane moving its chunk's unanswered items on (a failover, a deadline rescue), written
    in one transaction (`hand_over`): the lane finishes its chunk as `tally` says and ends
    failed with `error`, pointing at `successor`, which is created with it, as is `rest` (a
    rescue's record of the old lane for the items it keeps) when there is one."""

    lane_key: str
    successor: LaneRecord
    tally: ChunkTally
    error: str
    at: str
    rest: LaneRecord | None = None


class MergeTallyItem(TypedDict):
    """A merge's tally as Finalize's cursor carries it between invocations (`lanes` by lane
    key, each `LaneTally.to_dict`)."""

    completed: int
    failed: int
    missing: int
    lanes: dict[str, dict[str, int]]


@dataclass
class MergeTally:
    completed: int = 0
    failed: int = 0  # rows with a provider (or lane) failure
    missing: int = 0  # rows made for items without a result
    lanes: dict[str, LaneTally] = field(default_factory=dict)  # by lane_key

    @property
    def rows(self) -> int:
        return self.completed + self.failed + self.missing

    def add(self, line: ResultLine) -> None:
        if line.get("status") == "completed":
            self.completed += 1
        else:
            self.failed += 1
        lane = str(line.get("lane_key") or line.get("lane_id") or "")
        self.lanes.setdefault(lane, LaneTally()).add(line)

    def add_late(self, lane_key: str, rows: int) -> None:
        """Rows of a handed-over lane that came after its hand-over (not the items' answers)."""
        self.lanes.setdefault(lane_key, LaneTally()).late += rows

    def to_dict(self) -> MergeTallyItem:
        """Plain values, to carry the tally between invocations (chunked Finalize)."""
        return view_of(self, MergeTallyItem, lanes={key: lane.to_dict() for key, lane in self.lanes.items()})

    @classmethod
    def from_dict(cls, values: MergeTallyItem) -> MergeTally:
        lanes = {str(key): LaneTally.from_dict(lane) for key, lane in (values.get("lanes") or {}).items()}
        return cls(
            completed=int(values.get("completed") or 0),
            failed=int(values.get("failed") or 0),
            missing=int(values.get("missing") or 0),
            lanes=lanes,
        )


def merge_chunk(
    inputs: Iterable[int],
    lane_results: Iterable[Iterable[ResultLine]],
    *,
    missing: Callable[[int], ArtifactRow],
    tally: MergeTally,
) -> Iterator[ArtifactRow]:
    """One artifact row per input seq, in input order: its answer, or `missing(seq)`.

    `lane_results` are the chunk's result files, each sorted by seq; a seq answered twice
    keeps the first answer, a result for a seq not in the input is dropped."""
    merged = heapq.merge(*lane_results, key=lambda line: int(line["seq"]))
    head = next(merged, None)
    for seq in inputs:
        while head is not None and int(head["seq"]) < seq:
            head = next(merged, None)
        if head is not None and int(head["seq"]) == seq:
            tally.add(head)
            yield artifact_row(head)
            while head is not None and int(head["seq"]) == seq:
                head = next(merged, None)
        else:
            tally.missing += 1
            yield missing(seq)
