"""The `batchroute` CLI against the local stack (`make run`'s code), run as a process
(`python -m batchroute_client.cli`, what the `batchroute` script runs): a vendor batch JSONL
file submitted with --wait --out, results, receipt, status/list/items, retry, the signed-URL
upload, a bad key, the console's URL as the base URL and an invalid query value (exit 1, no
traceback, the API's details shown), streamed chat, and login storing a checked key."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from batchroute_client.cli import main
from batchroute_client.cli.runtime import Runtime

from batchroute_tools.local.console import CONSOLE_DIST
from tests.e2e.test_batches_e2e import LLAMA, MINI, _agent_key

pytestmark = pytest.mark.e2e


def vendor_rows() -> list[dict[str, Any]]:
    questions = ["What is a lane?", "What is a quote? [simulate:fail]", "What is a receipt?"]
    rows = [
        {
            "custom_id": f"q-{n}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": LLAMA, "messages": [{"role": "user", "content": text}], "max_tokens": 24},
        }
        for n, text in enumerate(questions)
    ]
    rows.append(
        {
            "custom_id": "r-0",
            "method": "POST",
            "url": "/v1/responses",
            # the Responses API's own body (`messages` there is refused, as OpenAI refuses it)
            "body": {"model": MINI, "input": "Hello", "max_output_tokens": 24},
        }
    )
    return rows


class Cli:
    def __init__(self, base_url: str, key: str, home: Path) -> None:
        self.env = {
            **os.environ,
            "BATCHROUTE_BASE_URL": base_url,
            "BATCHROUTE_API_KEY": key,
            "BATCHROUTE_CONFIG": str(home / "config.toml"),
            "COLUMNS": "200",
        }

    def __call__(self, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, "BATCHROUTE_API_KEY": key} if key else self.env
        return subprocess.run(
            [sys.executable, "-m", "batchroute_client.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture
def cli(api: httpx.Client, tmp_path: Path) -> Cli:
    key = _agent_key(api, "cli")["Authorization"].removeprefix("Bearer ")
    return Cli(str(api.base_url), key, tmp_path)


def test_a_vendor_file_is_submitted_followed_and_its_results_and_receipt_read(
    cli: Cli, tmp_path: Path
) -> None:
    source = tmp_path / "openai-batch.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in vendor_rows()), encoding="utf-8")
    done = cli(
        "submit", str(source), "--wait", "--poll-interval", "0.25", "--out", str(tmp_path / "out"), "--json"
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    batch_id = document["batch"]["id"]
    assert document["batch"]["state"] == "completed" and document["input"]["format"] == "vendor"
    assert document["batch"]["counts"]["completed"] == 3 and document["batch"]["counts"]["failed"] == 1
    rows = [json.loads(line) for line in Path(document["results_file"]).read_text().splitlines()]
    assert [r["customer_item_id"] for r in rows] == ["q-0", "q-1", "q-2", "r-0"]
    assert rows[1]["status"] == "failed" and rows[0]["output"]

    results = cli("results", batch_id)
    assert results.returncode == 0 and len(results.stdout.splitlines()) == 4
    artifact = cli("results", batch_id, "--out", str(tmp_path / "artifact.jsonl"), "--artifact")
    assert artifact.returncode == 0, artifact.stderr
    assert len((tmp_path / "artifact.jsonl").read_text().splitlines()) == 4

    receipt = cli("receipt", batch_id, "--json")
    assert receipt.returncode == 0, receipt.stderr
    assert {lane["model"] for lane in json.loads(receipt.stdout)["provider_lanes"]} == {LLAMA, MINI}
    table = cli("receipt", batch_id)
    assert "Lanes chosen" in table.stdout and "Lanes rejected" in table.stdout and "outranked" in table.stdout

    status = cli("status", batch_id)
    assert (
        status.returncode == 0 and "completed" in status.stdout and "3 completed, 1 failed" in status.stdout
    )
    listed = cli("list", "--state", "completed", "--json")
    assert batch_id in {json.loads(line)["id"] for line in listed.stdout.splitlines()}
    failed = cli("items", batch_id, "--status", "failed", "--json")
    assert [json.loads(line)["customer_item_id"] for line in failed.stdout.splitlines()] == ["q-1"]

    retried = cli("retry", batch_id, "--json")
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)["retry_item_count"] == 1
    cancel = cli("cancel", batch_id)
    assert cancel.returncode == 1 and cancel.stderr.startswith("error: batch_not_cancellable: ")
    assert "Traceback" not in cancel.stderr


def test_a_file_goes_through_the_signed_url_upload_and_is_quoted_by_file_id(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "items.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in vendor_rows()), encoding="utf-8")
    quoted = cli("quote", str(source), "--upload", "signed", "--json")
    assert quoted.returncode == 0, quoted.stderr
    document = json.loads(quoted.stdout)
    assert document["input"]["input_file_id"].startswith("file_") and document["quote"]["item_count"] == 4
    shown = cli("quote", str(source), "--upload", "direct")
    assert shown.returncode == 0 and "Lanes" in shown.stdout and "edge-" in shown.stdout


def test_errors_exit_with_clear_codes_and_no_traceback(cli: Cli, tmp_path: Path) -> None:
    bad_key = cli("status", "batch_01nothing", key="sk-not-a-real-key-000000")
    assert bad_key.returncode == 1
    assert bad_key.stderr.startswith("error: ") and "Traceback" not in bad_key.stderr
    assert "sk-not-a-real-key-000000" not in bad_key.stderr + bad_key.stdout
    missing = cli("status", "batch_01nothing")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps({**vendor_rows()[0], "url": "/v1/images"}) + "\n", encoding="utf-8")
    bad_file = cli("submit", str(source))
    assert bad_file.returncode == 2 and "bad.jsonl:1: url '/v1/images' is not supported" in bad_file.stderr
    unreachable = cli("--base-url", "http://127.0.0.1:9", "usage")
    assert unreachable.returncode == 3 and "network_error" in unreachable.stderr
    # The console's URL as the base URL: its index.html (200, text/html), one error line.
    console = f"{cli.env['BATCHROUTE_BASE_URL']}/console"
    html = cli("--base-url", console, "usage")
    assert html.returncode == 1 and "Traceback" not in html.stderr and "JSONDecodeError" not in html.stderr
    if (CONSOLE_DIST / "index.html").is_file():
        assert html.stderr.startswith(
            f"error: unexpected_response: GET {console}/v1/usage answered HTTP 200 (text/html"
        )
    # An invalid query value: the API's explanation, not only "The request is invalid."
    invalid = cli("items", "batch_01nothing", "--status", "canceled")
    assert invalid.returncode == 1 and invalid.stderr.startswith(
        "error: invalid_request: The request is invalid.\n"
    )
    assert "  - query.status: " in invalid.stderr


def test_chat_streams_the_answer(cli: Cli) -> None:
    answer = cli("chat", LLAMA, "Say hello", "--max-tokens", "16")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() and answer.stdout.endswith("\n")
    usage = cli("usage", "--json")
    assert usage.returncode == 0 and json.loads(usage.stdout)["balance"]["currency"] == "usd"


def test_login_checks_the_key_and_stores_it_private(api: httpx.Client, tmp_path: Path) -> None:
    key = _agent_key(api, "cli-login")["Authorization"].removeprefix("Bearer ")
    config = tmp_path / "cfg" / "config.toml"
    runtime = Runtime(env={"BATCHROUTE_CONFIG": str(config)}, prompt_key=lambda: key)
    assert main(["login", "--base-url", str(api.base_url)], runtime) == 0
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    stored_env = {"BATCHROUTE_CONFIG": str(config)}
    assert main(["usage", "--json"], Runtime(env=stored_env)) == 0
    wrong = Runtime(
        env={"BATCHROUTE_CONFIG": str(tmp_path / "other.toml")}, prompt_key=lambda: "sk-wrong-0000000000"
    )
    assert main(["login", "--base-url", str(api.base_url)], wrong) == 1
    assert not (tmp_path / "other.toml").exists()
