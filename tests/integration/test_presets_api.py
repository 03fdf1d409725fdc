"""Presets over HTTP on moto (docs/presets.md): create, read, list with a cursor, every edit a
new version, archive and revive, validation with field paths, the per-org limit, another
org's presets, and the roles."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.clock import FixedClock
from batchroute.config import get_settings
from batchroute.domain.batches.pages import PAGE_MAX_BYTES
from batchroute.domain.presets.presets import (
    MAX_PRESETS_PER_ORG,
    RESPONSE_FORMAT_MAX_BYTES,
    SYSTEM_PROMPT_MAX,
)
from batchroute.wiring import wiring_for
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.principals import TestOrg, new_org

PATH = "/v1/presets"
NOW = datetime(2026, 4, 1, 9, 30, tzinfo=UTC)
MODEL = "gpt-4o-mini"


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture
def client(local_aws: LocalStack, clock: FixedClock) -> TestClient:
    identity_store.cache_clear()
    app = create_app()
    app.dependency_overrides[get_clock] = lambda: clock
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org()


def triage(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "support-triage",
        "description": "Ticket triage, one line",
        "model": MODEL,
        "operation": "responses",
        "system_prompt": "You triage support tickets. Answer in one line.",
        "parameters": {"max_tokens": 200, "temperature": 0.2, "stop": ["\n\n"]},
        "routing": {"privacy_tier": "confidential", "max_price": {"output_per_mtok": 2}},
        "metadata": {"team": "support"},
    }
    body.update(overrides)
    return body


def create(client: TestClient, org: TestOrg, body: dict[str, Any], role: str = "member") -> Any:
    return client.post(PATH, json=body, headers=org.key_headers(role))  # type: ignore[arg-type]


def errors_of(response: Any) -> dict[str, str]:
    error = response.json()["error"]
    assert response.status_code == 400, response.text
    assert error["code"] == "invalid_preset"
    assert error["details"]["field"] == error["details"]["errors"][0]["field"]
    return {e["field"]: e["message"] for e in error["details"]["errors"]}


# -- create and read ---------------------------------------------------------------------------
def test_a_created_preset_is_version_1_and_reads_back_the_same(client: TestClient, org: TestOrg) -> None:
    # When a member key creates a preset
    response = create(client, org, triage())
    # Then 201 with version 1 of it: max_tokens taken as max_output_tokens
    assert response.status_code == 201, response.text
    preset = response.json()
    assert preset == {
        "object": "preset",
        "name": "support-triage",
        "version": 1,
        "latest_version": 1,
        "ref": "support-triage@1",
        "description": "Ticket triage, one line",
        "model": MODEL,
        "workflow_product": None,
        "operation": "responses",
        "system_prompt": "You triage support tickets. Answer in one line.",
        "parameters": {
            "max_output_tokens": 200,
            "temperature": 0.2,
            "top_p": None,
            "response_format": None,
            "required_tools": None,
            "stop": ["\n\n"],
        },
        "routing": {
            "routing_mode": None,
            "privacy_tier": "confidential",
            "region": None,
            "max_price": {"output_per_mtok": 2},
        },
        "metadata": {"team": "support"},
        "golden_set": None,
        "archived_at": None,
        "created_at": "2026-04-01T09:30:00.000Z",
        "updated_at": "2026-04-01T09:30:00.000Z",
        "created_by": preset["created_by"],
    }
    assert preset["created_by"].startswith("key_")
    # And any role reads it back, as the latest and as version 1
    assert client.get(f"{PATH}/support-triage", headers=org.key_headers("billing")).json() == preset
    version = client.get(f"{PATH}/support-triage/versions/1", headers=org.key_headers("member")).json()
    assert version["object"] == "preset.version" and version["ref"] == "support-triage@1"
    assert {k: version[k] for k in ("model", "system_prompt", "parameters", "routing")} == {
        k: preset[k] for k in ("model", "system_prompt", "parameters", "routing")
    }
    # And it is stored in the controls table: a head, a version and the org's count
    table = get_settings().table_name("controls")
    items = boto3.client("dynamodb").query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"ORG#{org.org_id}"}},
    )["Items"]
    assert sorted(i["sk"]["S"] for i in items) == [
        "PRESET#support-triage",
        "PRESETS",
        "PRESETV#support-triage#000001",
    ]


def test_the_list_pages_by_name_with_a_cursor(client: TestClient, org: TestOrg) -> None:
    for name in ("delta", "alpha", "charlie", "bravo", "echo"):
        assert create(client, org, {"name": name, "model": MODEL}).status_code == 201
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        query = f"?limit=2&cursor={cursor}" if cursor else "?limit=2"
        page = client.get(f"{PATH}{query}", headers=org.key_headers("billing"))
        assert page.status_code == 200, page.text
        body = page.json()
        assert body["object"] == "list" and body["limit"] == MAX_PRESETS_PER_ORG
        seen.extend(p["name"] for p in body["data"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == ["alpha", "bravo", "charlie", "delta", "echo"] and pages == 3
    # a page that ends the list says so: no cursor to an empty page
    last = client.get(f"{PATH}?limit=5", headers=org.key_headers("billing")).json()
    assert len(last["data"]) == 5 and last["next_cursor"] is None
    tail = client.get(f"{PATH}?limit=1&cursor=delta", headers=org.key_headers("billing")).json()
    assert [p["name"] for p in tail["data"]] == ["echo"] and tail["next_cursor"] is None


def _golden(expected: str) -> dict[str, Any]:
    return {"model": MODEL, "scorer": "contains", "items": [{"input": "é" * 500, "expected": expected}] * 50}


def test_a_golden_set_past_its_byte_limit_is_refused_by_its_field(client: TestClient, org: TestOrg) -> None:
    # Given 50 items each within its own limits (4,000 characters expected), too many bytes
    # together for the preset's storage
    body = {"name": "huge", "model": MODEL, "golden_set": _golden('"' * 4000)}
    # Then 400 naming golden_set.items, not a 500 from the store
    problems = errors_of(create(client, org, body))
    assert list(problems) == ["golden_set.items"] and "at most 204,800 bytes" in problems["golden_set.items"]


def test_a_response_format_past_its_byte_limit_is_refused_by_its_field(
    client: TestClient, org: TestOrg
) -> None:
    # Given a json_schema response_format of ~530 KB: more than the preset's storage holds
    schema = {"type": "object", "properties": {f"field_{n:05}": {"type": "string"} for n in range(20_000)}}
    response_format = {"type": "json_schema", "json_schema": {"name": "big", "schema": schema}}
    body = {"name": "huge", "model": MODEL, "parameters": {"response_format": response_format}}
    # Then 400 naming parameters.response_format, not a 500 from the store
    problems = errors_of(create(client, org, body))
    assert list(problems) == ["parameters.response_format"]
    assert f"at most {RESPONSE_FORMAT_MAX_BYTES:,} bytes" in problems["parameters.response_format"]
    # And one at the limit is kept
    schema = {"type": "object", "properties": {f"f{n:04}": {"type": "string"} for n in range(1_000)}}
    response_format = {"type": "json_schema", "json_schema": {"name": "ok", "schema": schema}}
    body = {"name": "fits", "model": MODEL, "parameters": {"response_format": response_format}}
    assert create(client, org, body).status_code == 201


def test_a_page_of_large_presets_stops_under_lambdas_answer_cap(client: TestClient, org: TestOrg) -> None:
    # Given 22 presets of ~220 KB each (a long prompt and a full golden set): 100 of them would
    # not fit the 6 MB a Lambda answer may carry
    names = [f"big-{n:02d}" for n in range(22)]
    for name in names:
        body = {
            "name": name,
            "model": MODEL,
            "system_prompt": "x" * 20_000,
            "golden_set": _golden("y" * 2900),
        }
        assert create(client, org, body).status_code == 201
    # When they are listed 100 a page
    seen: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    while True:
        query = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = client.get(PATH, params=query, headers=org.key_headers())
        assert page.status_code == 200
        sizes.append(len(page.content))
        seen.extend(p["name"] for p in page.json()["data"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    # Then each page stops short of the cap (PAGE_MAX_BYTES of rows), and the cursor reads on:
    # every preset once, in order
    assert len(sizes) > 1 and max(sizes) < PAGE_MAX_BYTES + 64 * 1024
    assert seen == names
    # And the same holds for a preset's versions
    for _ in range(21):
        edited = client.patch(f"{PATH}/big-00", json={"description": "again"}, headers=org.key_headers())
        assert edited.status_code == 200, edited.text
    versions: list[int] = []
    cursor = None
    pages = 0
    while True:
        query = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"{PATH}/big-00/versions", params=query, headers=org.key_headers())
        assert page.status_code == 200 and len(page.content) < PAGE_MAX_BYTES + 64 * 1024
        versions.extend(v["version"] for v in page.json()["data"])
        pages += 1
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert versions == list(range(22, 0, -1)) and pages > 1
    refused = client.get(f"{PATH}/big-00/versions", params={"cursor": "²"}, headers=org.key_headers())
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_cursor"


# -- versions --------------------------------------------------------------------------------
def test_every_edit_is_a_new_version_and_old_ones_stay_readable(
    client: TestClient, org: TestOrg, clock: FixedClock
) -> None:
    assert create(client, org, triage()).status_code == 201
    clock.advance(minutes=5)
    # When PUT replaces the template (fields left out are dropped)
    put = client.put(
        f"{PATH}/support-triage",
        json={
            "model": "gpt-4.1-mini",
            "system_prompt": "Triage. Be brief.",
            "parameters": {"temperature": 0},
        },
        headers=org.key_headers("admin"),
    )
    assert put.status_code == 200, put.text
    assert put.json()["version"] == 2 and put.json()["routing"]["privacy_tier"] is None
    assert put.json()["created_at"] == "2026-04-01T09:30:00.000Z"
    assert put.json()["updated_at"] == "2026-04-01T09:35:00.000Z"
    # And PATCH changes only what it gives: parameters merge key by key, null removes one
    patch = client.patch(
        f"{PATH}/support-triage",
        json={"parameters": {"top_p": 0.9, "temperature": None}, "description": "v3"},
        headers=org.key_headers("member"),
    )
    assert patch.status_code == 200, patch.text
    latest = patch.json()
    assert latest["version"] == 3 and latest["model"] == "gpt-4.1-mini"
    assert latest["parameters"]["top_p"] == 0.9 and latest["parameters"]["temperature"] is None
    assert latest["system_prompt"] == "Triage. Be brief." and latest["description"] == "v3"
    # And a GET answer sent back to PUT is accepted (its read-only fields ignored): version 4
    again = client.put(f"{PATH}/support-triage", json=latest, headers=org.key_headers())
    assert again.status_code == 200, again.text
    assert again.json()["version"] == 4 and again.json()["parameters"] == latest["parameters"]
    # Then the versions list newest first, with a cursor
    first = client.get(f"{PATH}/support-triage/versions?limit=3", headers=org.key_headers("billing")).json()
    assert [v["version"] for v in first["data"]] == [4, 3, 2] and first["next_cursor"] == "2"
    rest = client.get(
        f"{PATH}/support-triage/versions?limit=3&cursor=2", headers=org.key_headers("billing")
    ).json()
    assert [v["version"] for v in rest["data"]] == [1] and rest["next_cursor"] is None
    # and a page that ends the list says so (no cursor to an empty page)
    whole = client.get(f"{PATH}/support-triage/versions?limit=4", headers=org.key_headers("billing")).json()
    assert len(whole["data"]) == 4 and whole["next_cursor"] is None
    # And version 1 still holds the original template
    one = client.get(f"{PATH}/support-triage/versions/1", headers=org.key_headers()).json()
    assert one["model"] == MODEL and one["routing"]["privacy_tier"] == "confidential"
    missing = client.get(f"{PATH}/support-triage/versions/9", headers=org.key_headers())
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "preset_version_not_found"


def test_the_name_cannot_change_and_a_taken_name_conflicts(client: TestClient, org: TestOrg) -> None:
    assert create(client, org, triage()).status_code == 201
    taken = create(client, org, triage())
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "preset_exists"
    renamed = client.patch(f"{PATH}/support-triage", json={"name": "other"}, headers=org.key_headers())
    assert renamed.status_code == 400 and renamed.json()["error"]["details"]["field"] == "name"


# -- archive ------------------------------------------------------------------------------------
def test_delete_archives_and_a_create_with_the_name_revives_it(client: TestClient, org: TestOrg) -> None:
    assert create(client, org, triage()).status_code == 201
    assert (
        client.patch(
            f"{PATH}/support-triage", json={"description": "v2"}, headers=org.key_headers()
        ).status_code
        == 200
    )
    # When it is deleted
    deleted = client.delete(f"{PATH}/support-triage", headers=org.key_headers("member"))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["archived_at"] == "2026-04-01T09:30:00.000Z"
    # Then it leaves the list (unless asked for), still reads, and takes no edits
    assert client.get(PATH, headers=org.key_headers()).json()["data"] == []
    listed = client.get(f"{PATH}?include_archived=true", headers=org.key_headers()).json()["data"]
    assert [p["name"] for p in listed] == ["support-triage"]
    assert client.get(f"{PATH}/support-triage", headers=org.key_headers()).json()["archived_at"] is not None
    assert client.get(f"{PATH}/support-triage/versions/1", headers=org.key_headers()).status_code == 200
    edit = client.patch(f"{PATH}/support-triage", json={"description": "x"}, headers=org.key_headers())
    assert edit.status_code == 409 and edit.json()["error"]["code"] == "preset_archived"
    twice = client.delete(f"{PATH}/support-triage", headers=org.key_headers())
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "preset_archived"
    # And creating the name again brings it back at the next number: name@2 keeps meaning v2
    revived = create(client, org, triage(description="back"))
    assert revived.status_code == 201, revived.text
    assert revived.json()["version"] == 3 and revived.json()["archived_at"] is None
    assert (
        client.get(f"{PATH}/support-triage/versions/2", headers=org.key_headers()).json()["description"]
        == "v2"
    )


def test_the_org_limit_counts_active_presets(client: TestClient, org: TestOrg, clock: FixedClock) -> None:
    presets = wiring_for(get_settings(), clock).presets
    presets.max_presets = 2
    try:
        assert create(client, org, {"name": "one", "model": MODEL}).status_code == 201
        assert create(client, org, {"name": "two", "model": MODEL}).status_code == 201
        full = create(client, org, {"name": "three", "model": MODEL})
        assert full.status_code == 409 and full.json()["error"]["code"] == "preset_limit"
        assert full.json()["error"]["details"] == {"limit": 2}
        # An archived preset frees its place
        assert client.delete(f"{PATH}/one", headers=org.key_headers()).status_code == 200
        assert create(client, org, {"name": "three", "model": MODEL}).status_code == 201
        back = create(client, org, {"name": "one", "model": MODEL})
        assert back.status_code == 409 and back.json()["error"]["code"] == "preset_limit"
    finally:
        presets.max_presets = MAX_PRESETS_PER_ORG


# -- validation ----------------------------------------------------------------------------------
def test_every_problem_is_named_by_its_field_path(client: TestClient, org: TestOrg) -> None:
    response = create(
        client,
        org,
        {
            "name": "Not A Slug",
            "model": "gpt-4o-mini-typo",
            "parameters": {"temperature": 5, "top_p": 0, "max_output_tokens": 0, "seed": 1},
            "routing": {
                "privacy_tier": "secret",
                "routing_mode": "fastest",
                "max_price": {"per_item_usd": -1},
            },
            "metadata": {"k": {"nested": True}},
            "colour": "blue",
        },
    )
    fields = errors_of(response)
    assert set(fields) == {
        "colour",
        "name",
        "model",
        "parameters.temperature",
        "parameters.top_p",
        "parameters.max_output_tokens",
        "parameters.seed",
        "routing.routing_mode",
        "routing.privacy_tier",
        "routing.max_price.per_item_usd",
        "metadata.k",
    }
    assert "gpt-4o-mini-typo" in fields["model"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "text-embedding-3-small", "operation": "responses"}, "operation"),
        ({"workflow_product": "no-such-product"}, "workflow_product"),
        ({"model": MODEL, "workflow_product": "ticket-classification"}, "workflow_product"),
        ({"model": MODEL, "system_prompt": "x" * (SYSTEM_PROMPT_MAX + 1)}, "system_prompt"),
        (
            {"model": MODEL, "parameters": {"response_format": {"type": "json_schema"}}},
            "parameters.response_format",
        ),
        ({"model": MODEL, "parameters": {"required_tools": ["teleport"]}}, "parameters.required_tools"),
        ({"model": MODEL, "parameters": {"stop": ["a", "b", "c", "d", "e"]}}, "parameters.stop"),
        ({"model": MODEL, "routing": {"region": ""}}, "routing.region"),
        ({"model": MODEL, "parameters": "hot"}, "parameters"),
        (  # an embeddings model gives no text answer to score: its regression would never run
            {
                "model": "text-embedding-3-small",
                "golden_set": {"items": [{"input": "a", "expected": "b"}], "scorer": "exact"},
            },
            "golden_set.model",
        ),
    ],
)
def test_each_rule_names_its_field(
    client: TestClient, org: TestOrg, body: dict[str, Any], field: str
) -> None:
    fields = errors_of(create(client, org, {"name": "checked", **body}))
    assert field in fields, fields


def test_a_workflow_product_preset_carries_the_contract(client: TestClient, org: TestOrg) -> None:
    response = create(client, org, {"name": "tickets", "workflow_product": "ticket-classification"})
    assert response.status_code == 201, response.text
    preset = response.json()
    assert preset["operation"] == "responses" and preset["model"] is None
    assert "ticket" in preset["system_prompt"].lower()
    assert preset["parameters"]["response_format"]["type"] == "json_schema"


def test_a_body_that_is_not_an_object_is_400(client: TestClient, org: TestOrg) -> None:
    response = client.post(PATH, json=["support-triage"], headers=org.key_headers())
    assert response.status_code == 400


# -- another org, roles ------------------------------------------------------------------------------
def test_another_orgs_presets_are_not_found(client: TestClient, org: TestOrg) -> None:
    assert create(client, org, triage()).status_code == 201
    other = new_org()
    headers = other.key_headers("owner")
    for method, path, body in (
        ("GET", f"{PATH}/support-triage", None),
        ("GET", f"{PATH}/support-triage/versions", None),
        ("GET", f"{PATH}/support-triage/versions/1", None),
        ("PUT", f"{PATH}/support-triage", {"model": MODEL}),
        ("PATCH", f"{PATH}/support-triage", {"description": "mine now"}),
        ("DELETE", f"{PATH}/support-triage", None),
    ):
        response = client.request(method, path, json=body, headers=headers)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["code"] in ("preset_not_found", "preset_version_not_found")
    assert client.get(PATH, headers=headers).json()["data"] == []
    # And the other org may use the same name for its own preset, untouched by ours
    assert create(client, other, triage(description="theirs")).status_code == 201
    ours = client.get(f"{PATH}/support-triage", headers=org.key_headers()).json()
    assert ours["description"] == "Ticket triage, one line" and ours["version"] == 1


@pytest.mark.parametrize(
    ("role", "may_write"), [("owner", True), ("admin", True), ("member", True), ("billing", False)]
)
def test_every_role_reads_and_the_roles_that_run_work_write(
    client: TestClient, org: TestOrg, role: str, may_write: bool
) -> None:
    assert create(client, org, triage(), role="owner").status_code == 201
    headers = org.key_headers(role)  # type: ignore[arg-type]
    assert client.get(PATH, headers=headers).status_code == 200
    assert client.get(f"{PATH}/support-triage", headers=headers).status_code == 200
    writes = [
        client.post(PATH, json={"name": f"by-{role}", "model": MODEL}, headers=headers),
        client.patch(f"{PATH}/support-triage", json={"description": role}, headers=headers),
        client.put(f"{PATH}/support-triage", json={"model": MODEL}, headers=headers),
        client.delete(f"{PATH}/support-triage", headers=headers),
    ]
    for response in writes:
        if may_write:
            assert response.status_code < 300, response.text
        else:
            assert response.status_code == 403, response.text
            assert response.json()["error"]["code"] == "permission_denied"


def test_no_credentials_is_401(client: TestClient) -> None:
    assert client.get(PATH).status_code == 401
    assert client.post(PATH, json=triage()).status_code == 401


@pytest.mark.usefixtures("serializable_transactions")
def test_racing_edits_never_share_a_version(client: TestClient, org: TestOrg) -> None:
    # Given a preset edited by eight callers at once
    assert create(client, org, triage()).status_code == 201
    headers = org.key_headers()
    answers: list[Any] = []

    def edit(n: int) -> None:
        answers.append(
            client.patch(f"{PATH}/support-triage", json={"description": f"edit {n}"}, headers=headers)
        )

    threads = [threading.Thread(target=edit, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each edit either made its own version or was told to retry; none was lost
    won = [a.json() for a in answers if a.status_code == 200]
    lost = [a for a in answers if a.status_code != 200]
    assert won and all(
        a.status_code == 409 and a.json()["error"]["code"] == "concurrent_update" for a in lost
    )
    versions = client.get(f"{PATH}/support-triage/versions?limit=100", headers=headers).json()["data"]
    assert [v["version"] for v in versions] == list(range(len(won) + 1, 0, -1))
    assert sorted(w["version"] for w in won) == list(range(2, len(won) + 2))
    assert {v["description"] for v in versions[:-1]} == {w["description"] for w in won}
