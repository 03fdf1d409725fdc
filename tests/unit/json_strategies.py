"""Hypothesis strategies for JSON values as Python's json module reads and writes them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(*, non_finite: bool) -> st.SearchStrategy[Any]:
    """Nested JSON values; integers beyond 64 bits; with `non_finite`, NaN and infinities."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**80), max_value=2**80)
        | st.floats(allow_nan=non_finite, allow_infinity=non_finite)
        | st.text(),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
        ),
        max_leaves=20,
    )
