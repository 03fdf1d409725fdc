"""A large input file through the multipart signed-URL upload on the local stack, timed.

A fresh local stack (`bench.stack.Stack`, moto in its own process); an agent registers; a
JSONL file of `--gib` GiB (600-byte lines, the pipeline bench's items) goes up as the Python
client sends it (`batchroute_client.Client.files`): `POST /v1/files/uploads` (declared size:
a multipart plan of 64 MiB parts), each part PUT to its signed UploadPart URL in turn,
`POST /v1/files/{id}/complete` with the parts' ETags (joins the parts, checks the size, queues
the checks and answers `uploaded`), then polls `GET /v1/files/{id}` until the router's
`check_file` step has scanned every line and the file is `processed`. Prints the time of each
part and the service process's memory.

Run from the repository root: `.venv/bin/python -m bench.upload [--gib 1.0]`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
from batchroute_client import Client

from bench.items import pipeline_items, write_jsonl
from bench.machine import describe, load_average, proc_status
from bench.stack import Stack, register


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
        stack = Stack(workdir, plain=False, profile=False, storage=False)
        try:
            _, api_key = register(stack)
            base = f"http://127.0.0.1:{stack.port}"
            http = httpx.Client(base_url=base, timeout=600, trust_env=False)
            files = Client(api_key=api_key, base_url=base, http_client=http, timeout=600).files
            started = time.monotonic()
            signed = files.start_upload(filename=path.name, size=size)
            assert signed.multipart is not None, "the declared size is over the multipart threshold"
            etags = files.put_parts(signed.file.id, signed.multipart, path)
            parts_done = time.monotonic()
            confirmed = files.complete(signed.file.id, etags)
            confirm_done = time.monotonic()
            final = files.wait(signed.file.id, poll_interval=0.5, timeout=1800)
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
    plan = signed.multipart
    print(f"{size / 1e9:.2f} GB ({count} lines): {plan.part_count} parts of {plan.part_bytes // 2**20} MiB")
    print(f"parts PUT in {parts_done - started:.1f} s")
    print(
        f"POST /v1/files/{{id}}/complete answered {confirmed.status!r} in {confirm_done - parts_done:.2f} s"
        f" (service log: {complete[-1] if complete else float('nan'):.2f} s)"
    )
    print(
        f"{final.status} ({final.line_count} lines) {took - (confirm_done - started):.1f} s after confirm;"
        f" {took:.1f} s in all"
    )
    print(f"service process VmHWM {hwm / 1024**2:.0f} MiB; load average after: {load_average()}")
    return 0 if final.status == "processed" else 1


if __name__ == "__main__":
    raise SystemExit(main())
