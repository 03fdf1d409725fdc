"""Where a batch's objects live in the artifacts bucket (docs/batches.md): the key layout
that batch create, the workflow, the reads and retention share. Pure names; the adapters
(adapters/batch_artifacts.py, adapters/batch_inputs.py) read and write the bytes.

- `batches/<id>/input/<chunk:05d>.jsonl`: input chunks of INPUT_CHUNK_ROWS items each;
- `batches/<id>/results/<lane_key>/<chunk:05d>.<writer>.jsonl`: one lane's results for one
  chunk, as the worker that wrote it names it (two workers running the same lane at once
  each write their own; the one whose write finished the chunk is noted on the lane record,
  `LaneRecord.result_writers`); a lane record from before writers were noted has its file
  at `.../<chunk:05d>.jsonl`;
- `batches/<id>/results.jsonl`, `errors.jsonl`, `receipt.json`, `results.index.json`;
- `tmp/batches/<id>/partial/<lane_key>/<chunk:05d>.jsonl`: a chunk a lane left half done.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import orjson

from batchroute.domain.routing.lane_plan import LaneRecord, lane_result_writer

INPUT_CHUNK_ROWS = 1000
# Chunks whose files are read ahead at once (BatchArtifacts.read_ahead): the one being worked on
# and the next. Finalize asks for this many; the reader keeps the reads of this many.
READ_AHEAD_CHUNKS = 2
JSONL = "application/jsonl"
_INPUT_LINE_HEAD = b'{"seq":'
_MODEL_HEAD = b',"model":"'


def input_chunk_key(batch_id: str, chunk: int) -> str:
    return f"batches/{batch_id}/input/{chunk:05d}.jsonl"


def result_chunk_key(batch_id: str, lane_key: str, chunk: int, writer: str | None = None) -> str:
    name = f"{chunk:05d}" if writer is None else f"{chunk:05d}.{writer}"
    return f"batches/{batch_id}/results/{lane_key}/{name}.jsonl"


def lane_result_key(batch_id: str, lane: LaneRecord, chunk: int) -> str:
    """The result file the lane's finished `chunk` counted (the one its record notes)."""
    return result_chunk_key(batch_id, lane.lane_key, chunk, lane_result_writer(lane, chunk))


def partial_chunk_key(batch_id: str, lane_key: str, chunk: int) -> str:
    return f"tmp/batches/{batch_id}/partial/{lane_key}/{chunk:05d}.jsonl"


def results_key(batch_id: str) -> str:
    return f"batches/{batch_id}/results.jsonl"


def errors_key(batch_id: str) -> str:
    return f"batches/{batch_id}/errors.jsonl"


def results_index_key(batch_id: str) -> str:
    """Byte offset in results.jsonl of each input chunk's first row (written by Finalize)."""
    return f"batches/{batch_id}/results.index.json"


def receipt_key(batch_id: str) -> str:
    return f"batches/{batch_id}/receipt.json"


def rendering_key(batch_id: str, role: str, body_format: str) -> str:
    """A compat batch's output or error file (`role`) rendered in one body format, written on
    its first read (services/compat/files.py): under the batch's prefix, so retention
    reclaims it with the batch's other bytes."""
    return f"batches/{batch_id}/compat/{role}.{body_format}.jsonl"


def batch_prefix(batch_id: str) -> str:
    """Every object of the batch lives under this prefix (retention GC lists it)."""
    return f"batches/{batch_id}/"


def input_line(seq: int, item: object) -> bytes:
    """One line of an input chunk: `{"seq":n,"model":"m","item":{...}}`, its seq and its item's
    model first, so that a reader that needs only the seqs (Finalize) or only one model's items
    (a lane) reads them off the lines' heads (`input_line_seq`, `input_line_head`). An item
    without a string model has no `model` on its line."""
    model = item.get("model") if isinstance(item, Mapping) else None
    head = {"seq": seq, "model": model} if isinstance(model, str) else {"seq": seq}
    line = {**head, "item": item}
    try:  # orjson: ~20x the json module's speed (intake writes every item of a batch)
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # an integer beyond 64 bits, a lone surrogate: the json module writes them
        return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def input_line_seq(line: bytes) -> int | None:
    """The seq of a line `input_line` wrote, read from its head without parsing the item;
    None for a line it did not write."""
    if not line.startswith(_INPUT_LINE_HEAD):
        return None
    start = len(_INPUT_LINE_HEAD)
    end = line.find(b",", start)
    digits = line[start:end]
    return int(digits) if end > start and digits.isdigit() else None


def input_line_head(line: bytes) -> tuple[int, str] | None:
    """The seq and the item's model of a line `input_line` wrote, read from its head; None for
    a line written otherwise, or whose model the head cannot spell plainly (an escape in it)."""
    seq = input_line_seq(line)
    if seq is None:
        return None
    start = line.find(b",") + len(_MODEL_HEAD)
    if not line.startswith(_MODEL_HEAD, start - len(_MODEL_HEAD)):
        return None
    end = line.find(b'"', start)
    model = line[start:end]
    if end < start or b"\\" in model:
        return None
    try:
        return (seq, model.decode("utf-8"))  # a JSON string without escapes is its own UTF-8
    except UnicodeDecodeError:
        return None


# A JSON object as the service writes it, an artifact line or an answer's row.
JsonObject = Mapping[str, Any]


def jsonl_line(value: JsonObject) -> bytes:
    """One artifact line: compact JSON, UTF-8, newline-terminated. Written by orjson (about
    five times the json module's speed; Finalize writes every row of a batch); what orjson
    refuses and the json module writes (an integer beyond 64 bits, a key that is not a
    string) falls back to the json module. Both read back to the same value."""
    try:
        return orjson.dumps(value, default=plain_json, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # orjson.JSONEncodeError is one
        return (
            json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=plain_json).encode() + b"\n"
        )


def plain_json(value: Any) -> Any:
    """Decimals from DynamoDB (unit prices, counts) as JSON numbers or strings."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
