"""Delivery targets over HTTP on moto, against a customer's bucket on a second S3 endpoint
(tests/integration/customer_bucket.py: another moto server, its own process and
credentials): registration never shows the secret, the SSRF guard, the limits, roles,
updates, and the test endpoint's success and the bucket's own refusals."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.delivery_targets import DeliveryTargetStore
from batchroute.adapters.kms import KmsSealer
from batchroute.clock import FixedClock
from batchroute.config import Settings, get_settings
from batchroute.domain.delivery.targets import MAX_TARGETS_PER_ORG, DeliveryTarget, secret_context
from batchroute.services.delivery.targets import Bucket, DeliveryTargets
from batchroute_tools.local.provision import LocalStack
from functions.api.app import create_app
from functions.api.auth import identity_store
from functions.api.deps import get_clock
from tests.integration.customer_bucket import BUCKET, CustomerS3
from tests.integration.principals import TestOrg, new_org

PATH = "/v1/delivery-targets"
NOW = datetime(2026, 4, 1, 9, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def customer() -> Iterator[CustomerS3]:
    with CustomerS3.start() as server:
        yield server


def _settings(monkeypatch: pytest.MonkeyPatch, *, loopback: bool) -> Settings:
    if loopback:
        monkeypatch.setenv("ALLOW_LOOPBACK_WEBHOOKS", "1")
    else:
        monkeypatch.delenv("ALLOW_LOOPBACK_WEBHOOKS", raising=False)
    get_settings.cache_clear()
    identity_store.cache_clear()
    return get_settings()


def _client(settings: Settings) -> TestClient:
    app = create_app(settings)
    app.dependency_overrides[get_clock] = lambda: FixedClock(NOW)
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def client(local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    yield _client(_settings(monkeypatch, loopback=True))
    get_settings.cache_clear()


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org()


def create(client: TestClient, org: TestOrg, body: dict[str, Any], role: str = "admin") -> Any:
    return client.post(PATH, json=body, headers=org.key_headers(role))  # type: ignore[arg-type]


def controls_item(org_id: str, target_id: str) -> dict[str, Any]:
    table = get_settings().table_name("controls")
    key = {"pk": {"S": f"ORG#{org_id}"}, "sk": {"S": f"TARGET#{target_id}"}}
    return dict(boto3.client("dynamodb").get_item(TableName=table, Key=key)["Item"])


# -- registration -------------------------------------------------------------------------
def test_a_registered_target_never_shows_its_secret(
    client: TestClient, org: TestOrg, customer: CustomerS3
) -> None:
    # When an admin key registers the customer's bucket
    response = create(client, org, customer.target_body())
    # Then 201 with the target, the secret nowhere in the answer, only the key id's last four
    assert response.status_code == 201, response.text
    target = response.json()
    assert customer.secret_access_key not in response.text
    assert target["id"].startswith("dt_") and target["object"] == "delivery_target"
    assert (target["bucket"], target["prefix"], target["endpoint_url"], target["enabled"]) == (
        BUCKET,
        "batchroute/out",
        customer.endpoint_url,
        True,
    )
    assert target["access_key_id_last4"] == customer.access_key_id[-4:]
    assert customer.access_key_id not in response.text
    assert target["secret_access_key_set"] is True and "secret_access_key" not in target
    assert target["created_at"] == "2026-04-01T09:30:00.000Z" and target["last_test"] is None
    # And the list and the single read agree, again without the secret
    listed = client.get(PATH, headers=org.key_headers("member"))
    assert listed.status_code == 200 and customer.secret_access_key not in listed.text
    assert listed.json() == {"object": "list", "data": [target], "limit": MAX_TARGETS_PER_ORG}
    assert client.get(f"{PATH}/{target['id']}", headers=org.key_headers()).json() == target
    # And the stored item holds only the KMS ciphertext, bound to this org and target
    item = controls_item(org.org_id, target["id"])
    assert customer.secret_access_key not in json.dumps(item)
    sealed = item["secret_sealed"]["S"]
    unsealed = KmsSealer(get_settings().kms_key_id).unseal(
        sealed, context=secret_context(org.org_id, target["id"])
    )
    assert unsealed == customer.secret_access_key


def test_an_aws_target_needs_only_its_region(client: TestClient, org: TestOrg) -> None:
    body = {
        "bucket": "acme-results",
        "region": "eu-west-1",
        "access_key_id": "AKIAEXAMPLE0001",
        "secret_access_key": "s" * 40,
    }
    response = create(client, org, body)
    assert response.status_code == 201, response.text
    target = response.json()
    assert (target["endpoint_url"], target["region"], target["name"], target["prefix"]) == (
        None,
        "eu-west-1",
        "acme-results",
        "",
    )


@pytest.mark.parametrize(
    ("endpoint_url", "code"),
    [
        ("https://10.0.0.5", "unsafe_url"),
        ("https://169.254.169.254", "unsafe_url"),
        ("https://[::ffff:127.0.0.1]", "unsafe_url"),
        ("https://localhost:9000", "unsafe_url"),
        ("https://192.168.1.20:9000", "unsafe_url"),
        ("http://s3.example.com", "https_required"),
        ("ftp://s3.example.com", "https_required"),
        ("https://user:pw@s3.example.com", "unsafe_url"),
        ("https://s3.example.com/bucket", "invalid_url"),
    ],
)
def test_internal_or_unsafe_endpoints_are_refused(
    client: TestClient, org: TestOrg, customer: CustomerS3, endpoint_url: str, code: str
) -> None:
    response = create(client, org, customer.target_body(endpoint_url=endpoint_url))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["details"]["field"] == "endpoint_url"
    assert client.get(PATH, headers=org.key_headers()).json()["data"] == []


def test_loopback_endpoints_need_the_local_setting(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, customer: CustomerS3
) -> None:
    # Given the deployment does not allow loopback receivers (as production never does)
    client = _client(_settings(monkeypatch, loopback=False))
    org = new_org()
    # Then the local moto endpoint is refused like any internal host
    response = create(client, org, customer.target_body())
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "https_required"  # http://127.0.0.1:<port>
    https = create(client, org, customer.target_body(endpoint_url="https://127.0.0.1:9443"))
    assert https.status_code == 400 and https.json()["error"]["code"] == "unsafe_url"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"bucket": "Bad_Bucket"}, "bucket"),
        ({"bucket": "ab"}, "bucket"),
        ({"bucket": "192.168.1.1"}, "bucket"),
        ({"bucket": "my..bucket"}, "bucket"),
        ({"bucket": "xn--bucket"}, "bucket"),
        ({"bucket": None}, "bucket"),
        ({"prefix": "a/../b"}, "prefix"),
        ({"prefix": "a//b"}, "prefix"),
        ({"prefix": "spaces are bad"}, "prefix"),
        ({"access_key_id": "has space"}, "access_key_id"),
        ({"secret_access_key": "short"}, "secret_access_key"),
        ({"enabled": "yes"}, "enabled"),
        ({"name": ""}, "name"),
        ({"endpoint_url": None, "region": None}, "region"),
        ({"endpoint_url": None, "region": "moon-base"}, "region"),
        ({"acl": "public-read"}, "acl"),
    ],
)
def test_invalid_targets_are_400_naming_the_field(
    client: TestClient, org: TestOrg, customer: CustomerS3, changes: dict[str, Any], field: str
) -> None:
    body = customer.target_body(**changes)
    body = {k: v for k, v in body.items() if not (k == "bucket" and v is None)}
    response = create(client, org, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_delivery_target" and error["details"]["field"] == field
    assert customer.secret_access_key not in response.text


def test_an_org_may_register_five_targets(client: TestClient, org: TestOrg, customer: CustomerS3) -> None:
    ids = []
    for n in range(MAX_TARGETS_PER_ORG):
        response = create(client, org, customer.target_body(name=f"target {n}"))
        assert response.status_code == 201
        ids.append(response.json()["id"])
    # The sixth is refused, and nothing was written
    sixth = create(client, org, customer.target_body(name="one too many"))
    assert sixth.status_code == 409
    assert sixth.json()["error"] == {
        "code": "delivery_target_limit",
        "message": "An organization may register at most 5 delivery targets.",
        "details": {"limit": 5},
    }
    assert len(client.get(PATH, headers=org.key_headers()).json()["data"]) == MAX_TARGETS_PER_ORG
    # Removing one frees a place
    deleted = client.delete(f"{PATH}/{ids[0]}", headers=org.key_headers())
    assert deleted.status_code == 200
    assert deleted.json() == {"id": ids[0], "object": "delivery_target", "deleted": True}
    assert client.get(f"{PATH}/{ids[0]}", headers=org.key_headers()).status_code == 404
    assert create(client, org, customer.target_body()).status_code == 201


@pytest.mark.parametrize("role", ["member", "billing"])
def test_roles_without_delivery_manage_may_only_read(
    client: TestClient, org: TestOrg, customer: CustomerS3, role: str
) -> None:
    target = create(client, org, customer.target_body()).json()
    headers = org.key_headers(role)  # type: ignore[arg-type]
    assert client.get(PATH, headers=headers).status_code == 200
    for response in (
        client.post(PATH, json=customer.target_body(), headers=headers),
        client.patch(f"{PATH}/{target['id']}", json={"enabled": False}, headers=headers),
        client.delete(f"{PATH}/{target['id']}", headers=headers),
        client.post(f"{PATH}/{target['id']}/test", headers=headers),
    ):
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"


def test_another_orgs_target_is_not_found(client: TestClient, org: TestOrg, customer: CustomerS3) -> None:
    target = create(client, org, customer.target_body()).json()
    stranger = new_org()
    for response in (
        client.get(f"{PATH}/{target['id']}", headers=stranger.key_headers()),
        client.patch(f"{PATH}/{target['id']}", json={"enabled": False}, headers=stranger.key_headers()),
        client.post(f"{PATH}/{target['id']}/test", headers=stranger.key_headers()),
        client.delete(f"{PATH}/{target['id']}", headers=stranger.key_headers()),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "delivery_target_not_found"
    assert client.get(PATH, headers=stranger.key_headers()).json()["data"] == []


def test_anonymous_callers_get_401(client: TestClient) -> None:
    assert client.get(PATH).status_code == 401
    assert client.post(PATH, json={}).status_code == 401


# -- the test endpoint --------------------------------------------------------------------
def test_the_test_writes_a_sample_object_with_the_targets_credentials(
    client: TestClient, org: TestOrg, customer: CustomerS3
) -> None:
    prefix = f"tests/{org.org_id}"
    target = create(client, org, customer.target_body(prefix=prefix)).json()
    # When the target is tested
    response = client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers())
    # Then 200 ok, naming the sample object, which is in the customer's bucket
    assert response.status_code == 200, response.text
    outcome = response.json()
    key = f"{prefix}/batchroute-test-20260401T093000000000Z.json"
    assert outcome == {
        "target_id": target["id"],
        "bucket": BUCKET,
        "ok": True,
        "at": "2026-04-01T09:30:00.000Z",
        "key": key,
        "error": None,
    }
    written = customer.objects()
    sample = json.loads(written[key])
    assert sample["object"] == "delivery_target.test" and sample["target_id"] == target["id"]
    assert customer.content_type(key) == "application/json"
    # And the outcome is kept on the target
    again = client.get(f"{PATH}/{target['id']}", headers=org.key_headers()).json()
    assert again["last_test"] == {"ok": True, "at": "2026-04-01T09:30:00.000Z", "key": key, "error": None}


@dataclass
class Race:
    """Two browsers of one org on the API at a movable clock, and the org's target."""

    clock: FixedClock
    client: TestClient
    other: TestClient
    org: TestOrg
    target: dict[str, Any]

    @classmethod
    def of(cls, monkeypatch: pytest.MonkeyPatch, customer: CustomerS3, **target_fields: Any) -> Race:
        clock = FixedClock(NOW)
        app = create_app(_settings(monkeypatch, loopback=True))
        app.dependency_overrides[get_clock] = lambda: clock
        client, org = TestClient(app), new_org()
        target = create(client, org, customer.target_body(**target_fields)).json()
        return cls(clock, client, TestClient(app), org, target)


def test_a_test_that_ends_after_the_target_moved_leaves_no_outcome_on_it(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, customer: CustomerS3
) -> None:
    # Given a target, and a change of its prefix made while a test of it is writing its sample
    race = Race.of(monkeypatch, customer, prefix="before")
    clock, client, other, org, target = race.clock, race.client, race.other, race.org, race.target
    opened = DeliveryTargets.open

    def moved_meanwhile(self: DeliveryTargets, tested: DeliveryTarget, *, probe: bool = False) -> Bucket:
        bucket = opened(self, tested, probe=probe)
        clock.advance(seconds=1)
        moved = other.patch(
            f"{PATH}/{target['id']}", json={"prefix": "after"}, headers=org.key_headers("admin")
        )
        assert moved.status_code == 200, moved.text
        return bucket

    monkeypatch.setattr(DeliveryTargets, "open", moved_meanwhile)
    # When the test ends
    answer = client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers())
    # Then its caller has its outcome, but the moved target does not take it as its own
    assert answer.status_code == 200 and answer.json()["ok"] is True, answer.text
    shown = client.get(f"{PATH}/{target['id']}", headers=org.key_headers()).json()
    assert shown["prefix"] == "after" and shown["last_test"] is None


def test_a_rename_that_races_a_test_keeps_the_tests_outcome(
    local_aws: LocalStack, monkeypatch: pytest.MonkeyPatch, customer: CustomerS3
) -> None:
    # Given a target, and a rename that read it just before a test of it recorded its outcome
    race = Race.of(monkeypatch, customer)
    client, other, org, target = race.client, race.other, race.org, race.target
    written = DeliveryTargetStore.replace

    def tested_meanwhile(self: DeliveryTargetStore, renamed: DeliveryTarget, *, seen: DeliveryTarget) -> bool:
        monkeypatch.setattr(DeliveryTargetStore, "replace", written)  # once
        tested = other.post(f"{PATH}/{target['id']}/test", headers=org.key_headers())
        assert tested.status_code == 200 and tested.json()["ok"] is True, tested.text
        return written(self, renamed, seen=seen)

    monkeypatch.setattr(DeliveryTargetStore, "replace", tested_meanwhile)
    # When the rename is written
    renamed = client.patch(f"{PATH}/{target['id']}", json={"name": "renamed"}, headers=org.key_headers())
    # Then it is made, and the test's outcome stays on the target (the bucket is the one tested)
    assert renamed.status_code == 200, renamed.text
    shown = client.get(f"{PATH}/{target['id']}", headers=org.key_headers()).json()
    assert shown["name"] == "renamed" and shown["last_test"] is not None and shown["last_test"]["ok"]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"bucket": "no-such-bucket"}, "NoSuchBucket"),
        ({"secret_access_key": "wrong-secret-0123456789"}, "SignatureDoesNotMatch"),
        ({"access_key_id": "AKIAUNKNOWNKEY000000"}, "InvalidAccessKeyId"),
        ({"endpoint_url": "closed"}, "endpoint_unreachable"),
    ],
)
def test_the_test_reports_the_buckets_refusal(
    client: TestClient, org: TestOrg, customer: CustomerS3, changes: dict[str, Any], code: str
) -> None:
    if changes.get("endpoint_url") == "closed":
        changes = {"endpoint_url": f"http://127.0.0.1:{_closed_port()}"}
    target = create(client, org, customer.target_body(prefix=f"tests/{org.org_id}", **changes)).json()
    before = set(customer.objects())
    response = client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers())
    # 200 with ok false and the bucket's own error code; nothing written, no secret echoed
    assert response.status_code == 200, response.text
    outcome = response.json()
    assert outcome["ok"] is False and outcome["error"]["code"] == code, outcome
    assert outcome["error"]["message"]
    assert customer.secret_access_key not in response.text
    assert set(customer.objects()) == before
    last = client.get(f"{PATH}/{target['id']}", headers=org.key_headers()).json()["last_test"]
    assert last["ok"] is False and last["error"]["code"] == code


# -- changes ------------------------------------------------------------------------------
def test_rotating_the_credentials_makes_the_test_pass(
    client: TestClient, org: TestOrg, customer: CustomerS3
) -> None:
    target = create(
        client, org, customer.target_body(secret_access_key="wrong-secret-0123456789", prefix="rotate")
    ).json()
    assert client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers()).json()["ok"] is False
    # A secret alone is refused: the key id comes with it
    alone = client.patch(
        f"{PATH}/{target['id']}",
        json={"secret_access_key": customer.secret_access_key},
        headers=org.key_headers(),
    )
    assert alone.status_code == 400 and alone.json()["error"]["details"]["field"] == "secret_access_key"
    # Both together replace the credentials; the answer still hides the secret
    patched = client.patch(
        f"{PATH}/{target['id']}",
        json={"access_key_id": customer.access_key_id, "secret_access_key": customer.secret_access_key},
        headers=org.key_headers(),
    )
    assert patched.status_code == 200, patched.text
    assert customer.secret_access_key not in patched.text
    assert patched.json()["last_test"] is None  # the credentials changed: the old outcome no longer holds
    assert client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers()).json()["ok"] is True


def test_a_get_answer_can_be_sent_back_to_patch(
    client: TestClient, org: TestOrg, customer: CustomerS3
) -> None:
    target = create(client, org, customer.target_body()).json()
    body = {**target, "enabled": False, "name": "paused"}
    patched = client.patch(f"{PATH}/{target['id']}", json=body, headers=org.key_headers())
    assert patched.status_code == 200, patched.text
    assert (patched.json()["enabled"], patched.json()["name"], patched.json()["bucket"]) == (
        False,
        "paused",
        BUCKET,
    )
    # An unsafe endpoint is refused on change too
    unsafe = client.patch(
        f"{PATH}/{target['id']}", json={"endpoint_url": "https://10.1.2.3"}, headers=org.key_headers()
    )
    assert unsafe.status_code == 400 and unsafe.json()["error"]["code"] == "unsafe_url"


def test_secrets_never_reach_the_logs(
    client: TestClient, org: TestOrg, customer: CustomerS3, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-secret-never-logged-42"
    target = create(client, org, customer.target_body(secret_access_key=wrong, prefix="logs")).json()
    assert client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers()).json()["ok"] is False
    client.patch(
        f"{PATH}/{target['id']}",
        json={"access_key_id": customer.access_key_id, "secret_access_key": customer.secret_access_key},
        headers=org.key_headers(),
    )
    assert client.post(f"{PATH}/{target['id']}/test", headers=org.key_headers()).json()["ok"] is True
    create(client, org, customer.target_body(secret_access_key="short"))  # a refused body
    logged = "\n".join(repr(vars(record)) for record in caplog.records)
    assert "delivery target tested" in logged and "SignatureDoesNotMatch" in logged  # captured
    for secret in (wrong, customer.secret_access_key, "'short'"):
        assert secret not in logged
