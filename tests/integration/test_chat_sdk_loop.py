"""Direct chat as the official `openai` SDK drives it beyond one answer: the standard
multi-turn loop (an answer sent back as the next request's assistant turn), a stream whose
provider fails midway (one error event the SDK raises as `APIError`), and a non-streamed
answer whose provider fails after its first byte (503 `provider_failed`, nothing charged,
each of the SDK's retries held and released on its own)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from fastapi.testclient import TestClient

from batchroute.adapters.dynamo.ledger import LedgerStore
from batchroute.config import get_settings
from batchroute.domain.billing.ledger import Reservation
from batchroute.money import Money
from batchroute.providers import base, simulated
from batchroute_tools.local.provision import LocalStack
from tests.integration.principals import TestOrg, chat_sdk, instant_chat_client, new_org

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"  # lanes on edge-eu (cheapest), deepinfra, groq, ...
MIDWAY = "[fail-midway]"  # a message holding it: the provider fails after two deltas


def _ledger() -> LedgerStore:
    return LedgerStore(get_settings().table_name("ledger"))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The simulated provider, but one that fails after its first byte for MIDWAY."""
    seen = {"midway": 0}
    answer = simulated.SimulatedSyncProvider.stream

    def stream(self: simulated.SimulatedSyncProvider, request: Any) -> Iterator[base.StreamEvent]:
        if MIDWAY not in json.dumps(request.input):
            return answer(self, request)
        seen["midway"] += 1

        def failing() -> Iterator[base.StreamEvent]:
            yield base.StreamStart()
            yield base.StreamDelta("Hello")
            yield base.StreamDelta(" world")
            raise base.TransientProviderError("the vendor's stream was cut", code="stream_interrupted")

        return failing()

    monkeypatch.setattr(simulated.SimulatedSyncProvider, "stream", stream)
    return seen


@pytest.fixture
def client(local_aws: LocalStack, calls: dict[str, int]) -> Iterator[TestClient]:
    with instant_chat_client() as test_client:
        yield test_client


@pytest.fixture
def org(client: TestClient) -> TestOrg:
    return new_org(credit_usd="5")


def _holds(org: TestOrg) -> list[Reservation]:
    return [r for r in _ledger().reservations(org.org_id) if r.purpose == "chat_hold"]


def test_the_sdks_multi_turn_loop_sends_an_answer_back_as_it_got_it(client: TestClient, org: TestOrg) -> None:
    # Given an answer, as the SDK parsed it
    sdk = chat_sdk(client, org)
    messages: list[Any] = [{"role": "user", "content": "Hello"}]
    first = sdk.chat.completions.create(model=LLAMA, messages=messages, max_tokens=8)
    answer = first.choices[0].message
    # When the loop sends it back, as the object (refusal: null), its model_dump() (annotations,
    # audio, function_call, tool_calls: null too), or without its nulls
    for turn in (answer, answer.model_dump(), answer.model_dump(exclude_none=True)):
        follow_up = sdk.chat.completions.create(
            model=LLAMA, messages=[*messages, turn, {"role": "user", "content": "More"}], max_tokens=8
        )
        # Then each is answered
        assert follow_up.choices[0].message.content


def test_a_prior_refusal_is_taken_as_the_assistants_turn(client: TestClient, org: TestOrg) -> None:
    # Given a conversation whose assistant turn refused (no content, as OpenAI answers one)
    refused = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    messages: list[Any] = [{"role": "user", "content": "Hello"}, refused, {"role": "user", "content": "Why?"}]
    # Then it is answered
    answer = chat_sdk(client, org).chat.completions.create(model=LLAMA, messages=messages, max_tokens=8)
    assert answer.choices[0].message.content
    # And what no vendor could be sent is refused, naming the field, in good grammar
    for key, value in (("audio", {"id": "audio_1"}), ("function_call", {"name": "f", "arguments": "{}"})):
        with pytest.raises(openai.BadRequestError) as raised:
            chat_sdk(client, org).chat.completions.create(
                model=LLAMA,
                messages=[messages[0], {"role": "assistant", "content": "Hi", key: value}, messages[2]],
                max_tokens=8,
            )
        assert isinstance(raised.value.body, dict)
        assert raised.value.code == "invalid_request"
        assert raised.value.body["details"] == {"field": f"messages[1].{key}"}
        assert "must be null" in raised.value.body["message"]

    # A participant's name is taken (on OpenAI's lane, whose API takes one); one OpenAI would refuse is not
    def named(name: str) -> Any:
        said = [messages[0], {"role": "assistant", "content": "Hi", "name": name}, messages[2]]
        return chat_sdk(client, org).chat.completions.create(model="gpt-4o-mini", messages=said, max_tokens=8)

    assert named("bot").choices[0].message.content
    with pytest.raises(openai.BadRequestError) as refused_name:
        named("the bot")
    assert isinstance(refused_name.value.body, dict)
    assert refused_name.value.body["details"] == {"field": "messages[1].name"}


@pytest.mark.parametrize(
    ("key", "value"),
    [("store", "yes"), ("metadata", 5), ("metadata", {"a": {"b": 1}}), ("user", 123)],
)
def test_what_is_accepted_and_not_sent_takes_only_a_value_openai_would_take(
    client: TestClient, org: TestOrg, key: str, value: object
) -> None:
    # Given a value OpenAI's CreateChatCompletionRequest refuses for a field the service accepts
    # and does not send on (was accepted whatever its type)
    with pytest.raises(openai.BadRequestError) as raised:
        chat_sdk(client, org).chat.completions.create(
            model=LLAMA, messages=[{"role": "user", "content": "Hi"}], max_tokens=8, extra_body={key: value}
        )
    # Then it is refused, naming the field
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["details"] == {"field": key}
    # While the values OpenAI takes are answered
    answer = chat_sdk(client, org).chat.completions.create(
        model=LLAMA,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=8,
        store=True,
        metadata={"ticket": "42"},
        user="u-1",
    )
    assert answer.choices[0].message.content


def test_a_stream_whose_provider_fails_midway_ends_in_an_error_the_sdk_raises(
    client: TestClient, org: TestOrg, calls: dict[str, int]
) -> None:
    # Given a stream whose provider fails after two deltas
    stream = chat_sdk(client, org).chat.completions.create(
        model=LLAMA, messages=[{"role": "user", "content": f"Hi {MIDWAY}"}], max_tokens=16, stream=True
    )
    texts: list[str] = []

    def read() -> None:
        texts.extend(chunk.choices[0].delta.content or "" for chunk in stream)

    # Then the SDK yields what arrived, then raises the error event as an APIError with our code
    with pytest.raises(openai.APIError) as raised:
        read()
    assert "".join(texts) == "Hello world"
    assert raised.value.code == "provider_failed"
    assert "edge-eu" in raised.value.message
    assert raised.value.body == {
        "code": "provider_failed",
        "message": raised.value.message,
        "details": {"provider": "edge-eu", "provider_code": "stream_interrupted"},
    }
    # And what was generated is charged, the rest released, once
    (hold,) = _holds(org)
    assert hold.status == "settled"
    assert hold.charged > Money.zero()
    assert hold.charged + hold.released == hold.amount
    assert _ledger().state(org.org_id).reserved == Money.zero()
    assert _ledger().violations(org.org_id) == []


def test_a_raw_stream_that_fails_midway_sends_no_done(client: TestClient, org: TestOrg) -> None:
    body = {
        "model": LLAMA,
        "messages": [{"role": "user", "content": MIDWAY}],
        "max_tokens": 16,
        "stream": True,
    }
    with client.stream("POST", "/v1/chat/completions", json=body, headers=org.key_headers()) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert response.status_code == 200
    assert json.loads(events[-1].removeprefix("data: "))["error"]["code"] == "provider_failed"
    assert "data: [DONE]" not in events


def test_a_non_streamed_answer_whose_provider_fails_after_its_first_byte_is_a_503_charging_nothing(
    client: TestClient, org: TestOrg, calls: dict[str, int]
) -> None:
    # Given the SDK with its default retries, and a provider that fails after its first byte
    before = _ledger().state(org.org_id)
    sdk = chat_sdk(client, org, max_retries=2)
    # When it asks for a non-streamed answer
    with pytest.raises(openai.InternalServerError) as raised:
        sdk.chat.completions.create(
            model=LLAMA, messages=[{"role": "user", "content": MIDWAY}], max_tokens=16
        )
    # Then a 503 provider_failed naming the provider, in the error envelope
    error = raised.value
    assert error.status_code == 503
    assert isinstance(error.body, dict)
    assert error.code == "provider_failed"
    assert error.body["details"] == {"provider": "edge-eu", "provider_code": "stream_interrupted"}
    assert "edge-eu" in error.body["message"] and "nothing was charged" in error.body["message"]
    assert error.response.headers["retry-after"] == "1"
    # And each of the three attempts (the SDK retried twice) was held and released whole
    assert calls["midway"] == 3
    holds = _holds(org)
    assert len(holds) == 3
    for hold in holds:
        assert hold.status != "pending"
        assert hold.charged == Money.zero()
        assert hold.released == hold.amount
    after = _ledger().state(org.org_id)
    assert after.balance == before.balance
    assert after.reserved == Money.zero()
    assert _ledger().violations(org.org_id) == []
