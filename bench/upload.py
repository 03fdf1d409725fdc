"""A large input file through the signed-URL upload path on the local stack, timed.

A fresh local stack (`bench.stack.Stack`, moto in its own process); an agent registers; a
JSONL file of `--gib` GiB (600-byte lines, the pipeline bench's items) goes up as a client
sends it: `POST /v1/files/uploads` (declared size), one PUT of the bytes to the signed URL,
`POST /v1/files/{id}/complete` (the service checks the size, streams and scans every line,
copies the object to the file's key). Prints the time of each part and the service process's
memory.

Run from the repository root: `.venv/bin/python -m bench.upload [--gib 1.0]`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.items import pipeline_items, write_jsonl
from bench.machine import describe, load_average, proc_status
from bench.stack import Stack, register, upload


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gib", type=float, default=1.0, help="file size in GiB")
    parser.add_argument("--item-bytes", type=int, default=600, help="approximate bytes per JSONL line")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average before: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-upload-") as folder:
        path = Path(folder) / "items.jsonl"
        count = int(args.gib * 1024**3 / args.item_bytes)
        size = write_jsonl(path, pipeline_items(count, args.item_bytes))
        workdir = Path(folder) / "stack"
        workdir.mkdir()
        stack = Stack(workdir, plain=False, split=True, profile=False, storage=False)
        try:
            _, api_key = register(stack)
            started = time.monotonic()
            file_id = upload(stack, {"Authorization": f"Bearer {api_key}"}, path, size)
            took = time.monotonic() - started
            hwm = int(proc_status(stack.process.pid).get("VmHWM", 0))
            log = stack.log_file.read_text(encoding="utf-8", errors="replace")
            complete = [
                json.loads(line)["duration_ms"] / 1000
                for line in log.splitlines()
                if '"path":"/v1/files/' in line and "/complete" in line and "duration_ms" in line
            ]
        finally:
            stack.stop()
    print(f"{size / 1e9:.2f} GB ({count} lines) uploaded and completed as {file_id} in {took:.1f} s")
    print(f"of which POST /v1/files/{{id}}/complete: {complete[-1] if complete else float('nan'):.1f} s")
    print(f"service process VmHWM {hwm / 1024**2:.0f} MiB; load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
