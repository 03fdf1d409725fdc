"""A batch's items in S3 as input chunks: `batches/<id>/input/<chunk:05d>.jsonl`,
INPUT_CHUNK_ROWS lines `{"seq":n,"model":"m","item":{...}}` each (`input_line`), written
as the items stream in (memory stays flat). Batch create and the workflow's intake both write them;
`abort()` deletes every chunk the writer wrote (a refused create leaves none of its items).

The writer also counts each chunk's items of every cacheable prompt prefix (at most
MAX_COUNTED_PREFIXES counts in all: past them it stops, and no group is grouped); the batch
keeps, beside `chunk_models`, those of the shared prefixes of each group split among lanes
(`with_prefix_counts`, docs/routing.md "Keeping a prefix on one lane")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from batchroute.domain.batches.artifact_keys import INPUT_CHUNK_ROWS, input_chunk_key, input_line
from batchroute.domain.routing.engine import RoutePlanView
from batchroute.domain.routing.lane_plan import with_prefix_counts
from batchroute.domain.routing.prompt_cache import ChatInput, item_prefix_key
from batchroute.services.batches.ports import ObjectStore, ObjectWriter

CHUNK_SIZE = INPUT_CHUNK_ROWS
MAX_COUNTED_PREFIXES = 65_536  # (chunk, model, prefix) counts held while the items stream in


@dataclass(eq=False)
class InputChunkWriter:
    """Appends items in input order; tracks how many items of each model every chunk holds."""

    objects: ObjectStore
    batch_id: str
    _: KW_ONLY
    chunk_size: int = CHUNK_SIZE
    count: int = field(default=0, init=False)
    chunk_models: list[dict[str, int]] = field(default_factory=list, init=False)
    # per chunk: (model, prefix key) -> its items there; None once past MAX_COUNTED_PREFIXES
    prefix_counts: list[dict[tuple[str, str], int]] | None = field(default_factory=list, init=False)
    # the preset versions the items used, in first-use order
    presets: dict[str, None] = field(default_factory=dict, init=False)
    _counted: int = field(default=0, init=False)
    _writer: ObjectWriter | None = field(default=None, init=False)

    def add(self, item: Mapping[str, Any]) -> None:
        if self.count % self.chunk_size == 0:
            self._close_current()
            chunk = self.count // self.chunk_size
            self._writer = self.objects.writer(
                input_chunk_key(self.batch_id, chunk), content_type="application/jsonl"
            )
            self.chunk_models.append({})
            if self.prefix_counts is not None:
                self.prefix_counts.append({})
        assert self._writer is not None
        self._writer.write(input_line(self.count, item))
        models = self.chunk_models[-1]
        model = str(item.get("model"))
        models[model] = models.get(model, 0) + 1
        self._count_prefix(model, item)
        preset = item.get("preset_version")
        if isinstance(preset, str):
            self.presets.setdefault(preset)
        self.count += 1

    def _count_prefix(self, model: str, item: ChatInput) -> None:
        if self.prefix_counts is None:
            return
        key = item_prefix_key(item)
        if key is None:
            return
        counts = self.prefix_counts[-1]
        counted = counts.get((model, key), 0)
        if not counted:
            self._counted += 1
            if self._counted > MAX_COUNTED_PREFIXES:
                self.prefix_counts = None
                return
        counts[model, key] = counted + 1

    def chunk_models_for(self, plan: RoutePlanView | None) -> list[dict[str, int]]:
        """`chunk_models` as the batch keeps it, routed by `plan`: with the shared-prefix
        counts of the groups it splits among lanes (lane_plan.with_prefix_counts)."""
        if self.prefix_counts is None:
            return self.chunk_models
        return with_prefix_counts(self.chunk_models, self.prefix_counts, plan)

    def close(self) -> None:
        self._close_current()

    def abort(self) -> None:
        """Discard every chunk of this writer: the open one's upload and the closed ones'
        objects, so a refused create or a failed intake leaves none of the items behind."""
        closed = self.chunk_count
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
            closed -= 1
        discard_chunks(self.objects, self.batch_id, closed)

    @property
    def chunk_count(self) -> int:
        return len(self.chunk_models)

    def _close_current(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def discard_chunks(objects: ObjectStore, batch_id: str, chunk_count: int) -> None:
    """Delete a batch's input chunks 0..chunk_count-1 (one already gone is not an error):
    their keys are known, so nothing is listed."""
    for chunk in range(chunk_count):
        objects.delete(input_chunk_key(batch_id, chunk))
