"""`batchroute submit --wait --out` against the local stack while the batch is canceled from
elsewhere (issue 29): the CLI follows the canceled batch until its dispatched work has ended
and it is settled, writes every result row, and exits 4 (docs/cli.md, "Canceled while
waiting"). Run as a process, as the `batchroute` script runs; the test polls with time-outs."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_batches_e2e import LLAMA, _agent_key, _item
from tests.e2e.test_cli_e2e import Cli

pytestmark = pytest.mark.e2e

ITEMS = 2500  # three input chunks: a cancel lands while the first ones run
DEADLINE_SECONDS = 180.0


def _until(what: str, check: Callable[[], bool], seconds: float = DEADLINE_SECONDS) -> None:
    """Poll `check()` (every 0.25 s) until it is true; fail after `seconds`."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > seconds:
            pytest.fail(f"{what} did not happen within {seconds} s")
        time.sleep(0.25)


def test_submit_wait_out_on_a_batch_canceled_elsewhere_writes_its_results_and_exits_4(
    api: httpx.Client, tmp_path: Path
) -> None:
    key = _agent_key(api, "cli-cancel")
    cli = Cli(str(api.base_url), key["Authorization"].removeprefix("Bearer "), tmp_path)
    source = tmp_path / "items.jsonl"
    rows = (_item(n, LLAMA, f"Question {n}: what is a lane?") for n in range(ITEMS))
    source.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    out = tmp_path / "out"
    # Given submit --wait --out following the batch in one shell
    with (tmp_path / "stdout.txt").open("w", encoding="utf-8") as stdout:  # the child keeps its own copy
        process = subprocess.Popen(
            [sys.executable, "-m", "batchroute_client.cli", "submit", str(source), "--wait", f"--out={out}"],
            env=cli.env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
        )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(process.stderr or []), daemon=True)
    reader.start()
    try:
        _until("the batch's creation", lambda: any(line.startswith("created batch_") for line in err))
        batch_id = next(line for line in err if line.startswith("created ")).split()[1]

        def running() -> bool:
            return bool(api.get(f"/v1/batches/{batch_id}", headers=key).json()["batch"]["state"] == "running")

        _until("running", running)
        # When another shell cancels it while it runs
        canceled = api.post(f"/v1/batches/{batch_id}/cancel", json={}, headers=key)
        assert canceled.status_code == 200, canceled.text
        in_flight = canceled.json()["batch"]["counts"]
        assert in_flight["running"] + in_flight["pending"] > 0, in_flight
        process.wait(timeout=DEADLINE_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    reader.join(timeout=10)
    stderr = "".join(err)
    # Then the CLI waited until the batch settled, wrote every result, and exits 4
    assert process.returncode == 4, stderr
    assert f"error: batch_ended: {batch_id} ended canceled" in stderr
    assert "results_not_ready" not in stderr and "Traceback" not in stderr
    written = [json.loads(line) for line in (out / f"{batch_id}.results.jsonl").read_text().splitlines()]
    assert len(written) == ITEMS
    canceled_rows = [r for r in written if r["status"] == "failed" and r["error"]["code"] == "canceled"]
    assert canceled_rows and len(canceled_rows) < ITEMS
    assert all(r["output"] for r in written if r["status"] == "completed")
    settled = api.get(f"/v1/batches/{batch_id}", headers=key).json()["batch"]
    assert settled["settled_at"] and settled["counts"]["canceled"] == len(canceled_rows)
    assert "canceled" in (tmp_path / "stdout.txt").read_text(encoding="utf-8")
    assert f"results written to {out / batch_id}" in stderr
