"""A batch's objects in the artifacts bucket, as JSON Lines streams (docs/batches.md):

- `batches/<id>/input/<chunk:05d>.jsonl`: input chunks (written by batch create);
- `batches/<id>/results/<lane_key>/<chunk:05d>.<writer>.jsonl`: one lane's results for one
  chunk, the file its record notes;
- `batches/<id>/results.jsonl`, `errors.jsonl`, `receipt.json`: the final artifacts, and
  `results.index.json` (each chunk's byte offset in results.jsonl, for results pages);
- `tmp/batches/<id>/partial/<lane_key>/<chunk:05d>.jsonl`: results of a chunk a lane had
  to leave half done (its invocation ran out of time); the bucket's `tmp/` rule expires them.

Reads stream (never a whole object), but for what `read_ahead` asked for: one chunk's input
and result files (~2 MB), read whole in a background thread while the caller works on the
chunk before (Finalize: its merge and the S3 reads then overlap). Writes go through the
multipart ObjectWriter.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from threading import Lock
from typing import Any, cast

from batchroute.adapters.s3_objects import ObjectWriter, S3Objects, write_whole
from batchroute.domain.batches.artifact_keys import JSONL as JSONL
from batchroute.domain.batches.artifact_keys import (
    READ_AHEAD_CHUNKS,
    input_chunk_key,
    input_line_head,
    input_line_seq,
    plain_json,
)
from batchroute.domain.batches.artifact_keys import batch_prefix as batch_prefix
from batchroute.domain.batches.artifact_keys import errors_key as errors_key
from batchroute.domain.batches.artifact_keys import jsonl_line as jsonl_line
from batchroute.domain.batches.artifact_keys import lane_result_key as lane_result_key
from batchroute.domain.batches.artifact_keys import partial_chunk_key as partial_chunk_key
from batchroute.domain.batches.artifact_keys import receipt_key as receipt_key
from batchroute.domain.batches.artifact_keys import result_chunk_key as result_chunk_key
from batchroute.domain.batches.artifact_keys import results_index_key as results_index_key
from batchroute.domain.batches.artifact_keys import results_key as results_key
from batchroute.domain.batches.jsonl import CorruptArtifact as CorruptArtifact
from batchroute.domain.batches.jsonl import LineParser, LineValue, artifact_lines, parse_line
from batchroute.domain.routing.items import InputLine
from batchroute.domain.routing.lane_plan import LaneRecord
from batchroute.domain.workflow.results import ResultLine


def _of_model(model: str, number: int, raw: bytes) -> LineValue | None:
    """An input line of `model`, parsed; one whose head names another model, dropped unparsed."""
    head = input_line_head(raw)
    return None if head is not None and head[1] != model else parse_line(number, raw)


def _input_seq(number: int, raw: bytes) -> LineValue:
    """An input line's `{"seq"}` only, from its head; a line written otherwise, parsed whole."""
    seq = input_line_seq(raw)
    return {"seq": seq} if seq is not None else parse_line(number, raw)


@dataclass(eq=False)
class JsonlWriter:
    writer: ObjectWriter
    lines: int = field(default=0, init=False)

    def write(self, value: Mapping[str, Any]) -> None:
        self.writer.write(jsonl_line(value))
        self.lines += 1

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.abort()


@dataclass(eq=False)
class BatchArtifacts:
    objects: S3Objects
    _ahead: OrderedDict[tuple[str, int], dict[str, Future[bytes]]] = field(
        default_factory=OrderedDict, init=False
    )
    _ahead_lock: Lock = field(default_factory=Lock, init=False)
    _reader: ThreadPoolExecutor | None = field(default=None, init=False)

    # -- reading ahead ---------------------------------------------------------------------------
    def read_ahead(self, batch_id: str, chunk: int, lanes: Sequence[LaneRecord]) -> None:
        """Starts reading a chunk's input and these lanes' result files whole, in the
        background; the next `input_seqs`, `input_lines` or `result_lines` of each is served
        from that read (once), and fails as the read did. Asking again for a chunk already
        being read does nothing."""
        keys = [(input_chunk_key(batch_id, chunk), False)]
        keys += [(lane_result_key(batch_id, lane, chunk), True) for lane in lanes]
        with self._ahead_lock:
            if (batch_id, chunk) in self._ahead:
                return
            if self._reader is None:
                self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead")
            reads = {key: self._reader.submit(self._whole, key, missing_ok) for key, missing_ok in keys}
            self._ahead[(batch_id, chunk)] = reads
            # Reads of an older chunk that nobody took (the caller stopped early) are dropped.
            while len(self._ahead) > READ_AHEAD_CHUNKS:
                for stale in self._ahead.popitem(last=False)[1].values():
                    stale.cancel()

    def _whole(self, key: str, missing_ok: bool) -> bytes:
        return b"".join(self.objects.chunks(key, missing_ok=missing_ok))

    def _read_ahead(self, key: str) -> Future[bytes] | None:
        with self._ahead_lock:
            for reads in self._ahead.values():
                if (read := reads.pop(key, None)) is not None:
                    return read
        return None

    def _chunks(self, key: str, *, missing_ok: bool) -> Iterator[bytes]:
        read = self._read_ahead(key)
        if read is None:
            yield from self.objects.chunks(key, missing_ok=missing_ok)
        else:
            yield read.result()

    # -- reads -----------------------------------------------------------------------------------
    def lines(
        self, key: str, *, missing_ok: bool = False, parse: LineParser | None = None
    ) -> Iterator[dict[str, Any]]:
        """The JSON objects of a JSONL object, streamed; a missing object is empty when
        `missing_ok`. The service wrote it: its lines are held to the artifact cap (a result
        row holds a provider's whole answer), not the customer-input one, and a line that does
        not read raises CorruptArtifact."""
        return artifact_lines(self._chunks(key, missing_ok=missing_ok), key=key, parse=parse)

    def input_lines(self, batch_id: str, chunk: int, *, model: str | None = None) -> Iterator[InputLine]:
        """`{"seq", "item"}` lines of an input chunk, in seq order (as batch create or Intake
        wrote them, items the preflight read). With `model`, that model's lines only: a line
        whose head names another model is dropped unparsed (a lane reads only its model's)."""
        parse = None if model is None else partial(_of_model, model)
        return cast("Iterator[InputLine]", self.lines(input_chunk_key(batch_id, chunk), parse=parse))

    def input_seqs(self, batch_id: str, chunk: int) -> Iterator[int]:
        """The seqs of an input chunk, in order, read off the lines' heads: the items are not
        parsed (Finalize needs only the seqs of items that have a result)."""
        for line in self.lines(input_chunk_key(batch_id, chunk), parse=_input_seq):
            yield int(line["seq"])

    def result_lines(self, batch_id: str, lane: LaneRecord, chunk: int) -> Iterator[ResultLine]:
        """A lane's result chunk, as the lane runner wrote it (`ResultLine`s): the file its
        record notes."""
        return cast(
            "Iterator[ResultLine]", self.lines(lane_result_key(batch_id, lane, chunk), missing_ok=True)
        )

    def partial_lines(self, batch_id: str, lane_key: str, chunk: int) -> Iterator[ResultLine]:
        return cast(
            "Iterator[ResultLine]", self.lines(partial_chunk_key(batch_id, lane_key, chunk), missing_ok=True)
        )

    def read_json(self, key: str) -> dict[str, Any] | None:
        """A JSON object (a receipt), or None where there is none: one GET."""
        data = b"".join(self.objects.chunks(key, missing_ok=True))
        if not data:
            return None
        value = json.loads(data)
        return value if isinstance(value, dict) else None

    # -- writes ----------------------------------------------------------------------------------
    def jsonl_writer(self, key: str) -> JsonlWriter:
        return JsonlWriter(self.objects.writer(key, content_type=JSONL))

    def write_lines(self, key: str, lines: Iterable[Mapping[str, Any]]) -> int:
        writer = self.jsonl_writer(key)
        write_whole(writer, lines)
        return writer.lines

    def write_json(self, key: str, value: Mapping[str, Any]) -> None:
        writer = self.objects.writer(key, content_type="application/json")
        writer.write(json.dumps(value, separators=(",", ":"), default=plain_json).encode())
        writer.close()

    def delete(self, key: str) -> None:
        self.objects.delete(key)
