"""Requests that name a preset, on every path that reads items or chat bodies, on moto
(docs/presets.md, Resolution): native batch items (inline, an input file, a quote), a
batch-wide preset, direct and queued chat, and vendor-compatible rows; `name@version` pins an
old version after an edit; an unknown, archived or another org's preset is the path's usual
validation error; each distinct preset a batch names is loaded once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.aws import client as aws_client
from batchroute.adapters.dynamo.batch_records import BatchRecords
from batchroute.config import Settings, get_settings
from batchroute.domain.batches.artifact_keys import input_chunk_key
from batchroute.domain.batches.record import batch_id_for
from batchroute.wiring import wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.batch_pipeline_support import heartbeat_all_lanes, run_until_done
from tests.integration.principals import TestOrg, new_org

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # sync lanes: runs within the test
MINI = "gpt-4o-mini"
SYSTEM_V1 = "You triage support tickets. Answer with one word."
SYSTEM_V2 = "You triage support tickets. Answer with one sentence, politely."
COMPAT = "/v1/compat/v1"


@pytest.fixture
def settings(local_aws: LocalStack) -> Settings:
    # Simulated providers answer at once: these tests never wait for time.
    return get_settings().model_copy(update={"simulated_ttft_ms": 0, "simulated_inter_token_ms": 0})


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    identity_store.cache_clear()
    heartbeat_all_lanes()
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="10")


def make_preset(client: TestClient, org: TestOrg, name: str = "triage", **fields: Any) -> dict[str, Any]:
    body = {
        "name": name,
        "model": LLAMA,
        "operation": "responses",
        "system_prompt": SYSTEM_V1,
        "parameters": {"max_output_tokens": 48, "temperature": 0.1},
        **fields,
    }
    response = client.post("/v1/presets", json=body, headers=org.key_headers("member"))
    assert response.status_code == 201, response.text
    return dict(response.json())


def item(n: int, **fields: Any) -> dict[str, Any]:
    return {
        "customer_item_id": f"ticket-{n}",
        "input": {"messages": [{"role": "user", "content": f"Ticket {n}: the printer is on fire."}]},
        **fields,
    }


def create_batch(client: TestClient, org: TestOrg, body: dict[str, Any], key: str = "presets-0001") -> Any:
    return client.post("/v1/batches", json=body, headers={**org.key_headers(), "Idempotency-Key": key})


def stored_items(stack: LocalStack, batch_id: str) -> list[dict[str, Any]]:
    """The items as the batch keeps them (its first input chunk), in input order."""
    body = aws_client("s3").get_object(Bucket=stack.buckets["artifacts"], Key=input_chunk_key(batch_id, 0))
    return [json.loads(line)["item"] for line in body["Body"].read().splitlines()]


def run(stack: LocalStack, batch_id: str) -> None:
    batch = BatchRecords(get_settings().table_name("batches")).get(batch_id)
    assert batch is not None and batch.execution_arn, batch
    assert run_until_done(stack, batch.execution_arn)["status"] == "SUCCEEDED"


def preflight_errors(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "batch_preflight_failed"
    return list(error["details"]["preflight"]["errors"])


# -- native batches ----------------------------------------------------------------------------------
def test_batch_items_are_filled_from_their_preset_and_say_which_version(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    make_preset(client, org)
    own_system = {"role": "system", "content": "Answer in French."}
    items = [
        item(0, preset="triage"),
        # the item's own model, system message and temperature win over the preset's
        item(
            1,
            preset="triage",
            model=MINI,
            input={"messages": [own_system, {"role": "user", "content": "Hi"}], "temperature": 0.9},
        ),
        item(2, operation="responses", model=LLAMA),  # no preset: untouched
    ]
    # When a batch is created from items naming the preset (no model, no operation given)
    response = create_batch(client, org, {"items": items})
    # Then it is accepted, and the batch lists the preset version its items used
    assert response.status_code == 202, response.text
    batch_id = response.json()["batch"]["id"]
    batch = client.get(f"/v1/batches/{batch_id}", headers=org.key_headers()).json()["batch"]
    assert batch["presets"] == ["triage@1"]
    # And each item's view says which preset version it was expanded from
    rows = client.get(f"/v1/batches/{batch_id}/items", headers=org.key_headers()).json()["data"]
    assert [(r["customer_item_id"], r["model"], r["operation"], r.get("preset")) for r in rows] == [
        ("ticket-0", LLAMA, "responses", "triage@1"),
        ("ticket-1", MINI, "responses", "triage@1"),
        ("ticket-2", LLAMA, "responses", None),
    ]
    # And the stored items carry the filled fields: the system prompt first, the parameters
    first, second, third = stored_items(local_aws, batch_id)
    assert first["input"]["messages"][0] == {"role": "system", "content": SYSTEM_V1}
    assert first["input"]["temperature"] == 0.1 and first["max_output_tokens"] == 48
    assert "preset" not in first and first["preset_version"] == "triage@1"
    assert second["input"]["messages"][0] == own_system and len(second["input"]["messages"]) == 2
    assert second["input"]["temperature"] == 0.9
    assert "preset_version" not in third and third["input"] == items[2]["input"]
    # And the batch runs: the expanded items are ordinary items
    run(local_aws, batch_id)
    results = client.get(f"/v1/batches/{batch_id}/results", headers=org.key_headers()).json()["data"]
    assert [r["status"] for r in results] == ["completed"] * 3


def test_name_at_version_pins_an_old_version_after_an_edit(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    make_preset(client, org)
    edited = client.patch(
        "/v1/presets/triage", json={"system_prompt": SYSTEM_V2}, headers=org.key_headers("member")
    )
    assert edited.status_code == 200 and edited.json()["version"] == 2
    response = create_batch(
        client,
        org,
        {"items": [item(0, preset="triage"), item(1, preset="triage@1"), item(2, preset="triage@2")]},
    )
    assert response.status_code == 202, response.text
    batch_id = response.json()["batch"]["id"]
    systems = [i["input"]["messages"][0]["content"] for i in stored_items(local_aws, batch_id)]
    assert systems == [SYSTEM_V2, SYSTEM_V1, SYSTEM_V2]
    assert [i["preset_version"] for i in stored_items(local_aws, batch_id)] == [
        "triage@2",
        "triage@1",
        "triage@2",
    ]
    batch = client.get(f"/v1/batches/{batch_id}", headers=org.key_headers()).json()["batch"]
    assert batch["presets"] == ["triage@2", "triage@1"]


def test_a_quote_locks_the_version_it_expanded(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    make_preset(client, org)
    # Given a quote of items naming the preset
    quote = client.post(
        "/v1/quotes/model", json={"items": [item(0, preset="triage")]}, headers=org.key_headers()
    )
    assert quote.status_code == 200, quote.text
    # When the preset is edited before the batch is created
    client.patch("/v1/presets/triage", json={"system_prompt": SYSTEM_V2}, headers=org.key_headers())
    # Then a batch from the quote alone runs what was quoted: version 1
    alone = create_batch(client, org, {"quote_id": quote.json()["quote_id"]})
    assert alone.status_code == 202, alone.text
    (stored,) = stored_items(local_aws, alone.json()["batch"]["id"])
    assert stored["preset_version"] == "triage@1"
    assert stored["input"]["messages"][0]["content"] == SYSTEM_V1
    # And the same items sent again now expand to version 2: not what was quoted
    again = create_batch(
        client,
        org,
        {"quote_id": quote.json()["quote_id"], "items": [item(0, preset="triage")]},
        key="presets-0002",
    )
    assert again.status_code == 409 and again.json()["error"]["code"] == "quote_mismatch"


def test_an_input_file_and_a_batch_wide_preset(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    make_preset(client, org, name="private-triage", routing={"privacy_tier": "confidential"})
    lines = b"".join(json.dumps(item(n)).encode() + b"\n" for n in range(3))
    uploaded = client.post(
        "/v1/files",
        files={"file": ("items.jsonl", lines, "application/jsonl")},
        data={"purpose": "batch"},
        headers=org.key_headers(),
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    # When a batch names the preset for the whole file
    response = create_batch(
        client, org, {"input_file_id": uploaded.json()["file"]["id"], "preset": "private-triage"}
    )
    # Then every item is expanded, and the preset's privacy tier is the batch's
    assert response.status_code == 202, response.text
    batch_id = response.json()["batch"]["id"]
    run(local_aws, batch_id)  # a file's items are read and chunked by the Intake step
    assert {i["preset_version"] for i in stored_items(local_aws, batch_id)} == {"private-triage@1"}
    batch = client.get(f"/v1/batches/{batch_id}", headers=org.key_headers()).json()["batch"]
    assert batch["privacy_tier"] == "confidential" and batch["presets"] == ["private-triage@1"]
    # And a body's own routing field wins over the preset's
    own = create_batch(
        client,
        org,
        {"items": [item(9)], "preset": "private-triage", "privacy_tier": "standard"},
        key="presets-0003",
    )
    assert own.status_code == 202 and own.json()["batch"]["privacy_tier"] == "standard"


def test_an_unresolvable_preset_is_a_preflight_error_at_the_items_path(
    client: TestClient, org: TestOrg
) -> None:
    make_preset(client, org)
    make_preset(client, org, name="retired")
    assert client.delete("/v1/presets/retired", headers=org.key_headers()).status_code == 200
    theirs = new_org()
    make_preset(client, theirs, name="theirs")
    items = [
        item(0, preset="triage"),
        item(1, preset="nope"),
        item(2, preset="retired@1"),
        item(3, preset="triage@7"),
        item(4, preset="theirs"),
        item(5, preset="Not A Ref"),
    ]
    errors = preflight_errors(create_batch(client, org, {"items": items}))
    assert [(e["path"], e["code"]) for e in errors] == [
        ("items[1].preset", "preset_not_found"),
        ("items[2].preset", "preset_archived"),
        ("items[3].preset", "preset_version_not_found"),
        ("items[4].preset", "preset_not_found"),
        ("items[5].preset", "invalid_preset_ref"),
    ]
    # And a quote says the same; a bad batch-wide preset is a 400 naming `preset`
    assert preflight_errors(client.post("/v1/quotes/model", json={"items": items}, headers=org.key_headers()))
    wide = create_batch(client, org, {"items": [item(0)], "preset": "retired"}, key="presets-0004")
    assert wide.status_code == 400 and wide.json()["error"]["code"] == "preset_archived"
    assert wide.json()["error"]["details"]["field"] == "preset"


def test_each_distinct_preset_is_loaded_once_per_batch(
    client: TestClient, org: TestOrg, settings: Settings
) -> None:
    make_preset(client, org)
    make_preset(client, org, name="other")
    store = wiring_for(settings, get_clock()).presets.store
    reads: list[str] = []
    head, version = store.head, store.version

    def counted_head(org_id: str, name: str) -> Any:
        reads.append(f"head:{name}")
        return head(org_id, name)

    def counted_version(org_id: str, name: str, number: int) -> Any:
        reads.append(f"version:{name}@{number}")
        return version(org_id, name, number)

    store.head, store.version = counted_head, counted_version  # type: ignore[method-assign]
    try:
        items = [item(n, preset="triage" if n % 2 else "other") for n in range(200)]
        response = create_batch(client, org, {"items": items})
    finally:
        del store.head, store.version
    assert response.status_code == 202, response.text
    assert sorted(reads) == ["head:other", "head:triage"]


# -- chat ----------------------------------------------------------------------------------------------
def test_a_direct_chat_request_is_filled_from_its_preset(client: TestClient, org: TestOrg) -> None:
    make_preset(client, org, parameters={"max_output_tokens": 5})
    messages = [{"role": "user", "content": "My invoice is wrong."}]
    plain = client.post(
        "/v1/chat/completions", json={"model": LLAMA, "messages": messages}, headers=org.key_headers()
    )
    # When a chat body names the preset and gives no model
    preset = client.post(
        "/v1/chat/completions", json={"preset": "triage", "messages": messages}, headers=org.key_headers()
    )
    # Then the preset's model answers, its system prompt is sent (more prompt tokens), its
    # max_tokens caps the answer, and the answer names the version
    assert plain.status_code == 200 and preset.status_code == 200, preset.text
    completion = preset.json()
    assert completion["model"] == LLAMA and preset.headers["x-service-preset"] == "triage@1"
    assert completion["usage"]["prompt_tokens"] > plain.json()["usage"]["prompt_tokens"]
    assert (
        completion["usage"]["completion_tokens"] <= 5
        and completion["choices"][0]["finish_reason"] == "length"
    )
    record = BatchRecords(get_settings().table_name("batches")).get(preset.headers["x-service-batch-id"])
    assert record is not None and list(record.presets or []) == ["triage@1"]


def test_a_queued_chat_request_records_its_preset_on_the_job(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    make_preset(client, org)
    client.patch("/v1/presets/triage", json={"system_prompt": SYSTEM_V2}, headers=org.key_headers())
    body = {"preset": "triage@1", "messages": [{"role": "user", "content": "Refund?"}], "batch": True}
    response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["preset"] == "triage@1" and job["model"] == LLAMA
    batch_id = batch_id_for(job["id"])
    assert batch_id is not None
    (stored,) = stored_items(local_aws, batch_id)
    assert stored["input"]["messages"][0] == {"role": "system", "content": SYSTEM_V1}
    assert stored["max_output_tokens"] == 48 and stored["preset_version"] == "triage@1"
    run(local_aws, batch_id)
    done = client.get(f"/v1/chat/completions/{job['id']}", headers=org.key_headers()).json()
    assert done["status"] == "completed" and done["preset"] == "triage@1"


@pytest.mark.parametrize(
    ("preset", "code"),
    [
        ("nope", "preset_not_found"),
        ("triage@3", "preset_version_not_found"),
        ("Bad Ref", "invalid_preset_ref"),
    ],
)
def test_a_chat_body_naming_an_unknown_preset_is_400(
    client: TestClient, org: TestOrg, preset: str, code: str
) -> None:
    make_preset(client, org)
    body = {"preset": preset, "messages": [{"role": "user", "content": "Hi"}]}
    response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["details"]["field"] == "preset"


@pytest.mark.parametrize(
    "version",
    ["evil@1\r\nSet-Cookie: service_ui_session=attacker", "triage@1\n", "\u20acuro@1", "triage", "x" * 5000],
)
@pytest.mark.parametrize("with_preset", [False, True])
def test_a_chat_body_whose_preset_version_is_not_one_is_400_before_any_provider_call(
    client: TestClient, org: TestOrg, version: str, with_preset: bool
) -> None:
    # It is echoed in the x-service-preset header and recorded: a header injection, a 500
    # after the provider was paid (non-Latin-1), or any text recorded as a version, before.
    body = {"model": LLAMA, "messages": [{"role": "user", "content": "Hi"}], "preset_version": version}
    if with_preset:  # beside a preset, whose expansion would replace it unseen
        make_preset(client, org)
        body["preset"] = "triage"
    response = client.post("/v1/chat/completions", json=body, headers=org.key_headers())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["details"]["field"] == "preset_version"
    assert "x-service-preset" not in response.headers and "x-service-batch-id" not in response.headers


# -- the vendor-compatible surface ---------------------------------------------------------------------
def compat_row(n: int, **body: Any) -> dict[str, Any]:
    payload = {"messages": [{"role": "user", "content": f"Question {n}"}], **body}
    return {"custom_id": f"req-{n}", "method": "POST", "url": "/v1/chat/completions", "body": payload}


def compat_file(client: TestClient, org: TestOrg, rows: list[dict[str, Any]]) -> str:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    response = client.post(
        f"{COMPAT}/files",
        files={"file": ("input.jsonl", data, "application/jsonl")},
        data={"purpose": "batch"},
        headers=org.key_headers(),
    )
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def test_compat_rows_name_a_preset_in_their_body(
    client: TestClient, org: TestOrg, local_aws: LocalStack
) -> None:
    make_preset(client, org)
    file_id = compat_file(
        client, org, [compat_row(0, preset="triage"), compat_row(1, model=MINI, preset="triage")]
    )
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    created = client.post(f"{COMPAT}/batches", json=body, headers=org.key_headers())
    assert created.status_code == 200, created.text
    batch_id = created.json()["id"]
    rows = client.get(f"/v1/batches/{batch_id}/items", headers=org.key_headers()).json()["data"]
    assert [(r["customer_item_id"], r["model"], r["preset"]) for r in rows] == [
        ("req-0", LLAMA, "triage@1"),
        ("req-1", MINI, "triage@1"),
    ]
    assert stored_items(local_aws, batch_id)[0]["input"]["messages"][0]["content"] == SYSTEM_V1
    run(local_aws, batch_id)
    done = client.get(f"{COMPAT}/batches/{batch_id}", headers=org.key_headers()).json()
    assert done["status"] == "completed" and done["request_counts"]["completed"] == 2


def test_a_compat_row_naming_an_unknown_preset_is_a_vendor_error(client: TestClient, org: TestOrg) -> None:
    file_id = compat_file(client, org, [compat_row(0, preset="missing")])
    body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    response = client.post(f"{COMPAT}/batches", json=body, headers=org.key_headers())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "body.preset" and "missing" in error["message"]
