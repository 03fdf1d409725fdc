"""IdHashes: "could an id repeat?" in 8 bytes an id (domain/batches/item_ids.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from batchroute.domain.batches.item_ids import IdHashes


def _hashes(ids: list[str]) -> IdHashes:
    kept = IdHashes()
    for customer_item_id in ids:
        kept.add(customer_item_id)
    return kept


@given(st.lists(st.text(max_size=40), max_size=300))
def test_may_repeat_is_exact_when_it_says_no(ids: list[str]) -> None:
    # Equal ids hash alike, so a repeat is never missed; distinct ids say "no" unless hashes collide
    kept = _hashes(ids)
    repeated = len(set(ids)) != len(ids)
    assert kept.may_repeat() or not repeated
    if not repeated:
        assert kept.may_repeat() == (len({hash(i) for i in ids}) != len(ids))
    assert len(kept) == len(ids)


def test_a_million_ids_cost_about_eight_bytes_each() -> None:
    # Given a million distinct ids
    kept = _hashes([f"item-{n:07d}" for n in range(1_000_000)])
    # Then no id repeats, and what is kept is the typed arrays' 8 bytes an id (+ growth slack)
    assert not kept.may_repeat()
    buffers = sum(bucket.buffer_info()[1] * bucket.itemsize for bucket in kept._buckets)
    assert buffers == 8 * 1_000_000
    allocated = sum(bucket.__sizeof__() for bucket in kept._buckets)
    assert allocated < 10 * 1_000_000
