"""A quote's inline items kept in S3 (artifacts bucket, `tmp/` expires in 2 days), so a batch
can be created from the quote alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from batchroute.adapters.s3_objects import S3Objects, write_whole


@dataclass(eq=False)
class QuoteItemSink:
    objects: S3Objects

    def save(self, quote_id: str, lines: Iterator[bytes]) -> str:
        key = f"tmp/quotes/{quote_id}/items.jsonl"
        write_whole(self.objects.writer(key, content_type="application/jsonl"), lines)
        return key
