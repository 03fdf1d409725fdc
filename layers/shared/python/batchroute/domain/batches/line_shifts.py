"""Where a file's items stand in it: item `i` is on line `i + shift`, the shift growing by one
at each blank or unparsed line before an item. Kept as the (index, shift) pairs where it
changes, so a file without blank lines costs one pair whatever its size, and bounded: past
MAX_LINE_SHIFTS changes the lines are unknown (None), never guessed.

The preflight keeps one as it reads a file (a group check then names the line of the item
it found, docs/routing.md), and a file's item profile stores it for the preflight that
stands in for reading the file (domain/batches/item_profile.py)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

MAX_LINE_SHIFTS: Final = 10_000
_ITEM_INDEX = re.compile(r"items\[(\d+)\]")

LineShiftsView = list[list[int | None]]


@dataclass
class LineShifts:
    known: list[tuple[int, int | None]] = field(default_factory=list)

    def note(self, index: int, line: int) -> None:
        """Item `index` is on `line` (1-based)."""
        shift = line - index
        if self.known and self.known[-1][1] in (shift, None):
            return
        self.known.append((index, shift if len(self.known) < MAX_LINE_SHIFTS else None))

    def line_of(self, index: int) -> int | None:
        at = bisect_right(self.known, index, key=lambda pair: pair[0]) - 1
        shift = self.known[at][1] if at >= 0 else None
        return index + shift if shift is not None else None

    def line_at(self, path: str | None) -> int | None:
        """The line of the item an issue path names (`items[3].input`), when known."""
        named = _ITEM_INDEX.match(path or "")
        return self.line_of(int(named.group(1))) if named is not None else None

    def to_json(self) -> LineShiftsView:
        return [[index, shift] for index, shift in self.known]

    @classmethod
    def from_json(cls, value: Sequence[Sequence[int | None]] | None) -> LineShifts:
        pairs = [(int(pair[0] or 0), None if pair[1] is None else int(pair[1])) for pair in value or ()]
        return cls(known=pairs)
