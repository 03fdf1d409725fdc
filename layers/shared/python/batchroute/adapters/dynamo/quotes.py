"""Quote snapshots in the batches table: `QUOTE#<id>`/`META`, kept a day past expiry (TTL).

A quote is a versioned, price-locked snapshot: the batch create call reads it back and
reserves credits against exactly these lanes and prices.
"""

from __future__ import annotations

from batchroute.adapters.dynamo.store import DynamoStore
from batchroute.clock import epoch_seconds
from batchroute.domain.batches.quote_snapshot import QuoteSnapshot

_TTL_GRACE_SECONDS = 24 * 3600


class QuoteStore(DynamoStore):
    def put(self, snapshot: QuoteSnapshot) -> None:
        """Store a snapshot once; the body is kept as JSON text (lanes nest deeply, and it is read whole)."""
        item = {
            "pk": f"QUOTE#{snapshot.quote_id}",
            "sk": "META",
            "kind": "quote",
            "quote_id": snapshot.quote_id,
            "org_id": snapshot.org_id,
            "expires_at": snapshot.expires_at,
            "version": snapshot.version,
            "snapshot": snapshot.to_json(),
            "ttl": epoch_seconds(snapshot.expires_at) + _TTL_GRACE_SECONDS,
        }
        self.insert(item)

    def get(self, quote_id: str) -> QuoteSnapshot | None:
        key = {"pk": {"S": f"QUOTE#{quote_id}"}, "sk": {"S": "META"}}
        return self.read_at(key, lambda item: QuoteSnapshot.from_json(item["snapshot"]))
