"""Batch create WITHOUT a quote over a large input file, from the file's item profile and by
streaming the file, and what building the profile adds to the file's checks (issue #18,
point 1; docs/files.md, Item profile).

Runs on moto in-process like bench/quote.py (same stack, same signed-URL upload, same items:
`quote_items`, three models, some items with tools or a schema). Steps:
1. the file's checks (confirm: every line parsed, hashed, counted) timed with and without
   the item profile being built (the same bytes uploaded twice; bench-only switch);
2. `POST /v1/batches` `{"input_file_id"}` as `BatchService.create` (wired as the API wires it)
   timed `--runs` times over the profiled file ("after");
3. the same over the same file with its profile removed from the record, i.e. a file checked
   before profiles existed: the internal quote streams the file, as every create without a
   quote did before ("before");
and checks both reserve the same amount for the same count and digest.

Run from the repository root with
`.venv/bin/python -m bench.file_profile [--items 100000] [--item-bytes 600] [--runs 3]`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from moto import mock_aws

from batchroute.adapters.aws import reset_clients
from batchroute.adapters.dynamo.files import FileStore
from batchroute.config import get_settings
from batchroute.services.batches import files as files_module
from batchroute.services.batches.commands import CreateBatch
from batchroute.services.batches.create import BatchService
from batchroute.wiring import wiring_for
from bench.items import quote_items, write_jsonl
from bench.machine import describe, load_average
from bench.quote import Stack, heartbeat_lanes, start_stack, upload


def confirm_without_profile(stack: Stack, path: Path, size: int) -> float:
    """The checks as they were before profiles: the same upload with the builder switched off."""
    real = files_module._Intake

    class NoProfile(real):  # type: ignore[misc,valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "profile": False})

    setattr(files_module, "_Intake", NoProfile)  # noqa: B010
    try:
        return upload(stack, path, size).confirm_seconds
    finally:
        setattr(files_module, "_Intake", real)  # noqa: B010


def create_once(
    batches: BatchService, stack: Stack, body: dict[str, Any], key: str
) -> tuple[float, dict[str, Any]]:
    heartbeat_lanes()
    started = time.perf_counter()
    answer = batches.create(stack.principal, CreateBatch.parse(body), key)
    seconds = time.perf_counter() - started
    if answer.status_code != 202:
        raise SystemExit(f"create: {answer.status_code} {answer.body[:2000]!r}")
    record = batches.records.get(key_batch_id(answer.body))
    assert record is not None
    return seconds, {
        "reserved_micros": record.reserved_micros,
        "item_count": record.intake.item_count if record.intake else None,
        "digest": record.intake.digest if record.intake else None,
    }


def key_batch_id(body: bytes) -> str:
    return str(json.loads(body)["batch"]["id"])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--item-bytes", type=int, default=600, help="approximate bytes per JSONL line")
    parser.add_argument("--runs", type=int, default=3, help="timed creates per path (median reported)")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"load average before: {load_average()}")
    with mock_aws(), tempfile.TemporaryDirectory() as folder:
        stack = start_stack()
        batches = wiring_for().batches()  # wired once, as a warm API Lambda has it
        warm = {"items": list(quote_items(1, args.item_bytes))}
        stack.quotes.quote_model(stack.principal, warm)  # warm-up: imports, catalog, clients
        create_once(batches, stack, warm, "bench-warm-up")
        path = Path(folder) / "items.jsonl"
        size = write_jsonl(path, quote_items(args.items, args.item_bytes))
        plain_confirm = confirm_without_profile(stack, path, size)
        uploaded = upload(stack, path, size)
        if uploaded.item_count != args.items:
            raise SystemExit(f"the file holds {uploaded.item_count} items, not {args.items}")
        store = FileStore(get_settings().table_name("batches"))
        record = store.get(uploaded.file_id)
        assert record is not None and record.item_profile is not None
        profile_bytes = len(record.item_profile)
        body = {"input_file_id": uploaded.file_id}
        create_once(batches, stack, body, "bench-warm-up-file")  # the file path's first call
        after = [create_once(batches, stack, body, f"bench-profiled-{n:04d}") for n in range(args.runs)]
        store.replace(replace(record, item_profile=None), expected_status="processed")
        before = [create_once(batches, stack, body, f"bench-streamed-{n:04d}") for n in range(args.runs)]
        reset_clients()
    print(f"load average after:  {load_average()}")
    same = {str(sorted(r.items())) for _, r in after + before}
    after_s = statistics.median(s for s, _ in after)
    before_s = statistics.median(s for s, _ in before)
    print()
    print(f"{args.items} items, {size / 1e6:.1f} MB, profile {profile_bytes} bytes on the file record")
    with_it = uploaded.confirm_seconds
    print(f"checks (confirm): {plain_confirm:.2f} s without the profile, {with_it:.2f} s with it")
    print(
        f"create without quote_id: streamed (before) {before_s:.2f} s, "
        f"from the profile (after) {after_s:.2f} s "
        f"(median of {args.runs}; runs {', '.join(f'{s:.2f}' for s, _ in before)} / "
        f"{', '.join(f'{s:.2f}' for s, _ in after)})"
    )
    print(f"same reservation, count and digest on both paths: {len(same) == 1}")
    return 0 if len(same) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
