"""One mapping of vendor batch lines to native items: the CLI's conversion
(`batchroute_client/cli/inputs.py`) and the service's, which the console's pastes and uploads
go through (`services/compat/vendor_lines.py`), give the same items for the same lines
(tests/fixtures/vendor_lines.jsonl, also pasted and uploaded by the browser tests)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from batchroute_client.cli.inputs import InputError, convert

from batchroute.domain.batches.jsonl import parse_jsonl
from batchroute.domain.batches.preflight import Issue
from batchroute.services.compat.vendor_lines import as_items

VENDOR_LINES = Path(__file__).parents[1] / "fixtures" / "vendor_lines.jsonl"
PRESET_LINE = {
    "custom_id": "preset-1",
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {"preset": "support@2", "messages": [{"role": "user", "content": "Hi"}]},
}


def _cli_items(path: Path) -> list[object]:
    out = io.BytesIO()
    convert(path, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _service_items(data: bytes) -> list[object]:
    return [item for _, item in as_items(parse_jsonl(iter([data])))]


def test_the_cli_and_the_service_make_the_same_items_of_the_same_lines(tmp_path: Path) -> None:
    data = VENDOR_LINES.read_bytes() + json.dumps(PRESET_LINE).encode() + b"\n"
    path = tmp_path / "lines.jsonl"
    path.write_bytes(data)
    cli, service = _cli_items(path), _service_items(data)
    assert cli == service
    assert [item["customer_item_id"] for item in service if isinstance(item, dict)] == [
        "chat-1",
        "resp-1",
        "emb-1",
        "native-1",
        "preset-1",
    ]
    assert service[2] == {
        "customer_item_id": "emb-1",
        "operation": "embeddings",
        "model": "BAAI/bge-large-en-v1.5",
        "input": {"input": "a sentence to embed"},
    }
    assert service[4] == {
        "customer_item_id": "preset-1",
        "operation": "responses",
        "input": {"messages": [{"role": "user", "content": "Hi"}]},
        "preset": "support@2",
    }


def test_a_vendor_line_the_cli_refuses_is_an_issue_on_its_line_for_the_service() -> None:
    line = {"custom_id": "x", "method": "GET", "url": "/v1/chat/completions", "body": {"model": "m"}}
    ((number, issue),) = list(as_items(parse_jsonl(iter([b"\n" + json.dumps(line).encode()]))))
    assert isinstance(issue, Issue)
    assert (number, issue.line, issue.path, issue.code) == (2, 2, "method", "invalid_field")
    assert issue.message == "method must be POST."


FOREIGN_LINES = [
    {"url": "/v1/chat/completions", "body": {"model": "m", "input": "Hi"}},
    {"url": "/v1/responses", "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}},
    {"url": "/v1/embeddings", "body": {"model": "m", "text": "a sentence"}},
]


def test_a_body_in_the_other_endpoints_dialect_is_refused_by_the_cli_and_the_service(tmp_path: Path) -> None:
    rows = [{"custom_id": f"f-{n}", "method": "POST", **line} for n, line in enumerate(FOREIGN_LINES)]
    data = b"".join(json.dumps(row).encode() + b"\n" for row in rows)
    path = tmp_path / "foreign.jsonl"
    path.write_bytes(data)
    with pytest.raises(InputError) as refused:
        _cli_items(path)
    assert str(refused.value).splitlines() == [
        "foreign.jsonl: 3 unusable line(s):",
        "foreign.jsonl:1: Unrecognized request argument supplied: input (/v1/chat/completions)",
        "foreign.jsonl:2: Unrecognized request argument supplied: messages (/v1/responses)",
        "foreign.jsonl:3: Unrecognized request argument supplied: text (/v1/embeddings)",
    ]
    issues = list(as_items(parse_jsonl(iter([data]))))
    assert [(number, issue.path) for number, issue in issues if isinstance(issue, Issue)] == [
        (1, "body.input"),
        (2, "body.messages"),
        (3, "body.text"),
    ]
