"""Reading a batch input file: native items, or the vendor batch format
(`{custom_id, method, url, body}` lines), converted line by line to native items as the
service's compat surface converts them (`batchroute/domain/compat/batches.py`, `read_row`):

- `url` `/v1/chat/completions` or `/v1/responses` -> operation `responses`, `/v1/embeddings`
  -> `embeddings`; any other url is refused, naming the line;
- a body speaks its endpoint's dialect: the other dialect's name of its conversation
  (`input` on `/v1/chat/completions`, `messages` on `/v1/responses`, `text` on
  `/v1/embeddings`) is refused as the service refuses it (docs/compat.md), although the
  native reader takes either name;
- `custom_id` -> `customer_item_id` (1-256 characters), `method` must be `POST`;
- `body.model` -> `model`, `body.preset` (optional, a preset's name or name@version, which
  may give the model) -> `preset`, the rest of `body` -> `input`.

A line is a vendor row when it has `custom_id`, `url` or `method`; any other JSON object is
passed on as a native item (the service's preflight checks its fields). The console sends
the same lines to the service, which converts them by this rule (docs/compat.md, "Vendor
lines in a native quote"); tests/fixtures/vendor_lines.jsonl checks both give the same items.
The converted items are written to a JSONL file, so a large input is never held in memory."""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from batchroute_client._core import json_bytes

ENDPOINT_OPERATIONS = {
    "/v1/chat/completions": "responses",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
}
# The other dialect's name of an endpoint's conversation, which the vendor's endpoint (and so
# the service's compat reader, `_FOREIGN_FIELDS`) refuses: a line the CLI converted would
# otherwise pass here and be refused by the console's upload of the same file.
FOREIGN_FIELDS = {
    "/v1/chat/completions": "input",
    "/v1/responses": "messages",
    "/v1/embeddings": "text",
}
MAX_CUSTOMER_ITEM_ID = 256
MAX_SHOWN_PROBLEMS = 5
VENDOR_FIELDS = ("custom_id", "url", "method")


class InputError(Exception):
    """The input file cannot be used (a usage error, exit 2); the message names the lines."""


_ITEM_PATH = re.compile(r"items\[(\d+)\]")


def item_index(path: str) -> int | None:
    """The index of the item an issue path names (`items[2].model`: 2); None for another path."""
    found = _ITEM_PATH.match(path)
    return int(found.group(1)) if found else None


@dataclass
class Converted:
    items: int = 0
    vendor_rows: int = 0
    bytes: int = 0
    models: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    name: str = ""  # the input file's name
    # each item's line in the input file (blank lines and a BOM skipped): 4 bytes an item
    lines: array[int] = field(default_factory=lambda: array("I"))

    def where(self, path: str) -> str | None:
        """The input file's `name:line` of the item an issue path names (`items[2].model`),
        as sent in order (inline or as the uploaded file); None for another path."""
        index = item_index(path)
        return f"{self.name}:{self.lines[index]}" if index is not None and index < len(self.lines) else None

    @property
    def format(self) -> str:
        if self.vendor_rows == 0:
            return "native"
        return "vendor" if self.vendor_rows == self.items else "mixed"


def vendor_item(row: dict[str, Any]) -> dict[str, Any]:
    """One vendor row as a native item; ValueError names the field at fault."""
    custom_id = row.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > MAX_CUSTOMER_ITEM_ID:
        raise ValueError(f"custom_id must be a string of 1-{MAX_CUSTOMER_ITEM_ID} characters")
    if row.get("method") != "POST":
        raise ValueError("method must be POST")
    url = row.get("url")
    operation = ENDPOINT_OPERATIONS.get(url) if isinstance(url, str) else None
    if operation is None:
        raise ValueError(f"url {url!r} is not supported: use one of {', '.join(ENDPOINT_OPERATIONS)}")
    body = row.get("body")
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    model = body.get("model")
    preset = body.get("preset")  # a preset may give the model (docs/presets.md)
    if preset is not None and not isinstance(preset, str):
        raise ValueError("body.preset must name a preset (name or name@version)")
    if (not isinstance(model, str) or not model) and (preset is None or model is not None):
        raise ValueError("body.model must name a model")
    foreign = FOREIGN_FIELDS[str(url)]  # url is one of ENDPOINT_OPERATIONS by now
    if foreign in body:
        raise ValueError(f"Unrecognized request argument supplied: {foreign} ({url})")
    item: dict[str, Any] = {
        "customer_item_id": custom_id,
        "operation": operation,
        "input": {key: value for key, value in body.items() if key not in ("model", "preset")},
    }
    if model is not None:
        item["model"] = model
    if preset is not None:
        item["preset"] = preset
    return item


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            yield number, line


def convert(path: Path, out: IO[bytes]) -> Converted:
    """Write every line of `path` as a native item (compact JSON) to `out`; raise InputError
    listing the first bad lines if any line is not usable."""
    summary = Converted(name=path.name)
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except (UnicodeDecodeError, ValueError) as exc:
            summary.problem_count += 1
            _note(summary, f"{path.name}:{number}: not JSON ({exc})")
            continue
        if not isinstance(parsed, dict):
            summary.problem_count += 1
            _note(summary, f"{path.name}:{number}: a line must be a JSON object")
            continue
        vendor = any(name in parsed for name in VENDOR_FIELDS)
        try:
            parsed = vendor_item(parsed) if vendor else parsed
            # the bytes the client sends (`json_bytes`), so the inline size check is exact
            encoded = json_bytes(parsed) + b"\n"
        except ValueError as exc:  # a vendor field at fault, or NaN/Infinity (not JSON)
            summary.problem_count += 1
            _note(summary, f"{path.name}:{number}: {exc}")
            continue
        summary.vendor_rows += int(vendor)
        summary.items += 1
        summary.lines.append(number)
        if isinstance(parsed.get("model"), str):
            summary.models.add(parsed["model"])
        summary.bytes += len(encoded)
        out.write(encoded)
    if summary.problem_count:
        more = summary.problem_count - len(summary.problems)
        tail = f"\n... and {more} more" if more else ""
        raise InputError(
            f"{path.name}: {summary.problem_count} unusable line(s):\n" + "\n".join(summary.problems) + tail
        )
    if summary.items == 0:
        raise InputError(f"{path.name} has no items")
    return summary


def _note(summary: Converted, problem: str) -> None:
    if len(summary.problems) < MAX_SHOWN_PROBLEMS:
        summary.problems.append(problem)


def read_items(out: IO[bytes]) -> list[dict[str, Any]]:
    out.seek(0)
    return [json.loads(line) for line in out if line.strip()]
