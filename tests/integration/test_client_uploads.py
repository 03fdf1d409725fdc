"""A direct upload of a file whose name is not ASCII, against the real app in-process (moto):
the name goes in `Content-Disposition` as an ASCII fallback (`données.jsonl` ->
`donn_es.jsonl`), so the upload is sent and checked instead of failing before any request."""

from __future__ import annotations

import json
from pathlib import Path

from batchroute_client import Client
from fastapi.testclient import TestClient

from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.batch_pipeline_support import heartbeat_all_lanes
from tests.integration.principals import new_org
from tests.integration.test_quotes import _item


def test_a_file_with_a_non_ascii_name_is_uploaded_directly_and_processed(
    local_aws: LocalStack, tmp_path: Path
) -> None:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    http = TestClient(create_app(), raise_server_exceptions=False)
    sdk = Client(api_key=new_org(credit_usd="10").api_key(), http_client=http, sleep=lambda _: None)
    path = tmp_path / "données-août.jsonl"
    path.write_text("".join(json.dumps(_item(i)) + "\n" for i in range(2)), encoding="utf-8")
    uploaded = sdk.files.upload(path)
    assert (uploaded.status, uploaded.item_count, uploaded.filename) == ("processed", 2, "donn_es-ao_t.jsonl")
    assert sdk.quotes.model(input_file_id=uploaded.id).item_count == 2
