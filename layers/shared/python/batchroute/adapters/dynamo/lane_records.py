"""A lane record as its item `BATCH#<id>` / `LANE#<lane key>` holds it (docs/batches.md).

`LaneRecord` is the one list of its fields: each is stored under its own name, but for
`prompt_tokens`, `completion_tokens`, `cache` and `tool_uses`, kept as one flat map `usage`
(the progress updates of batch_progress.py ADD to it; a tool's calls under
`tool_uses.<tool>`), a lane's `prefixes` as `{only: [...]}` or
`{except: [...]}`, and its chunks as ranges `[[first, last], ...]`. A field unset (None, or
no cache prefixes or result writers) is not written. A record written before the watermarks has, instead of
each of `chunk_ranges`, `chunks_started_n` and `chunks_done_n`, the list beside it: it reads
back into the same ranges and counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from batchroute.adapters.dynamo.codec import decimals, plain
from batchroute.domain.catalog.pricing import TokenUsage
from batchroute.domain.routing.lane_plan import (
    LaneFailError,
    LaneRecord,
    PrefixFilter,
    SubmittedJob,
    chunk_ranges,
)
from batchroute.domain.stored import from_stored


def lane_item(lane: LaneRecord) -> dict[str, Any]:
    """The stored item's fields (the store adds the keys)."""
    values = {name: value for name, value in asdict(lane).items() if name != "usage"}
    values |= {
        "usage": lane.usage.to_tally(),
        "prefixes": lane.prefixes.to_item() if lane.prefixes is not None else None,
        "cache_prefixes": list(lane.cache_prefixes) or None,
        "result_writers": list(lane.result_writers) or None,
    }
    return {name: value for name, value in decimals(values).items() if value is not None}


def lane_from_item(item: Mapping[str, Any]) -> LaneRecord:
    """The lane record an item holds (numbers as DynamoDB gives them back, Decimal)."""
    values = plain(item)
    usage, job, fail_error = values.get("usage") or {}, values.get("job"), values.get("fail_error")
    return from_stored(
        LaneRecord,
        values,
        chunk_ranges=_ranges(values),
        chunks_started_n=_count(values, "chunks_started_n", "chunks_started"),
        chunks_done_n=_count(values, "chunks_done_n", "chunks_done"),
        usage=TokenUsage.from_tally(usage),
        exclude_seqs=tuple(values.get("exclude_seqs") or ()),
        fail_error=from_stored(LaneFailError, fail_error) if fail_error else None,
        job=job_from_item(job) if job else None,
        cache_prefixes=tuple(values.get("cache_prefixes") or ()),
        result_writers=tuple(values.get("result_writers") or ()),
        prefixes=PrefixFilter.from_item(values.get("prefixes")),
    )


def job_item(job: SubmittedJob) -> dict[str, Any]:
    """A vendor batch job as the lane record stores it (`job`)."""
    return dict(decimals(asdict(job)))


def job_from_item(item: Mapping[str, Any]) -> SubmittedJob:
    values = plain(item)
    seqs = values.get("seqs")
    return from_stored(SubmittedJob, values, seqs=tuple(seqs) if seqs is not None else None)


def _ranges(values: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    if "chunk_ranges" in values:
        return tuple((first, last) for first, last in values["chunk_ranges"] or ())
    return tuple((first, last) for first, last in chunk_ranges(values.get("chunks") or ()))


def _count(values: Mapping[str, Any], watermark: str, legacy_list: str) -> int:
    """A watermark, or the length of the list a record written before the watermarks keeps."""
    if watermark in values:
        return int(values[watermark])
    return len(values.get(legacy_list) or ())
