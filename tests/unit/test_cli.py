"""The `batchroute` CLI run in-process (`main(argv, runtime)`) against a scripted API on
`httpx.MockTransport`: the vendor JSONL conversion (the same items the service's compat surface
makes), submit --wait --out with one Idempotency-Key across retries, the signed upload, the exit
codes (0, 1, 2, 3, 4, 130), `--json` output, the 0600 config and the masked key. An injected
sleeper records the waits; nothing really sleeps."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from batchroute_client.cli import main
from batchroute_client.cli.config import mask
from batchroute_client.cli.inputs import InputError, convert
from batchroute_client.cli.runtime import Runtime
from batchroute_client.models import BillingReceipt

from batchroute.domain.compat.batches import Row, read_row
from tests.unit.test_client_files import file_row, signed
from tests.unit.test_client_sdk import _chunk, batch, error

BASE = "https://api.test"
KEY = "sk-live-0123456789abcdef"
LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
Handler = Callable[[httpx.Request], httpx.Response]

VENDOR_ROWS = [
    {
        "custom_id": "chat-1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
    },
    {"custom_id": "emb-1", "method": "POST", "url": "/v1/embeddings", "body": {"model": "e5", "input": "a"}},
    {
        "custom_id": "resp-1",
        "method": "POST",
        "url": "/v1/responses",
        "body": {"model": "gpt-4o-mini", "input": "Hello"},
    },
]
NATIVE = {
    "customer_item_id": "n-1",
    "operation": "responses",
    "model": LLAMA,
    "input": {"messages": [{"role": "user", "content": "Hi"}]},
}


def quote_body(item_count: int = 3) -> dict[str, Any]:
    money = {"currency": "usd", "amount": "0.02"}
    names = ("provider_subtotal", "service_fee", "customer_discount", "total")
    return {
        "quote_id": "qlock_1",
        "expires_at": "2026-03-01T10:10:00.000Z",
        "item_count": item_count,
        "pricing_estimate": dict.fromkeys(names, money),
        "quote_lanes": [
            {
                "lane_id": "l1",
                "provider": "edge-eu",
                "model": LLAMA,
                "selected": True,
                "item_count": 3,
                "estimated_provider_cost": money,
            },
            {
                "lane_id": "l2",
                "provider": "groq",
                "model": LLAMA,
                "selected": False,
                "rejection": {
                    "code": "tool_support",
                    "message": "No web_search.",
                    "details": {},
                    "reasons": ["tool_support", "capacity_full"],
                },
            },
        ],
        "customer_explanation": "3 items on edge-eu.",
    }


class FakeAPI:
    """Answers by `METHOD /path` from queues (the last answer repeats); records requests."""

    def __init__(self, routes: dict[str, list[httpx.Response | Exception | Handler]]) -> None:
        self.routes = routes
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        route = f"{request.method} {request.url.path}"
        queue = self.routes.get(route)
        if queue is None:
            return error(404, "not_found")
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            return answer(request)
        return answer

    def sent(self, route: str) -> list[httpx.Request]:
        return [r for r in self.requests if f"{r.method} {r.url.path}" == route]


def run(
    api: FakeAPI,
    *argv: str,
    tmp_path: Path,
    env: dict[str, str] | None = None,
    **runtime: Any,
) -> tuple[int, list[float]]:
    sleeps: list[float] = runtime.pop("sleeps", [])
    base_env = {
        "BATCHROUTE_API_KEY": KEY,
        "BATCHROUTE_BASE_URL": BASE,
        "BATCHROUTE_CONFIG": str(tmp_path / "config.toml"),
    }
    code = main(
        list(argv),
        Runtime(
            env=base_env if env is None else env,
            http_client=lambda: httpx.Client(transport=httpx.MockTransport(api)),
            sleep=runtime.pop("sleep", sleeps.append),
            bars=runtime.pop("bars", False),
            **runtime,
        ),
    )
    return code, sleeps


def receipt_body(
    batch_id: str, amount: str, counts: dict[str, int], cost: str, rejected_because: str, **lane: Any
) -> dict[str, Any]:
    """A billing receipt: every amount `amount` USD, one lane chosen (edge-eu, `counts` items
    costing `cost` USD, plus `lane`), groq rejected for capacity_full."""
    names = [f.name for f in dataclasses.fields(BillingReceipt) if f.type == "Money"]
    chosen = {
        "provider": "edge-eu",
        "model": LLAMA,
        "status": "completed",
        "item_counts": counts,
        "cost": {"currency": "usd", "amount": cost},
        **lane,
    }
    return {
        "batch_id": batch_id,
        "settled_at": "2026-03-01T10:05:00.000Z",
        **{name: {"currency": "usd", "amount": amount} for name in names},
        "provider_lanes": [chosen],
        "rejected_lanes": [
            {
                "provider": "groq",
                "model": LLAMA,
                "rejection": {"code": "capacity_full", "message": rejected_because},
            }
        ],
    }


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def results_page(ids: list[str], next_cursor: str | None = None) -> httpx.Response:
    rows = [{"customer_item_id": i, "status": "completed", "output": {"text": i}, "error": None} for i in ids]
    return httpx.Response(200, json={"data": rows, "next_cursor": next_cursor})


def got_batch(state: str, completed: int = 0, **counts: int) -> httpx.Response:
    body = batch("batch_1", state, completed)
    body["counts"].update(counts)
    return httpx.Response(200, json={"batch": body, "billing_receipt": None})


# -- the vendor format ------------------------------------------------------------------------------
def test_vendor_rows_become_the_items_the_service_compat_surface_makes(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "vendor.jsonl", [*VENDOR_ROWS, NATIVE])
    out = io.BytesIO()
    summary = convert(path, out)
    items = [json.loads(line) for line in out.getvalue().splitlines()]
    server = [read_row(n, row) for n, row in enumerate(VENDOR_ROWS, start=1)]
    assert all(isinstance(row, Row) for row in server)
    assert items[:3] == [row.item for row in server if isinstance(row, Row)]
    assert [i["operation"] for i in items] == ["responses", "embeddings", "responses", "responses"]
    assert items[0]["input"] == {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
    assert items[3] == NATIVE
    assert (summary.items, summary.vendor_rows, summary.format) == (4, 3, "mixed")


def test_unusable_lines_are_refused_naming_each_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [
        VENDOR_ROWS[0],
        {**VENDOR_ROWS[0], "url": "/v1/images/generations"},
        {**VENDOR_ROWS[0], "method": "GET"},
    ]
    path = write_jsonl(tmp_path / "bad.jsonl", bad)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n[1, 2]\n{not json\n")
    with pytest.raises(InputError) as raised:
        convert(path, io.BytesIO())
    text = str(raised.value)
    assert "bad.jsonl: 4 unusable line(s)" in text
    assert "bad.jsonl:2: url '/v1/images/generations' is not supported" in text
    assert "bad.jsonl:3: method must be POST" in text
    assert "bad.jsonl:5: a line must be a JSON object" in text and "bad.jsonl:6: not JSON" in text

    api = FakeAPI({})
    code, _ = run(api, "submit", str(path), tmp_path=tmp_path)
    assert code == 2 and api.requests == []
    err = capsys.readouterr().err
    assert "error: usage_error: bad.jsonl: 4 unusable line(s)" in err and "Traceback" not in err


# -- submit -------------------------------------------------------------------------------------------
def test_submit_wait_out_quotes_creates_once_follows_and_writes_every_result_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "vendor.jsonl", VENDOR_ROWS)
    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body())],
            "POST /v1/batches": [
                error(503, "unavailable"),
                httpx.ConnectError("reset"),
                httpx.Response(202, json={"batch": batch("batch_1", "priced")}),
            ],
            "GET /v1/batches/batch_1": [
                got_batch("running", 1),
                got_batch("running", 2),
                got_batch("completed", 3, pending=0),
            ],
            "GET /v1/batches/batch_1/results": [
                results_page(["chat-1", "emb-1"], next_cursor="2"),
                results_page(["resp-1"]),
            ],
        }
    )
    code, sleeps = run(
        api,
        "submit",
        str(path),
        "--wait",
        "--out",
        str(tmp_path / "out"),
        "--poll-interval",
        "3",
        tmp_path=tmp_path,
    )
    assert code == 0
    (quoted,) = api.sent("POST /v1/quotes/model")
    assert [i["customer_item_id"] for i in json.loads(quoted.content)["items"]] == [
        "chat-1",
        "emb-1",
        "resp-1",
    ]
    creates = api.sent("POST /v1/batches")
    assert len(creates) == 3
    keys = {r.headers["idempotency-key"] for r in creates}
    assert len(keys) == 1 and next(iter(keys)).startswith("br-cli-")
    assert {r.content for r in creates} == {b'{"quote_id":"qlock_1"}'}
    assert sleeps[2:] == [3.0, 3.0]  # two backoff waits, then the polls
    written = (tmp_path / "out" / "batch_1.results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["customer_item_id"] for line in written] == ["chat-1", "emb-1", "resp-1"]
    captured = capsys.readouterr()
    assert "batch_1" in captured.out and "completed" in captured.out
    assert "3 items (vendor format) quoted 0.02 USD" in captured.err
    assert "batch_1 running 1/3 items done" in captured.err and "results written to" in captured.err


def test_submit_json_prints_one_document_and_a_failed_batch_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
            "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
            "GET /v1/batches/batch_1": [got_batch("failed", 0, failed=3, pending=0)],
        }
    )
    code, _ = run(
        api, "submit", str(path), "--wait", "--json", "--idempotency-key", "my-key-0001", tmp_path=tmp_path
    )
    assert code == 4
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["batch"]["state"] == "failed" and document["idempotency_key"] == "my-key-0001"
    assert document["input"] == {
        "format": "native",
        "items": 1,
        "bytes": len(json.dumps(NATIVE, separators=(",", ":"))) + 1,
        "models": [LLAMA],
        "input_file_id": None,
    }
    assert api.sent("POST /v1/batches")[0].headers["idempotency-key"] == "my-key-0001"
    assert "error: batch_ended: batch_1 ended failed" in captured.err


def test_submit_wait_out_on_a_batch_canceled_elsewhere_writes_its_results_once_settled_and_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a batch that another shell cancels while one item runs and one is pending
    path = write_jsonl(tmp_path / "vendor.jsonl", VENDOR_ROWS)

    def results(request: httpx.Request) -> httpx.Response:
        # The service answers 409 results_not_ready until the batch is finalized
        if not settled:
            return error(409, "results_not_ready", state="canceled")
        rows = [
            {"customer_item_id": "chat-1", "status": "completed", "output": {"text": "hi"}, "error": None},
            *(
                {"customer_item_id": i, "status": "failed", "output": None, "error": {"code": "canceled"}}
                for i in ("emb-1", "resp-1")
            ),
        ]
        return httpx.Response(200, json={"data": rows, "next_cursor": None})

    settled = False
    polls: list[tuple[str, dict[str, int], bool]] = [
        ("running", {"running": 1, "pending": 1}, False),
        ("canceled", {"running": 1, "pending": 1}, False),  # canceled at once, not settled
        ("canceled", {"running": 0, "pending": 0, "canceled": 2}, True),
    ]

    def poll(request: httpx.Request) -> httpx.Response:
        nonlocal settled
        state, counts, settled = polls.pop(0) if len(polls) > 1 else polls[0]
        body = batch("batch_1", state, 1, settled=settled)
        body["counts"].update(counts)
        return httpx.Response(200, json={"batch": body, "billing_receipt": None})

    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body())],
            "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
            "GET /v1/batches/batch_1": [poll],
            "GET /v1/batches/batch_1/results": [results],
        }
    )
    # When submit --wait --out follows it
    code, sleeps = run(api, "submit", str(path), "--wait", "--out", str(tmp_path / "out"), tmp_path=tmp_path)
    # Then it waited past `canceled` until the batch settled, wrote every result, and exits 4
    assert code == 4 and sleeps == [2.0, 2.0]
    assert len(api.sent("GET /v1/batches/batch_1")) == 3
    assert len(api.sent("GET /v1/batches/batch_1/results")) == 1  # once, after it settled
    written = (tmp_path / "out" / "batch_1.results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["status"] for line in written] == ["completed", "failed", "failed"]
    err = capsys.readouterr().err
    assert "batch_1 canceled 1/3 items done" in err and "batch_1 canceled 3/3 items done" in err
    assert "results written to" in err
    assert "error: batch_ended: batch_1 ended canceled" in err and "results_not_ready" not in err


def test_submit_wait_json_keeps_the_batch_and_its_key_when_waiting_fails_after_the_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a batch created (its credit reserved), then a wait that fails: the network, a time-out
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    clock = iter(range(0, 1000, 2))
    for failing, extra, code in (
        (httpx.ConnectError("refused"), (), "network_error"),
        (got_batch("running", 1), ("--timeout", "1"), "timeout"),
    ):
        api = FakeAPI(
            {
                "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
                "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
                "GET /v1/batches/batch_1": [failing],
            }
        )
        exit_code, _ = run(
            api,
            "submit",
            str(path),
            "--wait",
            "--json",
            *extra,
            tmp_path=tmp_path,
            monotonic=lambda: float(next(clock)),
        )
        # Then stdout still names the batch and its key, beside the error, and stderr too
        assert exit_code == 3
        captured = capsys.readouterr()
        document = json.loads(captured.out)
        key = api.sent("POST /v1/batches")[0].headers["idempotency-key"]
        assert document["batch"]["id"] == "batch_1" and document["idempotency_key"] == key
        assert document["error"]["code"] == code
        assert f"created batch_1 (Idempotency-Key {key})" in captured.err


def test_submit_refused_as_an_idempotency_conflict_says_the_batch_exists_not_that_it_may(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a rerun with the key of an earlier submit (a new quote: another body)
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
            "POST /v1/batches": [error(409, "idempotency_conflict")],
        }
    )
    exit_code, _ = run(
        api, "submit", str(path), "--idempotency-key", "mine-0001", "--json", tmp_path=tmp_path
    )
    captured = capsys.readouterr()
    # Then it says a batch exists under the key and where to find it, not to rerun with it
    assert exit_code == 1
    assert "a batch already exists under Idempotency-Key mine-0001" in captured.err
    assert "batchroute list" in captured.err and "rerun with" not in captured.err
    document = json.loads(captured.out)
    assert document["idempotency_key"] == "mine-0001" and document["error"]["code"] == "idempotency_conflict"


def test_submit_whose_create_gets_no_sure_answer_names_its_key_so_a_rerun_finds_the_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a create that may have made the batch (no answer, a 5xx after every retry) and one
    # that surely did not (a 400)
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    for failing, exit_expected, unknown in (
        (httpx.ConnectError("refused"), 3, True),
        (error(500, "internal_error"), 1, True),
        (error(409, "idempotency_in_progress"), 1, True),
        (error(400, "quote_expired"), 1, False),
    ):
        api = FakeAPI(
            {
                "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
                "POST /v1/batches": [failing],
            }
        )
        exit_code, _ = run(api, "submit", str(path), "--json", tmp_path=tmp_path)
        captured = capsys.readouterr()
        key = api.sent("POST /v1/batches")[0].headers["idempotency-key"]
        document = json.loads(captured.out)
        # Then an unknown outcome names the key (stderr and the --json document) and how to rerun
        assert exit_code == exit_expected
        assert (f"rerun with --idempotency-key {key}" in captured.err) is unknown
        assert document.get("idempotency_key") == (key if unknown else None)
        # And a rerun with that key sends it again (the service answers the same batch)
        if unknown:
            api = FakeAPI(
                {
                    "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
                    "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
                }
            )
            assert run(api, "submit", str(path), "--idempotency-key", key, tmp_path=tmp_path)[0] == 0
            assert api.sent("POST /v1/batches")[0].headers["idempotency-key"] == key
            capsys.readouterr()


def test_status_and_a_failed_wait_say_why_the_batch_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "no eligible lane: every lane for the model is capacity_full"
    failed = {
        **batch("batch_1", "failed"),
        "execution_summary": {"latest_error": reason},
    }
    failed["counts"].update(pending=0, failed=3)
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
            "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
            "GET /v1/batches/batch_1": [httpx.Response(200, json={"batch": failed, "billing_receipt": None})],
        }
    )
    assert run(api, "status", "batch_1", tmp_path=tmp_path, width=120)[0] == 0
    assert f"error      {reason}" in capsys.readouterr().out
    assert run(api, "submit", str(path), "--wait", tmp_path=tmp_path, width=120)[0] == 4
    captured = capsys.readouterr()
    assert f"error      {reason}" in captured.out
    assert "error: batch_ended: batch_1 ended failed: 3/3 done" in captured.err
    assert captured.err.rstrip().endswith(f"; latest error: {reason}")
    # A batch without an error shows no error line
    assert (
        run(
            FakeAPI({"GET /v1/batches/batch_1": [got_batch("running", 1)]}),
            "status",
            "batch_1",
            tmp_path=tmp_path,
        )[0]
        == 0
    )
    assert "error" not in capsys.readouterr().out


def test_status_says_whether_a_canceled_batch_has_settled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settling = batch("batch_1", "canceled", 1, settled=False)
    api = FakeAPI(
        {
            "GET /v1/batches/batch_1": [
                httpx.Response(200, json={"batch": settling, "billing_receipt": None}),
                got_batch("canceled", 1, pending=0, canceled=2),
            ]
        }
    )
    assert run(api, "status", "batch_1", tmp_path=tmp_path)[0] == 0
    assert "settled    not yet: the work already dispatched is finishing" in capsys.readouterr().out
    assert run(api, "status", "batch_1", tmp_path=tmp_path)[0] == 0
    assert "settled    2026-03-01T10:05:00.000Z" in capsys.readouterr().out


def test_retry_shows_the_new_batch_as_it_is_now_not_as_a_replayed_answer_had_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A second `retry` of batch_1 is answered with the first answer (docs/batches.md, "Retry"):
    # batch_2 as it was created, priced, though it has run to completion since
    first = {"batch": batch("batch_2", "priced"), "source_batch_id": "batch_1", "retry_item_count": 2}
    now = batch("batch_2", "completed", 3)
    api = FakeAPI(
        {
            "POST /v1/batches/batch_1/retry": [httpx.Response(202, json=first)],
            "GET /v1/batches/batch_2": [httpx.Response(200, json={"batch": now, "billing_receipt": None})],
        }
    )
    assert run(api, "retry", "batch_1", tmp_path=tmp_path, width=120)[0] == 0
    captured = capsys.readouterr()
    assert "2 items of batch_1 retried as:" in captured.err
    assert "completed" in captured.out and "priced" not in captured.out
    assert run(api, "retry", "batch_1", "--json", tmp_path=tmp_path)[0] == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {"batch": now, "source_batch_id": "batch_1", "retry_item_count": 2}
    assert len(api.sent("GET /v1/batches/batch_2")) == 2


def test_a_file_over_the_inline_limit_is_uploaded_through_the_signed_url_with_a_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "vendor.jsonl", VENDOR_ROWS)
    api = FakeAPI(
        {
            "POST /v1/files/uploads": [signed(400)],
            "PUT /uploads/staging/org_1/file_1": [httpx.Response(200)],
            "POST /v1/files/file_1/complete": [httpx.Response(200, json={"file": file_row(size=400)})],
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body())],
            "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
            "GET /v1/batches/batch_1": [got_batch("running", 1), got_batch("completed", 3, pending=0)],
        }
    )
    code, _ = run(api, "submit", str(path), "--upload", "signed", "--wait", tmp_path=tmp_path, bars=True)
    assert code == 0
    (put,) = api.sent("PUT /uploads/staging/org_1/file_1")
    assert [json.loads(line)["customer_item_id"] for line in put.content.splitlines()] == [
        "chat-1",
        "emb-1",
        "resp-1",
    ]
    assert "authorization" not in put.headers
    (quoted,) = api.sent("POST /v1/quotes/model")
    assert json.loads(quoted.content) == {"input_file_id": "file_1"}
    err = capsys.readouterr().err
    assert "upload vendor.jsonl" in err and "batch_1" in err and "3/3" in err


def _submit_past_its_timeout(tmp_path: Path, *extra: str) -> tuple[int, list[float]]:
    """`submit --wait --timeout 5 --poll-interval 2` of a batch that stays running (each read
    of the clock 2 s after the one before)."""
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
            "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
            "GET /v1/batches/batch_1": [got_batch("running", 1)],
        }
    )
    clock = iter(range(0, 1000, 2))
    argv = ("submit", str(path), "--wait", "--timeout", "5", "--poll-interval", "2", *extra)
    return run(api, *argv, tmp_path=tmp_path, monotonic=lambda: float(next(clock)))


def test_a_wait_past_its_timeout_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, sleeps = _submit_past_its_timeout(tmp_path)
    assert code == 3 and sleeps == [2.0, 1.0]  # the last look when the time is up, not before
    assert "error: timeout: batch_1 still running after 5.0 s" in capsys.readouterr().err


def test_a_wait_past_its_timeout_names_the_batch_as_it_last_saw_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _submit_past_its_timeout(tmp_path, "--json")
    # Then the --json error document names the batch as the last poll read it, not as created
    document = json.loads(capsys.readouterr().out)
    assert code == 3 and document["error"]["code"] == "timeout"
    assert document["batch"]["id"] == "batch_1" and document["batch"]["state"] == "running"


def test_ctrl_c_while_waiting_exits_130_and_says_the_batch_keeps_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI(
        {
            "POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))],
            "POST /v1/batches": [httpx.Response(202, json={"batch": batch("batch_1", "priced")})],
            "GET /v1/batches/batch_1": [got_batch("running", 1)],
        }
    )

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    code, _ = run(api, "submit", str(path), "--wait", tmp_path=tmp_path, sleep=interrupt)
    assert code == 130
    assert "batch_1 keeps running: batchroute status batch_1" in capsys.readouterr().err


# -- errors and exit codes ------------------------------------------------------------------------------
def test_an_api_error_exits_1_with_its_code_and_preflight_issues_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preflight = {
        "ok": False,
        "warnings": [],
        "errors": [
            {
                "category": "context_window",
                "code": "preflight_context_window_exceeded",
                "path": "items[0].input",
                "message": "Too long.",
                "action": "Shorten it.",
            }
        ],
    }
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI({"POST /v1/quotes/model": [error(400, "batch_preflight_failed", preflight=preflight)]})
    code, _ = run(api, "quote", str(path), tmp_path=tmp_path)
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: batch_preflight_failed: batch_preflight_failed happened\n")
    issue = "context_window/preflight_context_window_exceeded (items[0].input, items.jsonl:1): Too long."
    assert issue in err
    assert "Shorten it." in err and "Traceback" not in err

    # An issue of an item names the item's line in the file (blank lines are no items)
    preflight["errors"][0]["path"] = "items[1].model"
    second = {**NATIVE, "customer_item_id": "b"}
    path.write_text("\n" + json.dumps(NATIVE) + "\n\n" + json.dumps(second) + "\n")
    api = FakeAPI({"POST /v1/quotes/model": [error(400, "batch_preflight_failed", preflight=preflight)]})
    assert run(api, "quote", str(path), tmp_path=tmp_path)[0] == 1
    assert "(items[1].model, items.jsonl:4): Too long." in capsys.readouterr().err

    # Issues print in the order of the items, whatever order the API lists them in
    group_found = {**preflight["errors"][0], "code": "tool_not_supported", "path": "items[0]"}
    preflight["errors"] = [preflight["errors"][0], group_found]
    api = FakeAPI({"POST /v1/quotes/model": [error(400, "batch_preflight_failed", preflight=preflight)]})
    assert run(api, "quote", str(path), tmp_path=tmp_path)[0] == 1
    err = capsys.readouterr().err
    assert err.index("(items[0], items.jsonl:2)") < err.index("(items[1].model, items.jsonl:4)")

    api = FakeAPI({"GET /v1/batches/batch_9": [error(401, "invalid_api_key")]})
    code, _ = run(api, "status", "batch_9", "--json", tmp_path=tmp_path)
    captured = capsys.readouterr()
    assert code == 1 and json.loads(captured.out)["error"]["code"] == "invalid_api_key"
    assert "error: invalid_api_key:" in captured.err and KEY not in captured.err + captured.out


def test_network_errors_exit_3_after_the_retries_and_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeAPI({"GET /v1/batches/batch_1": [httpx.ConnectError("refused")]})
    code, sleeps = run(api, "status", "batch_1", tmp_path=tmp_path)
    assert code == 3 and len(sleeps) == 4 and len(api.requests) == 5
    assert "error: network_error: GET /v1/batches/batch_1: ConnectError" in capsys.readouterr().err

    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    assert run(api, "submit", str(path), "--out", str(tmp_path), tmp_path=tmp_path)[0] == 2
    assert "--out needs --wait" in capsys.readouterr().err
    assert run(api, "status", tmp_path=tmp_path)[0] == 2
    assert run(api, "nonsense", tmp_path=tmp_path)[0] == 2
    assert run(api, "quote", str(tmp_path / "missing.jsonl"), tmp_path=tmp_path)[0] == 2
    assert "cannot read" in capsys.readouterr().err
    code, _ = run(
        api, "status", "batch_1", tmp_path=tmp_path, env={"BATCHROUTE_CONFIG": str(tmp_path / "none")}
    )
    assert code == 2 and "no API key: run `batchroute login`" in capsys.readouterr().err


def test_a_key_ending_in_a_newline_is_used_stripped_and_one_http_cannot_carry_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"BATCHROUTE_BASE_URL": BASE, "BATCHROUTE_CONFIG": str(tmp_path / "config.toml")}
    # A secret mounted from a file, a CRLF .env: the newline is dropped
    api = FakeAPI({"GET /v1/batches/batch_1": [got_batch("running", 1)]})
    assert (
        run(api, "status", "batch_1", tmp_path=tmp_path, env={**env, "BATCHROUTE_API_KEY": KEY + "\r\n"})[0]
        == 0
    )
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"
    capsys.readouterr()
    # A key with a non-ASCII character (the masked form pasted back) or a space inside: exit 2,
    # nothing sent, the key shown nowhere
    for key in (mask(KEY), "sk-live 0123456789abcdef"):
        api = FakeAPI({})
        code, _ = run(
            api, "status", "batch_1", "--json", tmp_path=tmp_path, env={**env, "BATCHROUTE_API_KEY": key}
        )
        captured = capsys.readouterr()
        assert code == 2 and api.requests == []
        assert json.loads(captured.out)["error"]["code"] == "usage_error"
        assert "error: usage_error: the API key holds whitespace, control or non-ASCII" in captured.err
        assert key not in captured.out + captured.err and "Traceback" not in captured.err
    # A base URL without its scheme: exit 2 at once, not four retries and a network error
    api = FakeAPI({})
    code, sleeps = run(
        api,
        "status",
        "batch_1",
        tmp_path=tmp_path,
        env={**env, "BATCHROUTE_API_KEY": KEY, "BATCHROUTE_BASE_URL": "api.test"},
    )
    assert code == 2 and api.requests == [] and sleeps == []
    assert "error: usage_error: the base URL must be http:// or https://" in capsys.readouterr().err
    # A request the transport refuses to send (h11 quotes the refused header): exit 2, once, unshown
    api = FakeAPI({"GET /v1/usage": [httpx.LocalProtocolError(f"Illegal header value b'Bearer {KEY}\\n'")]})
    code, sleeps = run(api, "usage", "--json", tmp_path=tmp_path)
    captured = capsys.readouterr()
    assert code == 2 and len(api.requests) == 1 and sleeps == []
    assert json.loads(captured.out)["error"]["code"] == "usage_error"
    assert KEY not in captured.out + captured.err


def envelope(status: int, code: str, message: str, details: dict[str, Any]) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": message, "details": details}})


def test_a_refused_request_shows_each_issue_and_the_field_and_json_keeps_the_whole_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # functions/api/errors.py: a bad query value lists `details.errors` (path, message, type).
    literal = "Input should be 'pending', 'processing', 'completed' or 'failed'"
    issues = [{"path": "query.status", "message": literal, "type": "literal_error"}]
    invalid = envelope(400, "invalid_request", "The request is invalid.", {"errors": issues})
    state = "state must be a batch state or `active`."
    api = FakeAPI(
        {
            "GET /v1/batches/batch_1/items": [invalid],
            "GET /v1/batches": [envelope(400, "invalid_request", state, {"field": "state"})],
            "POST /v1/batches/batch_1/cancel": [
                envelope(
                    400, "invalid_request", "Unknown field 'why'.", {"field": "why", "unknown": ["why", "x"]}
                )
            ],
            "GET /v1/batches/batch_2/items": [
                envelope(
                    400,
                    "invalid_request",
                    "Bad lines.",
                    {"issues": [{"line": 3, "message": "No model."}, "odd"]},
                )
            ],
            "GET /v1/usage": [
                envelope(402, "hard_limit_reached", "Limit.", {"limit": "10.00", "period": "month"})
            ],
        }
    )
    code, _ = run(api, "items", "batch_1", "--status", "canceled", tmp_path=tmp_path)
    assert code == 1
    assert capsys.readouterr().err == (
        f"error: invalid_request: The request is invalid.\n  - query.status: {literal}\n"
    )
    code, _ = run(api, "items", "batch_1", "--status", "canceled", "--json", tmp_path=tmp_path)
    captured = capsys.readouterr()
    assert code == 1 and json.loads(captured.out) == {
        "error": {
            "status": 400,
            "code": "invalid_request",
            "message": "The request is invalid.",
            "details": {"errors": issues},
        }
    }
    assert f"  - query.status: {literal}" in captured.err

    assert run(api, "list", "--state", "bogus", tmp_path=tmp_path)[0] == 1
    assert capsys.readouterr().err == f"error: invalid_request: {state}\n  field: state\n"
    assert run(api, "cancel", "batch_1", tmp_path=tmp_path)[0] == 1
    assert capsys.readouterr().err.endswith("\n  field: why\n  unknown fields: why, x\n")
    assert run(api, "items", "batch_2", tmp_path=tmp_path)[0] == 1
    assert capsys.readouterr().err.endswith("Bad lines.\n  - line 3: No model.\n  - odd\n")
    assert run(api, "usage", tmp_path=tmp_path)[0] == 1
    assert capsys.readouterr().err.endswith("Limit.\n  details: limit=10.00, period=month\n")


def test_an_answer_that_is_not_the_apis_json_is_one_error_line_exit_1_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = httpx.Response(200, text="<!doctype html><p>Console</p>", headers={"content-type": "text/html"})
    api = FakeAPI({"GET /console/v1/batches/batch_1": [html], "POST /console/v1/quotes/model": [html]})
    code, _ = run(api, "--base-url", f"{BASE}/console", "status", "batch_1", tmp_path=tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and "JSONDecodeError" not in err
    assert err == (
        f"error: unexpected_response: GET {BASE}/console/v1/batches/batch_1 answered HTTP 200 (text/html):"
        " not the API's JSON; is the base URL the API's?\n"
    )
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    code, _ = run(api, "--base-url", f"{BASE}/console", "quote", str(path), "--json", tmp_path=tmp_path)
    captured = capsys.readouterr()
    document = json.loads(captured.out)["error"]
    assert code == 1 and document["code"] == "unexpected_response" and document["status"] == 200
    assert document["details"] == {
        "method": "POST",
        "url": f"{BASE}/console/v1/quotes/model",
        "content_type": "text/html",
    }
    assert captured.err.startswith("error: unexpected_response: POST ")

    # A proxy's non-JSON 5xx (after the retries), JSON that is not the envelope, an empty body.
    proxy = httpx.Response(502, text="Bad Gateway", headers={"content-type": "text/plain"})
    api = FakeAPI(
        {
            "GET /v1/batches/batch_1": [proxy],
            "GET /v1/usage": [httpx.Response(200, json={"status": "ok"})],
            "GET /v1/batches": [httpx.Response(200)],
        }
    )
    code, sleeps = run(api, "status", "batch_1", tmp_path=tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and len(sleeps) == 4
    where = f"GET {BASE}/v1/batches/batch_1"
    assert err == f"error: http_502: HTTP 502 from {where} (text/plain), not the API's JSON error\n"
    code, _ = run(api, "usage", tmp_path=tmp_path)
    err = capsys.readouterr().err
    assert code == 1 and f"GET {BASE}/v1/usage answered HTTP 200 (application/json): JSON that is not" in err
    code, _ = run(api, "list", tmp_path=tmp_path)
    err = capsys.readouterr().err
    assert (
        code == 1 and "answered HTTP 200 (no content type): an empty body" in err and "Traceback" not in err
    )


def test_an_out_path_that_cannot_be_written_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeAPI({"GET /v1/batches/batch_1/results": [results_page(["a"])]})
    (tmp_path / "taken").write_text("a file, not a folder", encoding="utf-8")
    target = tmp_path / "taken" / "r.jsonl"
    code, _ = run(api, "results", "batch_1", "--out", str(target), "--json", tmp_path=tmp_path)
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert captured.err == f"error: file_error: cannot write {target.parent}: File exists\n"
    assert json.loads(captured.out)["error"]["code"] == "file_error"


def test_login_against_a_page_that_is_not_the_api_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "conf" / "config.toml"
    page = httpx.Response(200, text="<html></html>", headers={"content-type": "text/html"})
    api = FakeAPI(
        {"GET /console/v1/auth/account": [page], "GET /v1/auth/account": [httpx.Response(200, json=[])]}
    )
    env = {"BATCHROUTE_CONFIG": str(config)}
    for url in (f"{BASE}/console", BASE):
        code, _ = run(api, "login", "--base-url", url, tmp_path=tmp_path, env=env, prompt_key=lambda: KEY)
        err = capsys.readouterr().err
        assert code == 1 and err.startswith("error: unexpected_response: GET ") and not config.exists()
        assert KEY not in err


# -- configuration --------------------------------------------------------------------------------------
def test_login_checks_the_key_and_stores_it_0600_and_configure_shows_it_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "conf" / "config.toml"
    env = {"BATCHROUTE_CONFIG": str(config)}
    account = {"org": {"id": "org_1"}, "plan": "free"}
    api = FakeAPI(
        {"GET /v1/auth/account": [error(401, "invalid_api_key"), httpx.Response(200, json=account)]}
    )

    code, _ = run(
        api, "login", "--base-url", BASE, tmp_path=tmp_path, env=env, prompt_key=lambda: "sk-bad-key-000000"
    )
    assert code == 1 and not config.exists()
    code, _ = run(api, "login", "--base-url", BASE, tmp_path=tmp_path, env=env, prompt_key=lambda: KEY)
    assert code == 0 and api.requests[-1].headers["authorization"] == f"Bearer {KEY}"
    assert (
        stat.S_IMODE(config.stat().st_mode) == 0o600 and stat.S_IMODE(config.parent.stat().st_mode) == 0o700
    )
    assert f'api_key = "{KEY}"' in config.read_text(encoding="utf-8")
    out = capsys.readouterr().out
    assert "org_1" in out and KEY not in out and mask(KEY) in out

    code, _ = run(api, "configure", "--base-url", "http://127.0.0.1:9/", "--json", tmp_path=tmp_path, env=env)
    shown = json.loads(capsys.readouterr().out)
    assert code == 0 and shown["base_url"] == "http://127.0.0.1:9" and shown["api_key"] == "sk-l…cdef"
    assert shown["api_key_from"] == "config file"
    # The environment wins over the file.
    code, _ = run(
        api, "configure", "--json", tmp_path=tmp_path, env={**env, "BATCHROUTE_API_KEY": "sk-env-key-999999"}
    )
    assert json.loads(capsys.readouterr().out)["api_key_from"] == "environment"

    os.chmod(config, 0o644)
    code, _ = run(api, "status", "batch_1", tmp_path=tmp_path, env=env)
    assert code == 2 and f"run `chmod 600 {config}`" in capsys.readouterr().err


def test_the_config_path_honours_xdg(tmp_path: Path) -> None:
    from batchroute_client.cli.config import config_path

    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "batchroute" / "config.toml"
    assert config_path({"BATCHROUTE_CONFIG": "/x/y.toml", "XDG_CONFIG_HOME": "/z"}) == Path("/x/y.toml")
    assert mask("short") == "****" and mask(None) == "(none)"


# -- reading ------------------------------------------------------------------------------------------
def test_reading_commands_page_through_and_print_tables_or_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = {"data": [batch("batch_2", "completed", 3), batch("batch_1", "running")], "next_cursor": None}
    item = {
        "sequence_number": 0,
        "status": "failed",
        "customer_item_id": "a",
        "error": {"code": "x", "message": "y"},
    }
    receipt = receipt_body("batch_1", "0.01", {"completed": 2, "failed": 1, "canceled": 0}, "0.0001", "Full.")
    api = FakeAPI(
        {
            "GET /v1/batches": [httpx.Response(200, json=listing)],
            "GET /v1/batches/batch_1/items": [
                httpx.Response(200, json={"data": [item], "next_cursor": "1"}),
                httpx.Response(200, json={"data": [{**item, "sequence_number": 1}], "next_cursor": None}),
            ],
            "GET /v1/batches/batch_1/results": [
                lambda request: (
                    results_page(["b"]) if request.url.params.get("cursor") else results_page(["a"], "1")
                )
            ],
            "GET /v1/batches/batch_1/billing-receipt": [httpx.Response(200, json=receipt)],
        }
    )
    assert run(api, "list", "--state", "completed", "--json", tmp_path=tmp_path)[0] == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["batch_2", "batch_1"]
    assert api.requests[-1].url.params["state"] == "completed"

    assert run(api, "items", "batch_1", "--status", "failed", tmp_path=tmp_path)[0] == 0
    out = capsys.readouterr().out
    assert "x: y" in out and api.requests[-1].url.params["status"] == "failed"
    assert api.requests[-1].url.params["cursor"] == "1"

    assert run(api, "results", "batch_1", tmp_path=tmp_path)[0] == 0
    assert [json.loads(line)["customer_item_id"] for line in capsys.readouterr().out.splitlines()] == [
        "a",
        "b",
    ]
    target = tmp_path / "r.jsonl"
    assert run(api, "results", "batch_1", "--out", str(target), "--json", tmp_path=tmp_path)[0] == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 2 and len(target.read_text().splitlines()) == 2

    assert run(api, "receipt", "batch_1", tmp_path=tmp_path)[0] == 0
    out = capsys.readouterr().out
    assert "Lanes chosen" in out and "edge-eu" in out and "Lanes rejected" in out
    assert "capacity_full: Full." in out


def test_quote_shows_lanes_chosen_and_rejected_with_reasons(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    api = FakeAPI({"POST /v1/quotes/model": [httpx.Response(200, json=quote_body(1))]})
    code, _ = run(  # 200 columns: no wrapped cells
        api,
        "quote",
        str(path),
        "--routing-mode",
        "cheapest",
        "--tool",
        "web_search",
        tmp_path=tmp_path,
        width=200,
    )
    assert code == 0
    body = json.loads(api.requests[0].content)
    assert body["routing_mode"] == "cheapest" and body["required_tools"] == ["web_search"]
    out = capsys.readouterr().out
    assert "qlock_1" in out and "0.02 USD" in out and "edge-eu" in out
    assert "tool_support: No web_search. (also: capacity_full)" in out


def test_quote_shows_whether_the_balance_covers_it_and_the_preflight_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    warning = {
        "category": "billing",
        "code": "spending_limit_exceeded",
        "message": "This batch would take the month's spend past its soft limit.",
    }
    for available, sufficient, says in (("25.00", True, "(enough)"), ("0.01", False, "(not enough: top up")):
        body = {
            **quote_body(1),
            "funding": {"available": {"currency": "usd", "amount": available}, "sufficient": sufficient},
            "preflight": {"ok": True, "errors": [], "warnings": [warning]},
        }
        api = FakeAPI({"POST /v1/quotes/model": [httpx.Response(200, json=body)]})
        assert run(api, "quote", str(path), tmp_path=tmp_path, width=200)[0] == 0
        out = capsys.readouterr().out
        assert f"{available} USD {says}" in out
        assert "warning: spending_limit_exceeded: This batch would take the month's spend past" in out
    # A warning about one item names its line in the file
    short = {"category": "context_window", "code": "lane_window_short", "path": "items[0]", "message": "x"}
    body = {**quote_body(1), "preflight": {"ok": True, "errors": [], "warnings": [short]}}
    api = FakeAPI({"POST /v1/quotes/model": [httpx.Response(200, json=body)]})
    assert run(api, "quote", str(path), tmp_path=tmp_path, width=200)[0] == 0
    assert "warning: lane_window_short (items[0], items.jsonl:1): x" in capsys.readouterr().out


def test_chat_streams_the_answer_and_json_prints_the_completion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = [_chunk(None), _chunk("Hel"), _chunk("lo"), _chunk(None, "stop")]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    api = FakeAPI(
        {
            "POST /v1/chat/completions": [
                httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})
            ]
        }
    )
    assert run(api, "chat", LLAMA, "Say hi", "--max-tokens", "5", tmp_path=tmp_path)[0] == 0
    assert capsys.readouterr().out == "Hello\n"
    body = json.loads(api.requests[0].content)
    assert body["stream"] is True and body["max_tokens"] == 5 and body["messages"][-1]["content"] == "Say hi"


def test_chat_without_streaming_prints_the_answer_as_it_came(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an answer longer than a terminal line
    text = " ".join(["word"] * 60)
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": LLAMA,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 60, "total_tokens": 63},
    }
    api = FakeAPI({"POST /v1/chat/completions": [httpx.Response(200, json=completion)]})
    assert run(api, "chat", LLAMA, "Hi", "--no-stream", tmp_path=tmp_path)[0] == 0
    # Then it is printed whole, not wrapped at the terminal's width (a script reads it)
    assert capsys.readouterr().out == text + "\n"


def test_chat_prints_what_streamed_then_the_error_when_the_stream_fails_midway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    failure = {
        "code": "provider_failed",
        "message": "The provider edge-eu failed while answering (stream_interrupted).",
        "details": {"provider": "edge-eu"},
    }
    sse = "".join(
        f"data: {json.dumps(e)}\n\n" for e in (_chunk("Hello"), _chunk(" world"), {"error": failure})
    )
    answer = httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})
    assert (
        run(FakeAPI({"POST /v1/chat/completions": [answer]}), "chat", LLAMA, "Hi", tmp_path=tmp_path)[0] == 1
    )
    captured = capsys.readouterr()
    assert captured.out == "Hello world\n"
    assert captured.err.startswith(f"error: provider_failed: {failure['message']}\n")
    # A stream cut before [DONE]: what came, its line ended, then a network error (exit 3)
    cut = httpx.Response(200, text=f"data: {json.dumps(_chunk('Hel'))}\n\n")
    assert run(FakeAPI({"POST /v1/chat/completions": [cut]}), "chat", LLAMA, "Hi", tmp_path=tmp_path)[0] == 3
    captured = capsys.readouterr()
    assert (
        captured.out == "Hel\n"
        and "error: network_error: POST /v1/chat/completions: the stream ended" in captured.err
    )


def test_an_inline_quote_sends_the_bytes_its_size_check_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {
            **NATIVE,
            "customer_item_id": f"n-{i}",
            "input": {"messages": [{"role": "user", "content": "季度报告 🙂" * 50}]},
        }
        for i in range(3)
    ]
    path = write_jsonl(tmp_path / "cjk.jsonl", rows)
    api = FakeAPI({"POST /v1/quotes/model": [httpx.Response(200, json=quote_body(3))]})
    assert run(api, "quote", str(path), "--json", tmp_path=tmp_path)[0] == 0
    measured = json.loads(capsys.readouterr().out)["input"]["bytes"]  # the JSONL lines, newlines included
    (sent,) = api.requests
    # the body is the lines joined by commas in {"items":[...]}: no escaping made it grow
    assert len(sent.content) == measured - 3 + 2 + len('{"items":[]}')
    assert "季度报告 🙂".encode() in sent.content


# -- tables at 80 columns ---------------------------------------------------------------------------
BATCH_ID = "batch_01m8jv6f0mkhx4mqtkrkjgz53g"
QUOTE_ID = "qlock_01m8jv6f0mkhx4mqtkrkjgz53h"
ORG_ID = "org_01m8jv6f0mkhx4mqtkrkjgz53j"
REASON = "The provider has no capacity left in this window for the items."


def assert_readable(out: str, width: int, *whole: str, words: tuple[str, ...] = ()) -> None:
    """No line wider than `width`, every `whole` text (ids, models) on one line, and every word
    of `words` (prose cells) unsplit."""
    lines = out.splitlines()
    assert lines and max(len(line.rstrip()) for line in lines) <= width
    for text in whole:
        assert any(text in line for line in lines), f"{text!r} is cut or wrapped"
    for text in words:
        for word in text.split():
            assert any(word in line for line in lines), f"{word!r} is split"


def test_every_table_stays_readable_at_80_columns_when_piped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = [
        {**batch(BATCH_ID, "processing"), "counts": {**batch(BATCH_ID, "processing")["counts"], "failed": 2}}
    ]
    error_text = "provider_error: The provider refused the request"
    item = {
        "sequence_number": 1200,
        "status": "processing",
        "customer_item_id": "request-000001",
        "model": LLAMA,
        "provider": "together-ai",
        "error": {"code": "provider_error", "message": "The provider refused the request"},
    }
    quote = quote_body(3)
    quote["quote_id"] = QUOTE_ID
    quote["quote_lanes"][1]["provider"] = "fireworks-ai"
    counts = {"completed": 1498, "failed": 1, "canceled": 1}
    receipt = receipt_body(BATCH_ID, "0.02149", counts, "0.02149", REASON, failover_from="groq")
    period = {
        "start_date": "2026-03-01",
        "end_date": "2026-03-31",
        "spend": {"currency": "usd", "amount": "12.34"},
        "tokens": {"total": 123456789},
        "requests": {"total": 12345},
    }
    usage = {
        "org_id": ORG_ID,
        **{key: {"currency": "usd", "amount": "124.95"} for key in ("balance", "reserved", "available")},
        "period": "month",
        "timezone": "Europe/Amsterdam",
        "current_period": period,
        "previous_period": period,
        "generated_at": "2026-03-02T00:00:00.000Z",
    }
    api = FakeAPI(
        {
            "GET /v1/batches": [httpx.Response(200, json={"data": listed, "next_cursor": None})],
            f"GET /v1/batches/{BATCH_ID}": [httpx.Response(200, json={"batch": listed[0]})],
            f"GET /v1/batches/{BATCH_ID}/items": [
                httpx.Response(200, json={"data": [item], "next_cursor": None})
            ],
            f"GET /v1/batches/{BATCH_ID}/billing-receipt": [httpx.Response(200, json=receipt)],
            "POST /v1/quotes/model": [httpx.Response(200, json=quote)],
            "GET /v1/usage": [httpx.Response(200, json=usage)],
        }
    )
    # Piped (stdout is not a terminal here) and no COLUMNS: 80 columns.
    assert run(api, "list", tmp_path=tmp_path)[0] == 0
    out = capsys.readouterr().out
    assert_readable(out, 80, BATCH_ID, "processing", "done/total")
    assert "not shown at this width: created (see --json)" in out

    assert run(api, "status", BATCH_ID, tmp_path=tmp_path)[0] == 0
    assert_readable(
        capsys.readouterr().out, 80, BATCH_ID, words=("done: 0 completed, 2 failed, 0 canceled,",)
    )

    assert run(api, "items", BATCH_ID, tmp_path=tmp_path)[0] == 0
    out = capsys.readouterr().out
    assert_readable(out, 80, "request-000001", "processing", "together-ai", words=(error_text,))
    assert "not shown at this width: model (see --json)" in out

    path = write_jsonl(tmp_path / "items.jsonl", [NATIVE])
    assert run(api, "quote", str(path), tmp_path=tmp_path)[0] == 0
    out = capsys.readouterr().out
    assert_readable(
        out,
        80,
        QUOTE_ID,
        LLAMA,
        "fireworks-ai",
        "0.02 USD",
        words=("tool_support: No web_search. (also: capacity_full)",),
    )
    assert "not shown at this width: items, estimated cost (see --json)" in out

    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path)[0] == 0
    out = capsys.readouterr().out
    assert_readable(
        out, 80, BATCH_ID, LLAMA, "0.02 USD", words=("1498 completed, 1 failed, 1 canceled", REASON)
    )

    assert run(api, "usage", tmp_path=tmp_path)[0] == 0
    assert_readable(
        capsys.readouterr().out, 80, ORG_ID, "2026-03-01 .. 2026-03-31", "123456789", "124.95 USD"
    )

    assert run(api, "configure", tmp_path=tmp_path)[0] == 0
    assert_readable(capsys.readouterr().out, 80, BASE, mask(KEY), "environment")

    # Wider (COLUMNS when piped, or a terminal's width): every column, still whole.
    env = {"BATCHROUTE_API_KEY": KEY, "BATCHROUTE_BASE_URL": BASE, "COLUMNS": "160"}
    assert run(api, "items", BATCH_ID, tmp_path=tmp_path, env=env)[0] == 0
    out = capsys.readouterr().out
    assert_readable(out, 160, LLAMA, "together-ai", words=(error_text,)) and "not shown" not in out
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path, width=120)[0] == 0
    out = capsys.readouterr().out
    assert_readable(out, 120, LLAMA, "groq", words=(REASON,)) and "not shown" not in out

    # Narrower than the columns always shown (a split pane): one record a block, nothing cut
    narrow = {"BATCHROUTE_API_KEY": KEY, "BATCHROUTE_BASE_URL": BASE, "COLUMNS": "46"}
    assert run(api, "list", tmp_path=tmp_path, env=narrow)[0] == 0
    out = capsys.readouterr().out
    assert_readable(out, 46, f"id: {BATCH_ID}", "state: processing") and "not shown" not in out
    assert run(api, "quote", str(path), tmp_path=tmp_path, env=narrow)[0] == 0
    assert_readable(capsys.readouterr().out, 46, QUOTE_ID, LLAMA, "fireworks-ai", "0.02 USD")
    assert run(api, "items", BATCH_ID, tmp_path=tmp_path, env=narrow)[0] == 0
    assert_readable(capsys.readouterr().out, 46, "request-000001", "together-ai", words=(error_text,))


def test_the_table_width_is_the_terminals_else_columns_else_80() -> None:
    assert Runtime(width=100, is_terminal=lambda: True).columns() == 100
    assert (
        Runtime(env={"COLUMNS": "100"}, is_terminal=lambda: True).columns() is None
    )  # rich asks the terminal
    assert Runtime(env={"COLUMNS": "132"}, is_terminal=lambda: False).columns() == 132
    assert Runtime(env={"COLUMNS": "wide"}, is_terminal=lambda: False).columns() == 80
    assert Runtime(env={}, is_terminal=lambda: False).columns() == 80


# -- money (docs/money.md) ----------------------------------------------------------------------
def test_money_reads_one_way_and_the_receipt_says_why_the_fee_and_why_a_lane_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a receipt of amounts in every range, its fee schedule line and a lane beaten at the same price
    tie = "Eligible, but not needed: same price (0.0001 USD for this group); groq is more reliable."
    receipt = receipt_body(BATCH_ID, "0.02149", {"completed": 2, "failed": 0, "canceled": 0}, "0.0001", tie)
    receipt["rejected_lanes"][0]["rejection"]["code"] = "outranked"
    receipt.update(
        provider_subtotal={"currency": "usd", "amount": "0.0001"},
        credit_reserved={"currency": "usd", "amount": "10000"},
        credit_released={"currency": "usd", "amount": "0"},
        service_fee_basis={"schedule_line": "Service fee 0.01 USD: the 5.9% standard batch fee."},
    )
    usage = {
        "org_id": ORG_ID,
        "balance": {"currency": "usd", "amount": "124.954749"},
        "reserved": {"currency": "usd", "amount": "0.000001"},
        "available": {"currency": "usd", "amount": "124.954748"},
        "period": "month",
        "timezone": "UTC",
        "current_period": {},
        "previous_period": {},
        "generated_at": "2026-03-02T00:00:00.000Z",
    }
    api = FakeAPI(
        {
            f"GET /v1/batches/{BATCH_ID}/billing-receipt": [httpx.Response(200, json=receipt)],
            "GET /v1/usage": [httpx.Response(200, json=usage)],
        }
    )
    # When the CLI shows them
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path, width=160)[0] == 0
    out = capsys.readouterr().out
    # Then cents where amounts are cents, two significant figures below a cent, never an exponent
    for shown in ("0.02 USD", "0.0001 USD", "10,000.00 USD", "0.00 USD"):
        assert shown in out
    assert "0.02149" not in out and "E+" not in out
    # And the fee schedule line behind the fee, and what beat the lane at the same price
    assert "Service fee 0.01 USD: the 5.9% standard batch fee." in out
    assert "outranked: " + tie in out
    # And piped at 80 columns they wrap between words, amounts whole
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path)[0] == 0
    assert_readable(
        capsys.readouterr().out, 80, "10,000.00 USD", "0.0001 USD", words=("Service fee 0.01 USD", tie)
    )
    assert run(api, "usage", tmp_path=tmp_path, width=160)[0] == 0
    out = capsys.readouterr().out
    assert "124.95 USD" in out and "0.000001 USD" in out and "124.954749" not in out


def test_the_receipt_shows_the_items_a_deadline_rescue_moved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a receipt whose vendor batch lane was rescued onto a sync lane
    receipt = receipt_body(BATCH_ID, "0.02", {"completed": 10, "failed": 0, "canceled": 0}, "0.0001", "x")
    receipt["rescues"] = [
        {
            "lane_key": "01f1-deepinfra-llama",
            "lane_id": "deepinfra/llama",
            "provider": "deepinfra",
            "from_lane_key": "01-together-llama",
            "reason": "deadline_rescue",
            "item_counts": {"completed": 6, "failed": 0, "canceled": 0},
            "cost": {"currency": "usd", "amount": "0.03"},
            "cost_at_quoted_prices": {"currency": "usd", "amount": "0.01"},
            "cost_difference": {"currency": "usd", "amount": "0.02"},
            "overage_held": {"currency": "usd", "amount": "0.05"},
            "overage_charged": {"currency": "usd", "amount": "0.04"},
        }
    ]
    api = FakeAPI({f"GET /v1/batches/{BATCH_ID}/billing-receipt": [httpx.Response(200, json=receipt)]})
    # When the CLI shows it
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path, width=200)[0] == 0
    out = capsys.readouterr().out
    # Then the rescued items by lane, with the reason and the cost over the quoted prices
    assert "Rescued items" in out and "deepinfra/llama" in out and "01-together-llama" in out
    assert "deadline rescue" in out and "6 completed" in out and "0.03 USD" in out and "0.02 USD" in out
    # and the overage hold it took (allow_overage), what was charged of it
    assert "0.04 USD of 0.05 USD held" in out
    # And a receipt without a rescue shows no such table
    plain = receipt_body(BATCH_ID, "0.02", {"completed": 1, "failed": 0, "canceled": 0}, "0.0001", "x")
    api = FakeAPI({f"GET /v1/batches/{BATCH_ID}/billing-receipt": [httpx.Response(200, json=plain)]})
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path, width=160)[0] == 0
    assert "Rescued items" not in capsys.readouterr().out


def test_the_receipt_shows_what_routing_saved_against_the_reference_prices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a receipt whose batch cost less than the reference list price, more than its batch price
    receipt = receipt_body(BATCH_ID, "0.02", {"completed": 2, "failed": 0, "canceled": 0}, "0.0001", "Full.")
    receipt["savings"] = {
        "reference_list_price": {"currency": "usd", "amount": "1.95"},
        "reference_batch_price": {"currency": "usd", "amount": "0.975"},
        "charged": {"currency": "usd", "amount": "1.042525"},
        "saved_vs_list_price": {"currency": "usd", "amount": "0.907475"},
        "saved_vs_batch_price": {"currency": "usd", "amount": "-0.067525"},
        "prices_as_of": "2026-11-29T00:00:00Z",
        "by_model": [],
    }
    api = FakeAPI({f"GET /v1/batches/{BATCH_ID}/billing-receipt": [httpx.Response(200, json=receipt)]})
    # When the CLI shows it
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path, width=160)[0] == 0
    out = capsys.readouterr().out
    # Then the reference costs, what was saved against each (a loss as a negative), and their date
    for label, shown in (
        ("at reference list", "1.95 USD"),
        ("at reference batch", "0.98 USD"),
        ("saved vs list", "0.91 USD"),
        ("saved vs batch", "-0.07 USD"),
        ("reference prices of", "2026-11-29"),
    ):
        line = next(line for line in out.splitlines() if label in line)
        assert shown in line, line
    # And an older receipt without savings shows none of it
    del receipt["savings"]
    api = FakeAPI({f"GET /v1/batches/{BATCH_ID}/billing-receipt": [httpx.Response(200, json=receipt)]})
    assert run(api, "receipt", BATCH_ID, tmp_path=tmp_path, width=160)[0] == 0
    assert "saved vs list" not in capsys.readouterr().out


def test_a_refusal_asking_for_a_long_wait_says_how_long(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a 429 whose Retry-After is longer than the client waits (it is raised at once)
    api = FakeAPI({"GET /v1/batches/batch_1": [error(429, "rate_limited", {"Retry-After": "3700"})]})
    # Then stderr says how long to wait, and --json carries the seconds
    assert run(api, "status", "batch_1", tmp_path=tmp_path)[0] == 1
    assert "  retry after: 62 min" in capsys.readouterr().err
    assert run(api, "status", "batch_1", "--json", tmp_path=tmp_path)[0] == 1
    assert json.loads(capsys.readouterr().out)["error"]["retry_after_seconds"] == 3700
