"""`customer_item_id` uniqueness over a batch in 8 bytes an item (issue #18: memory flat in N).

The preflight must know whether two items of a batch share a `customer_item_id`, and name the
first item when they do. Keeping every id seen (a dict of strings) costs ~130 bytes an item:
130 MB for a million-item file, in the quote, in batch create and again in the Intake step.

`IdHashes` keeps only each id's 64-bit hash, in 256 typed arrays (8 bytes an id, no Python
object per id). It cannot name the first item of a duplicate, and two different ids may share a
hash, so it answers one question, after the last item: could any id repeat? Equal ids have
equal hashes, so "no" is exact. "Maybe" (a real duplicate, or a collision: about 3 in 10^8 for
a million ids) sends the caller back over the items with the exact check (`Preflight` with a
dict), which finds and names the duplicates as before. Only a source that can be read twice (an
input file) is checked this way; inline items, already in memory, keep the dict.

`hash()` of a str is salted per process; the hashes never leave the process.
"""

from __future__ import annotations

from array import array
from typing import Final

_BUCKETS: Final = 256


class IdHashes:
    __slots__ = ("_buckets",)

    def __init__(self) -> None:
        self._buckets = [array("q") for _ in range(_BUCKETS)]

    def add(self, customer_item_id: str) -> None:
        value = hash(customer_item_id)
        self._buckets[value & (_BUCKETS - 1)].append(value)

    def __len__(self) -> int:
        return sum(len(bucket) for bucket in self._buckets)

    def may_repeat(self) -> bool:
        """True when two ids added share a hash (a repeated id, or rarely a collision). One
        bucket's set at a time: the peak is a set of ~1/256 of the ids."""
        return any(len(set(bucket)) != len(bucket) for bucket in self._buckets)
