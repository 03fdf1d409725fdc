"""Batch metadata (domain/batches/metadata.py): string, number and boolean values are kept as
text; a refused value is named with what it may be."""

from __future__ import annotations

from typing import Any

import pytest

from batchroute.domain.batches.metadata import parse_metadata
from batchroute.errors import InvalidRequest


def test_strings_numbers_and_booleans_are_kept_as_text() -> None:
    assert parse_metadata({"s": "a", "n": 5, "f": 1.5, "b": True}) == {
        "s": "a",
        "n": "5",
        "f": "1.5",
        "b": "true",
    }


@pytest.mark.parametrize("value", [{"a": 1}, None, [1]])
def test_another_value_is_refused_naming_what_it_may_be(value: Any) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_metadata({"k": value})
    assert refused.value.details == {"field": "metadata.k"}
    assert refused.value.message == "metadata.k must be a string, a number or a boolean (kept as text)."
