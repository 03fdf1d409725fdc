"""Vendor batch lines read by the native quote and batch (docs/compat.md, "Vendor lines in a
native quote"): the console and the CLI take the vendor's batch format too.

A file uploaded to `POST /v1/files` with purpose `batch` may hold vendor lines
`{custom_id, method, url, body}`. Read as a native input file, each line that has
`custom_id`, `url` or `method` becomes a native item by the compat surface's one mapping
(`domain/compat/batches.py: read_row`) as it streams; any other object is a native item as
it is (the CLI's rule, `batchroute_client/cli/inputs.py`). A vendor line that cannot be
converted is a `jsonl_shape` preflight error on its line, naming the vendor field, so the
quote lists every bad line as it lists native ones. A `batch_input` file is read as before.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import Any, Final

from batchroute.domain.batches.files import DEFAULT_PURPOSE, FileRecord
from batchroute.domain.batches.item_profile import ItemProfile
from batchroute.domain.batches.jsonl import LineError, ParsedLine
from batchroute.domain.batches.preflight import ACTIONS, Issue
from batchroute.domain.compat.batches import RowProblem, read_row
from batchroute.services.batches.files import FileService

VENDOR_FIELDS: Final = ("custom_id", "url", "method")


def is_vendor_line(parsed: Container[str]) -> bool:
    return any(name in parsed for name in VENDOR_FIELDS)


@dataclass(eq=False)
class VendorLineFiles:
    """The native quote's FileItems (services/batches/quotes.py): `files`, with the vendor
    lines of a `batch` file converted to native items."""

    files: FileService

    def open_items(self, org_id: str, file_id: str) -> Iterator[tuple[int, Any]]:
        """`(line, item | LineError | Issue)`: an Issue is a vendor line that is not a request."""
        lines = self.files.open_items(org_id, file_id)
        if self.files.file(org_id, file_id).purpose == DEFAULT_PURPOSE:
            return lines
        return as_items(lines)

    def file_ready(self, org_id: str, file_id: str) -> FileRecord:
        return self.files.file_ready(org_id, file_id)

    def item_profile(self, org_id: str, file_id: str) -> ItemProfile | None:
        """A `batch` file has none (its lines are converted as they are read)."""
        if self.files.file_ready(org_id, file_id).purpose != DEFAULT_PURPOSE:
            return None
        return self.files.item_profile(org_id, file_id)


def as_items(lines: Iterator[ParsedLine]) -> Iterator[tuple[int, Any]]:
    """Each parsed line as the native item it stands for (vendor lines converted)."""
    for line, parsed in lines:
        if isinstance(parsed, LineError) or not is_vendor_line(parsed):
            yield line, parsed
            continue
        row = read_row(line, parsed)
        yield line, _issue(row) if isinstance(row, RowProblem) else row.item


def _issue(problem: RowProblem) -> Issue:
    code = "invalid_field"
    return Issue("jsonl_shape", code, problem.message, ACTIONS[code], path=problem.param, line=problem.line)
