"""GET/PUT /v1/routing/policy and its history over HTTP on moto: defaults, a saved change
and its audit entry (who, when, before/after), version checks, validation with field
paths, roles, and one org never seeing or changing another's policy."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.route_policies import RoutePolicyStore
from batchroute.config import get_settings
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from tests.integration.dynamo_cuts import QueriesCutShort
from tests.integration.principals import TestOrg, new_org

PATH = "/v1/routing/policy"
POLICY = {
    "provider_allow": ["groq", "deepinfra"],
    "provider_deny": ["openai"],
    "allowed_regions": ["us"],
    "routing_mode": "sla_aware",
    "privacy_tier_floor": "confidential",
    "max_price_per_million_tokens": {
        "responses": {"input": 0.5, "output": {"currency": "usd", "amount": "1.5"}}
    },
    "chat_fallbacks_allowed": False,
}


@pytest.fixture
def client(local_aws: LocalStack) -> TestClient:
    identity_store.cache_clear()
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org()


def put(client: TestClient, headers: dict[str, str], body: Any, **extra: str) -> Any:
    return client.put(PATH, json=body, headers={**headers, **extra})


def test_the_default_policy_restricts_nothing(client: TestClient, org: TestOrg) -> None:
    response = client.get(PATH, headers=org.key_headers("member"))
    assert response.status_code == 200, response.text
    assert response.headers["etag"] == '"0"'
    assert response.json()["policy"] == {
        "object": "routing_policy",
        "org_id": org.org_id,
        "configured": False,
        "version": 0,
        "provider_allow": [],
        "provider_deny": [],
        "allowed_regions": [],
        "routing_mode": None,
        "privacy_tier_floor": None,
        "max_price_per_million_tokens": {},
        "chat_fallbacks_allowed": True,
        "created_at": None,
        "updated_at": None,
        "updated_by": None,
    }


def test_a_saved_policy_is_read_back_and_its_change_is_in_the_history(
    client: TestClient, org: TestOrg
) -> None:
    # Given the owner's session / When it saves a policy
    owner = org.session_headers("owner")
    saved = put(client, owner, POLICY, **{"X-Forwarded-For": "203.0.113.9"})
    # Then the full policy comes back at version 1, money in the spec's shape
    assert saved.status_code == 200, saved.text
    assert saved.headers["etag"] == '"1"'
    policy = saved.json()["policy"]
    assert policy["configured"] is True and policy["version"] == 1
    assert policy["provider_allow"] == ["groq", "deepinfra"] and policy["allowed_regions"] == ["us"]
    assert policy["max_price_per_million_tokens"] == {
        "responses": {
            "input": {"currency": "usd", "amount": "0.50"},
            "output": {"currency": "usd", "amount": "1.50"},
        }
    }
    assert policy["updated_by"] == org.owner_user_id and policy["created_at"] == policy["updated_at"]
    # And any member reads the same policy
    assert client.get(PATH, headers=org.key_headers("billing")).json()["policy"] == policy
    # And the history has the change: who, when, before and after (only what changed)
    history = client.get(f"{PATH}/history", headers=org.key_headers("member")).json()
    (entry,) = history["data"]
    assert history["next_cursor"] is None
    assert entry["actor_user_id"] == org.owner_user_id and entry["actor_role"] == "owner"
    assert entry["actor_key_id"] is None and entry["version"] == 1
    assert entry["action"] == "routing_policy.update" and entry["created_at"] == policy["updated_at"]
    assert entry["before"]["provider_allow"] == [] and entry["after"]["provider_allow"] == [
        "groq",
        "deepinfra",
    ]
    assert (
        entry["before"]["chat_fallbacks_allowed"] is True
        and entry["after"]["chat_fallbacks_allowed"] is False
    )
    assert set(entry["after"]) == set(POLICY)


def test_a_partial_update_changes_only_its_fields_and_history_pages_newest_first(
    client: TestClient, org: TestOrg
) -> None:
    # Given a saved policy
    assert put(client, org.session_headers(), POLICY).status_code == 200
    # When an admin's API key changes one field, then resets another with null
    admin = org.key_headers("admin")
    second = put(client, admin, {"routing_mode": "hybrid"}).json()["policy"]
    third = put(client, admin, {"provider_deny": None}).json()["policy"]
    # Then the other fields stayed and each save moved the version
    assert second["version"] == 2 and second["provider_allow"] == ["groq", "deepinfra"]
    assert third["version"] == 3 and third["provider_deny"] == [] and third["routing_mode"] == "hybrid"
    # And saving the same values again changes nothing and writes no entry
    same = put(client, admin, {"routing_mode": "hybrid"}).json()["policy"]
    assert same["version"] == 3
    # And the history pages newest first with a cursor
    first_page = client.get(f"{PATH}/history?limit=2", headers=admin).json()
    assert [e["version"] for e in first_page["data"]] == [3, 2]
    assert (
        first_page["data"][0]["actor_key_id"] is not None and first_page["data"][0]["actor_role"] == "admin"
    )
    assert first_page["data"][0]["before"] == {"provider_deny": ["openai"]}
    assert first_page["data"][0]["after"] == {"provider_deny": []}
    rest = client.get(f"{PATH}/history?limit=2&cursor={first_page['next_cursor']}", headers=admin).json()
    assert [e["version"] for e in rest["data"]] == [1] and rest["next_cursor"] is None


def test_a_stale_version_is_refused(client: TestClient, org: TestOrg) -> None:
    owner = org.key_headers("owner")
    assert put(client, owner, {"routing_mode": "hybrid"}, **{"If-Match": '"0"'}).status_code == 200
    # A save based on version 0 after version 1 was written: 409, nothing changed
    stale = put(client, owner, {"routing_mode": "cheapest"}, **{"If-Match": '"0"'})
    assert stale.status_code == 409, stale.text
    assert stale.json()["error"]["code"] == "policy_version_mismatch"
    assert stale.json()["error"]["details"] == {"expected_version": 0, "current_version": 1}
    in_body = put(client, owner, {"routing_mode": "cheapest", "version": 0})
    assert in_body.status_code == 409
    # The right version saves
    ok = put(client, owner, {"routing_mode": "cheapest", "version": 1})
    assert ok.status_code == 200 and ok.json()["policy"]["version"] == 2
    bad = put(client, owner, {"routing_mode": "cheapest"}, **{"If-Match": "latest"})
    assert bad.status_code == 400 and bad.json()["error"]["details"]["field"] == "If-Match"
    assert client.get(PATH, headers=owner).json()["policy"]["routing_mode"] == "cheapest"


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"provider_allow": ["groq", "nosuch"]}, ["provider_allow[1]"]),
        ({"allowed_regions": ["mars"], "routing_mode": "fastest"}, ["allowed_regions[0]", "routing_mode"]),
        (
            {"max_price_per_million_tokens": {"responses": {"input": -1}}},
            ["max_price_per_million_tokens.responses.input"],
        ),
        (
            {"privacy_tier_floor": "secret", "chat_fallbacks_allowed": "no"},
            ["privacy_tier_floor", "chat_fallbacks_allowed"],
        ),
        ({"provider_allow": ["groq"], "provider_deny": ["groq"]}, ["provider_deny"]),
        ({"colour": "blue"}, ["colour"]),
    ],
)
def test_invalid_policies_are_400_with_field_paths(
    client: TestClient, org: TestOrg, body: dict[str, Any], fields: list[str]
) -> None:
    response = put(client, org.key_headers("owner"), body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert [e["field"] for e in error["details"]["errors"]] == fields
    assert error["details"]["field"] == fields[0]
    # Nothing was saved
    assert client.get(PATH, headers=org.key_headers("owner")).json()["policy"]["version"] == 0


def test_an_unknown_provider_is_named_in_the_message(client: TestClient, org: TestOrg) -> None:
    response = put(client, org.key_headers("owner"), {"provider_deny": ["nosuch"]})
    (issue,) = response.json()["error"]["details"]["errors"]
    assert "'nosuch'" in issue["message"] and "groq" in issue["message"]


def test_a_body_that_is_not_an_object_is_400(client: TestClient, org: TestOrg) -> None:
    response = put(client, org.key_headers("owner"), ["provider_allow"])
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("role", ["member", "billing"])
def test_members_and_billing_read_but_may_not_change_the_policy(
    client: TestClient, org: TestOrg, role: str
) -> None:
    for headers in (org.key_headers(role), org.session_headers(role)):  # type: ignore[arg-type]
        assert client.get(PATH, headers=headers).status_code == 200
        assert client.get(f"{PATH}/history", headers=headers).status_code == 200
        refused = put(client, headers, {"routing_mode": "hybrid"})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "permission_denied"
        assert refused.json()["error"]["details"]["permission"] == "routing:manage"
    assert client.get(PATH, headers=org.key_headers("owner")).json()["policy"]["version"] == 0


def test_no_credentials_is_401(client: TestClient) -> None:
    assert client.get(PATH).status_code == 401
    assert client.put(PATH, json={"routing_mode": "hybrid"}).status_code == 401
    assert client.get(f"{PATH}/history").status_code == 401


def test_one_org_never_sees_or_changes_another_orgs_policy(client: TestClient, org: TestOrg) -> None:
    # Given org A's saved policy and org B
    assert put(client, org.key_headers("owner"), POLICY).status_code == 200
    other = new_org()
    a_cursor_page = client.get(f"{PATH}/history?limit=1", headers=org.key_headers("owner")).json()
    # When B reads and changes its own policy
    b_policy = client.get(PATH, headers=other.key_headers("owner")).json()["policy"]
    assert b_policy["org_id"] == other.org_id and b_policy["configured"] is False
    assert client.get(f"{PATH}/history", headers=other.key_headers("owner")).json()["data"] == []
    assert put(client, other.key_headers("owner"), {"provider_deny": ["groq"]}).status_code == 200
    # Then A's policy is untouched, and A's history cursor shows B nothing of A's
    a_policy = client.get(PATH, headers=org.key_headers("owner")).json()["policy"]
    assert a_policy["provider_deny"] == ["openai"] and a_policy["version"] == 1
    crossed = client.get(
        f"{PATH}/history?cursor={a_cursor_page['data'][0]['id']}", headers=other.key_headers("owner")
    )
    assert crossed.status_code == 200 and crossed.json()["data"] == []
    bad_cursor = client.get(f"{PATH}/history?cursor=batch_x", headers=other.key_headers("owner"))
    assert bad_cursor.status_code == 400 and bad_cursor.json()["error"]["details"]["field"] == "cursor"


def test_a_history_query_cut_short_by_dynamodb_still_says_more_remain(
    client: TestClient, org: TestOrg
) -> None:
    # Given four saved versions
    admin = org.key_headers("admin")
    for mode in ("hybrid", "cheapest", "hybrid", "cheapest"):
        assert put(client, admin, {"routing_mode": mode}).status_code == 200
    store = RoutePolicyStore(get_settings().table_name("controls"))
    cut = RoutePolicyStore(store.table_name, dynamodb=QueriesCutShort(store.dynamodb))
    # When a page of 50 is read and DynamoDB stops after two items
    page, more = cut.history(org.org_id, limit=50)
    # Then the two come back with "more", so the listing reads on rather than ending there
    assert [e.version for e in page] == [4, 3] and more is True
    rest, more = cut.history(org.org_id, limit=50, starting_after=page[-1].id)
    assert [e.version for e in rest] == [2, 1]
