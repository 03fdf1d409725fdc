"""A batch's items in S3 as input chunks: `batches/<id>/input/<chunk:05d>.jsonl`,
INPUT_CHUNK_ROWS lines `{"seq": n, "item": {...}}` each, written as the items stream in
(memory stays flat). Batch create and the workflow's intake both write them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from batchroute.domain.batches.artifact_keys import INPUT_CHUNK_ROWS, input_chunk_key
from batchroute.services.batches.ports import ObjectStore, ObjectWriter

CHUNK_SIZE = INPUT_CHUNK_ROWS


class InputChunkWriter:
    """Appends items in input order; tracks how many items of each model every chunk holds."""

    def __init__(self, objects: ObjectStore, batch_id: str, *, chunk_size: int = CHUNK_SIZE) -> None:
        self.objects = objects
        self.batch_id = batch_id
        self.chunk_size = chunk_size
        self.count = 0
        self.chunk_models: list[dict[str, int]] = []
        self.presets: dict[str, None] = {}  # the preset versions the items used, in first-use order
        self._writer: ObjectWriter | None = None

    def add(self, item: Mapping[str, Any]) -> None:
        if self.count % self.chunk_size == 0:
            self._close_current()
            chunk = self.count // self.chunk_size
            self._writer = self.objects.writer(
                input_chunk_key(self.batch_id, chunk), content_type="application/jsonl"
            )
            self.chunk_models.append({})
        assert self._writer is not None
        self._writer.write(
            json.dumps({"seq": self.count, "item": item}, separators=(",", ":")).encode() + b"\n"
        )
        models = self.chunk_models[-1]
        model = str(item.get("model"))
        models[model] = models.get(model, 0) + 1
        preset = item.get("preset_version")
        if isinstance(preset, str):
            self.presets.setdefault(preset)
        self.count += 1

    def close(self) -> None:
        self._close_current()

    def abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    @property
    def chunk_count(self) -> int:
        return len(self.chunk_models)

    def _close_current(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
