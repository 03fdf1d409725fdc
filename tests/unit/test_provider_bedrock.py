"""The Bedrock transform, replayed on recorded answers (tests/fixtures/vendors/bedrock/): pure,
no sockets. HTTP answers go through botocore's own REST-JSON parser first, so the transform
sees exactly what boto3 hands the adapter; requests are checked against Bedrock's service
model with botocore's parameter validator."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    ReadTimeoutError,
)
from botocore.parsers import create_parser
from urllib3.exceptions import ProtocolError

from batchroute.providers.base import (
    PermanentProviderError,
    ProviderRequest,
    ProviderUnavailable,
    TransientProviderError,
)
from batchroute.providers.bedrock import BedrockClients, make_batch, make_sync, transform
from batchroute.providers.bedrock.client import (
    BatchSettings,
    BedrockBatch,
    BedrockConverse,
    error_for_client_error,
    error_for_exception,
)
from batchroute.providers.credentials import ProviderNotConfigured
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.http import Timeouts
from batchroute_tools.contracts.bedrock import outgoing, request_violations

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vendors" / "bedrock"
CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"
LLAMA = "meta.llama3-1-70b-instruct-v1:0"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-an-image").decode()


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@cache
def service(name: str) -> Any:
    return botocore.session.get_session().get_service_model(name)


def wire(name: str, operation: str, service_name: str = "bedrock-runtime") -> dict[str, Any]:
    """A recorded HTTP answer, parsed by botocore as boto3 would hand it over."""
    recorded = fixture(name)
    shape = service(service_name).operation_model(operation).output_shape
    parsed: dict[str, Any] = create_parser("rest-json").parse(
        {
            "status_code": recorded["status"],
            "headers": recorded["headers"],
            "body": json.dumps(recorded["body"]).encode(),
        },
        shape,
    )
    return parsed


def client_error(
    name: str, operation: str = "Converse", service_name: str = "bedrock-runtime"
) -> ClientError:
    return ClientError(wire(name, operation, service_name), operation)


def request(
    payload: dict[str, Any], *, model: str = CLAUDE, max_tokens: int = 256, **kw: Any
) -> ProviderRequest:
    return ProviderRequest(
        custom_id=kw.pop("custom_id", "seq-0"),
        customer_item_id="item-1",
        operation=kw.pop("operation", "responses"),
        model="catalog-model",
        provider_model_id=model,
        input=payload,
        max_output_tokens=max_tokens,
        **kw,
    )


def assert_valid(operation: str, params: dict[str, Any]) -> None:
    """Bedrock's contract (botocore's validator and the service's documented limits)."""
    assert request_violations(operation, params) == []


# -- Converse requests ---------------------------------------------------------------------
def test_converse_request_system_messages_and_limits() -> None:
    kwargs = transform.converse_request(
        request(
            {
                "instructions": "Be brief.",
                "messages": [
                    {"role": "system", "content": "Answer in English."},
                    {"role": "user", "content": "Hello"},
                    {"role": "assistant", "content": "Hi! What can I do?"},
                    {"role": "user", "content": [{"type": "text", "text": "Explain batch lanes."}]},
                ],
                "temperature": 0.3,
                "top_p": 0.9,
                "stop": "END",
            }
        )
    )
    assert kwargs == {
        "modelId": CLAUDE,
        "system": [{"text": "Be brief.\n\nAnswer in English."}],
        "messages": [
            {"role": "user", "content": [{"text": "Hello"}]},
            {"role": "assistant", "content": [{"text": "Hi! What can I do?"}]},
            {"role": "user", "content": [{"text": "Explain batch lanes."}]},
        ],
        "inferenceConfig": {"maxTokens": 256, "temperature": 0.3, "topP": 0.9, "stopSequences": ["END"]},
    }
    assert_valid("Converse", kwargs)
    assert_valid("ConverseStream", kwargs)


def test_converse_request_from_the_responses_api_input() -> None:
    kwargs = transform.converse_request(
        request(
            {
                "instructions": "Terse.",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
            }
        )
    )
    assert kwargs["system"] == [{"text": "Terse."}]
    assert kwargs["messages"] == [{"role": "user", "content": [{"text": "Hi"}]}]
    plain = transform.converse_request(request({"input": "Just a string"}, max_tokens=0))
    assert plain["messages"] == [{"role": "user", "content": [{"text": "Just a string"}]}]
    assert "inferenceConfig" not in plain and "system" not in plain


def test_converse_request_merges_turns_of_one_role_and_clamps_sampling() -> None:
    kwargs = transform.converse_request(
        request(
            {
                "messages": [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}],
                "temperature": 1.7,
                "top_p": -1,
                "stop": ["a", "", "b"],
            }
        )
    )
    assert kwargs["messages"] == [{"role": "user", "content": [{"text": "One"}, {"text": "Two"}]}]
    assert kwargs["inferenceConfig"] == {
        "maxTokens": 256,
        "temperature": 1.0,
        "topP": 0.0,
        "stopSequences": ["a", "b"],
    }


def test_converse_request_images_from_data_urls() -> None:
    kwargs = transform.converse_request(
        request(
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is this?"},
                            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                            {"type": "input_image", "image_url": f"data:image/jpg;base64,{PNG}"},
                        ],
                    }
                ]
            },
            operation="vision",
        )
    )
    blocks = kwargs["messages"][0]["content"]
    assert blocks[0] == {"text": "What is this?"}
    assert blocks[1] == {"image": {"format": "png", "source": {"bytes": base64.b64decode(PNG)}}}
    assert blocks[2]["image"]["format"] == "png"  # the bytes' own type, not the URL's (jpg)
    assert_valid("Converse", kwargs)


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("https://example.com/cat.png", "unsupported_image_source"),
        ("s3://bucket/cat.png", "unsupported_image_source"),
        (f"data:image/bmp;base64,{base64.b64encode(b'BM6-a-bitmap').decode()}", "unsupported_image_format"),
        ("data:image/png;base64,%%%not-base64%%%", "invalid_image"),
    ],
)
def test_converse_request_refuses_images_it_cannot_send(url: str, code: str) -> None:
    payload = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]}
    with pytest.raises(PermanentProviderError) as raised:
        transform.converse_request(request(payload, operation="vision"))
    assert raised.value.code == code


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {"type": "function", "name": "get_time", "parameters": {"type": "object"}},  # the Responses API's form
]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, None),
        ("auto", {"auto": {}}),
        ("required", {"any": {}}),
        ({"type": "function", "function": {"name": "get_weather"}}, {"tool": {"name": "get_weather"}}),
        ({"type": "function", "name": "get_time"}, {"tool": {"name": "get_time"}}),
    ],
)
def test_converse_request_tools(choice: object, expected: dict[str, Any] | None) -> None:
    payload: dict[str, Any] = {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS}
    if choice is not None:
        payload["tool_choice"] = choice
    kwargs = transform.converse_request(request(payload))
    assert kwargs["toolConfig"]["tools"] == [
        {
            "toolSpec": {
                "name": "get_weather",
                "description": "The weather in a city",
                "inputSchema": {"json": TOOLS[0]["function"]["parameters"]},
            }
        },
        {"toolSpec": {"name": "get_time", "inputSchema": {"json": {"type": "object"}}}},
    ]
    assert kwargs["toolConfig"].get("toolChoice") == expected
    assert_valid("Converse", kwargs)


def test_converse_request_tool_history_and_tool_choice_none() -> None:
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        {"role": "user", "content": "And tomorrow?"},
    ]
    kwargs = transform.converse_request(request({"messages": history, "tools": TOOLS, "tool_choice": "none"}))
    assert kwargs["messages"] == [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"city": "Paris"}}}
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "call_1", "content": [{"text": "18 C, sunny"}]}},
                {"text": "And tomorrow?"},
            ],
        },
    ]
    # "none" with tools in the history: Bedrock needs them declared, without a choice.
    assert "toolChoice" not in kwargs["toolConfig"]
    assert_valid("Converse", kwargs)
    fresh = transform.converse_request(
        request({"messages": history[:1], "tools": TOOLS, "tool_choice": "none"})
    )
    assert "toolConfig" not in fresh


def test_converse_request_refuses_other_tools_and_bad_arguments() -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.converse_request(request({"input": "x", "tools": [{"type": "web_search"}]}))
    assert raised.value.code == "unsupported_tool"
    bad_call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}
    with pytest.raises(PermanentProviderError) as raised:
        transform.converse_request(
            request(
                {
                    "messages": [
                        {"role": "user", "content": "a"},
                        {"role": "assistant", "tool_calls": [bad_call]},
                    ]
                }
            )
        )
    assert raised.value.code == "invalid_tool_call"


def test_response_formats_become_instructions() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    structured = {
        "instructions": "Be terse.",
        "input": "x",
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}},
    }
    wanted = f"Be terse.\n\n{transform.JSON_SCHEMA_INSTRUCTION}{json.dumps(schema, separators=(',', ':'))}"
    for model in (CLAUDE, LLAMA):
        kwargs = transform.converse_request(request(structured, model=model))
        assert kwargs["system"] == [{"text": wanted}] and "outputConfig" not in kwargs
        assert_valid("Converse", kwargs)
    assert transform.batch_record(request(structured))["modelInput"]["system"] == wanted
    assert wanted in transform.batch_record(request(structured, model=LLAMA))["modelInput"]["prompt"]
    asked = {"input": "x", "response_format": {"type": "json_object"}}
    kwargs = transform.converse_request(request(asked))
    assert kwargs["system"] == [{"text": transform.JSON_OBJECT_INSTRUCTION}]
    assert_valid("Converse", kwargs)
    assert transform.batch_record(request(asked))["modelInput"]["system"] == transform.JSON_OBJECT_INSTRUCTION
    prompt = transform.batch_record(request(asked, model=LLAMA))["modelInput"]["prompt"]
    assert transform.JSON_OBJECT_INSTRUCTION in prompt


def test_embeddings_are_refused() -> None:
    for build in (transform.converse_request, transform.batch_record):
        with pytest.raises(PermanentProviderError) as raised:
            build(request({"input": "vector me"}, operation="embeddings"))
        assert raised.value.code == "unsupported_operation"


# -- Converse answers ------------------------------------------------------------------------
def test_converse_text_answer() -> None:
    response = wire("converse_text", "Converse")
    assert "ResponseMetadata" in response
    result = transform.converse_result("seq-0", response)
    assert result.status == "completed"
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "Batch lanes trade latency for price: "
        "the same model answers within a day at about half the cost.",
        "finish_reason": "stop",
    }
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (31, 22)
    assert result.raw == fixture("converse_text")["body"]  # the answer without ResponseMetadata
    json.dumps(result.raw)


def test_converse_max_tokens_is_length() -> None:
    result = transform.converse_result("seq-1", wire("converse_max_tokens", "Converse"))
    assert result.output is not None and result.output["finish_reason"] == "length"
    assert result.usage.completion_tokens == 16


def test_converse_tool_use() -> None:
    result = transform.converse_result("seq-2", wire("converse_tool_use", "Converse"))
    assert result.output is not None
    assert result.output["content"] == "I'll look up the current weather in Paris."
    assert result.output["finish_reason"] == "tool_calls"
    assert result.output["tool_calls"] == [
        {
            "id": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'},
        }
    ]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        (None, "stop"),
    ],
)
def test_finish_reasons(reason: str | None, finish: str) -> None:
    assert transform.finish_reason(reason) == finish


def test_raw_blobs_become_base64() -> None:
    response = {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"reasoningContent": {"redactedContent": b"\x00\x01"}}],
            }
        },
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
    }
    result = transform.converse_result("seq-0", response)
    assert result.raw is not None
    assert result.raw["output"]["message"]["content"][0]["reasoningContent"]["redactedContent"] == "AAE="


# -- ConverseStream --------------------------------------------------------------------------
def test_stream_text_events() -> None:
    acc = transform.StreamAccumulator("seq-0")
    deltas = [acc.add(event) for event in fixture("converse_stream_text")["events"]]
    assert [d for d in deltas if d] == ["Hello", "! How can", " I help you today?"]
    assert acc.finished
    result = acc.result()
    assert result.output == {
        "type": "message",
        "role": "assistant",
        "content": "Hello! How can I help you today?",
        "finish_reason": "stop",
    }
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (9, 11)
    assert result.raw == {
        "output": {
            "message": {"role": "assistant", "content": [{"text": "Hello! How can I help you today?"}]}
        },
        "stopReason": "end_turn",
        "usage": {"inputTokens": 9, "outputTokens": 11, "totalTokens": 20},
        "metrics": {"latencyMs": 421},
    }


def test_stream_tool_use_events() -> None:
    acc = transform.StreamAccumulator("seq-0")
    for event in fixture("converse_stream_tool_use")["events"]:
        acc.add(event)
    result = acc.result()
    assert result.output is not None
    assert result.output["content"] == "Let me check."
    assert result.output["tool_calls"] == [
        {
            "id": "tooluse_Qm0Yk2t3SlmU7f0AbCdEfG",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert result.raw is not None
    assert result.raw["output"]["message"]["content"][1] == {
        "toolUse": {
            "toolUseId": "tooluse_Qm0Yk2t3SlmU7f0AbCdEfG",
            "name": "get_weather",
            "input": {"city": "Paris"},
        }
    }
    assert result.usage.completion_tokens == 48


def test_stream_exception_event_raises_its_error() -> None:
    acc = transform.StreamAccumulator("seq-0", vendor="bedrock")
    events = fixture("converse_stream_throttled")["events"]
    assert acc.add(events[0]) == "" and acc.add(events[1]) == "Sure"
    with pytest.raises(TransientProviderError) as raised:
        acc.add(events[2])
    assert raised.value.code == "rate_limited"
    assert not acc.finished


def test_stream_without_message_stop_is_unfinished() -> None:
    acc = transform.StreamAccumulator("seq-0")
    for event in fixture("converse_stream_text")["events"][:4]:
        acc.add(event)
    assert not acc.finished


# -- errors ----------------------------------------------------------------------------------
def test_throttling_answer_is_transient_rate_limited() -> None:
    error = error_for_client_error(client_error("error_throttling"), vendor="bedrock")
    assert isinstance(error, TransientProviderError)
    assert error.code == "rate_limited"
    assert "Too many requests" in error.message


def test_validation_answer_is_permanent() -> None:
    error = error_for_client_error(client_error("error_validation"), vendor="bedrock")
    assert isinstance(error, PermanentProviderError)
    assert error.code == "provider_rejected"
    assert "alternate between user and assistant" in error.message


def test_access_denied_for_a_model_is_permanent_for_the_account_unavailable() -> None:
    model = error_for_client_error(client_error("error_access_denied_model"), vendor="bedrock")
    assert isinstance(model, PermanentProviderError) and model.code == "model_not_enabled"
    iam = error_for_client_error(client_error("error_access_denied_iam"), vendor="bedrock")
    assert isinstance(iam, ProviderUnavailable) and iam.code == "provider_auth_failed"


def test_unknown_job_answer() -> None:
    error = client_error("error_job_not_found", "GetModelInvocationJob", "bedrock")
    assert error.response["Error"]["Code"] == "ResourceNotFoundException"
    mapped = error_for_client_error(error, vendor="bedrock")
    assert isinstance(mapped, PermanentProviderError) and mapped.code == "not_found"


@pytest.mark.parametrize(
    ("code", "status", "kind", "ours"),
    [
        ("ServiceQuotaExceededException", 400, TransientProviderError, "rate_limited"),
        ("ModelTimeoutException", 408, TransientProviderError, "provider_timeout"),
        ("InternalServerException", 500, TransientProviderError, "provider_5xx"),
        ("ServiceUnavailableException", 503, TransientProviderError, "overloaded"),
        ("ModelNotReadyException", 429, TransientProviderError, "model_not_ready"),
        ("ModelErrorException", 424, TransientProviderError, "model_error"),
        ("modelStreamErrorException", 0, TransientProviderError, "model_error"),
        ("ResourceNotFoundException", 404, PermanentProviderError, "not_found"),
        ("ExpiredTokenException", 403, ProviderUnavailable, "provider_auth_failed"),
        ("UnrecognizedClientException", 403, ProviderUnavailable, "provider_auth_failed"),
        ("SomethingNew", 502, TransientProviderError, "provider_5xx"),
        ("SomethingNew", 418, PermanentProviderError, "provider_rejected"),
        ("SomethingNew", 0, TransientProviderError, "provider_error"),
    ],
)
def test_aws_error_codes(code: str, status: int, kind: type[Exception], ours: str) -> None:
    error = transform.aws_error(code, "message", vendor="bedrock", status=status)
    assert type(error) is kind
    assert error.code == ours


@pytest.mark.parametrize(
    ("exc", "before", "kind", "ours"),
    [
        (
            EndpointConnectionError(endpoint_url="https://bedrock"),
            True,
            ProviderUnavailable,
            "provider_unreachable",
        ),
        (
            ConnectTimeoutError(endpoint_url="https://bedrock"),
            True,
            ProviderUnavailable,
            "provider_unreachable",
        ),
        (ReadTimeoutError(endpoint_url="https://bedrock"), True, TransientProviderError, "provider_timeout"),
        (ReadTimeoutError(endpoint_url="https://bedrock"), False, TransientProviderError, "provider_timeout"),
        (
            ConnectionClosedError(endpoint_url="https://bedrock"),
            True,
            ProviderUnavailable,
            "provider_unreachable",
        ),
        (
            ConnectionClosedError(endpoint_url="https://bedrock"),
            False,
            TransientProviderError,
            "stream_interrupted",
        ),
        (ProtocolError("Connection broken"), False, TransientProviderError, "stream_interrupted"),
        (NoCredentialsError(), True, ProviderUnavailable, "provider_auth_failed"),
        (ParamValidationError(report="bad"), True, PermanentProviderError, "invalid_item"),
    ],
)
def test_botocore_failures(exc: Exception, before: bool, kind: type[Exception], ours: str) -> None:
    error = error_for_exception(exc, vendor="bedrock", before_response=before)
    assert type(error) is kind
    assert error.code == ours


# -- batch inference records -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("anthropic.claude-3-haiku-20240307-v1:0", "anthropic"),
        ("us.anthropic.claude-3-5-sonnet-20241022-v2:0", "anthropic"),
        ("arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", "anthropic"),
        (
            "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-3-haiku-20240307-v1:0",
            "anthropic",
        ),
        ("meta.llama3-1-70b-instruct-v1:0", "meta"),
        ("us.meta.llama3-2-11b-instruct-v1:0", "meta"),
    ],
)
def test_model_family(model: str, family: str) -> None:
    assert transform.model_family(model) == family


@pytest.mark.parametrize(
    "model", ["amazon.titan-text-express-v1", "cohere.command-r-v1:0", "mistral.mistral-large-2402-v1:0"]
)
def test_batch_refuses_other_models(model: str) -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.batch_record(request({"input": "hi"}, model=model))
    assert raised.value.code == "unsupported_model"


def test_anthropic_batch_record() -> None:
    record = transform.batch_record(
        request(
            {
                "system": "You are terse.",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "Describe"},
                            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                        ],
                    }
                ],
                "temperature": 0.2,
                "stop": ["###"],
                "tools": TOOLS[:1],
                "tool_choice": "required",
            },
            custom_id="seq-17",
            max_tokens=300,
        )
    )
    assert record == {
        "recordId": "seq-17",
        "modelInput": {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 300,
            "system": "You are terse.",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                        },
                    ],
                }
            ],
            "temperature": 0.2,
            "stop_sequences": ["###"],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "The weather in a city",
                    "input_schema": TOOLS[0]["function"]["parameters"],
                }
            ],
            "tool_choice": {"type": "any"},
        },
    }


def test_anthropic_batch_record_tool_history() -> None:
    call = {
        "id": "toolu_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
    }
    body = transform.batch_record(
        request(
            {
                "messages": [
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": "Checking.", "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "toolu_1", "content": "-3 C"},
                ],
                "tools": TOOLS[:1],
            },
            max_tokens=0,
        )
    )["modelInput"]
    assert body["max_tokens"] == transform.DEFAULT_MAX_TOKENS
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "-3 C"}]},
    ]
    assert "tool_choice" not in body


def test_llama_batch_record_uses_the_llama3_template() -> None:
    record = transform.batch_record(
        request(
            {
                "system": "Be kind.",
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello!"},
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "Name a "}, {"type": "text", "text": "prime."}],
                    },
                ],
                "temperature": 0.4,
                "top_p": 0.8,
            },
            model=LLAMA,
            custom_id="seq-3",
            max_tokens=5000,
        )
    )
    assert record == {
        "recordId": "seq-3",
        "modelInput": {
            "prompt": (
                "<|begin_of_text|>"
                "<|start_header_id|>system<|end_header_id|>\n\nBe kind.<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                "<|start_header_id|>user<|end_header_id|>\n\nName a prime.<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n"
            ),
            "max_gen_len": 2048,
            "temperature": 0.4,
            "top_p": 0.8,
        },
    }


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
                        ],
                    }
                ]
            },
            "unsupported_input",
        ),
        ({"input": "hi", "tools": TOOLS}, "unsupported_tool"),
    ],
)
def test_llama_batch_record_refuses_images_and_tools(payload: dict[str, Any], code: str) -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.batch_record(request(payload, model=LLAMA))
    assert raised.value.code == code


def test_batch_output_records() -> None:
    results = {}
    for record in fixture("batch_output_records")["records"]:
        result = transform.batch_record_result(record)
        assert result is not None
        results[result.custom_id] = result
        json.dumps(result.to_dict())
    claude, cut, tool, llama, llama_cut = (results[f"seq-{i}"] for i in range(5))
    assert claude.output == {
        "type": "message",
        "role": "assistant",
        "content": "The meeting is now on Thursday.",
        "finish_reason": "stop",
    }
    assert (claude.usage.prompt_tokens, claude.usage.completion_tokens) == (21, 9)
    assert claude.raw is not None and claude.raw["type"] == "message"
    assert cut.output is not None and cut.output["finish_reason"] == "length"
    assert tool.output is not None and tool.output["tool_calls"] == [
        {
            "id": "toolu_bdrk_01A2b3C4d5E6f7G8h9I0j",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
    ]
    assert llama.output is not None and llama.output["content"] == "Seven is a prime number."
    assert (llama.usage.prompt_tokens, llama.usage.completion_tokens) == (17, 7)
    assert llama_cut.output is not None and llama_cut.output["finish_reason"] == "length"
    rejected, throttled, broken = results["seq-5"], results["seq-6"], results["seq-7"]
    assert rejected.status == "failed" and rejected.error is not None
    assert (rejected.error.code, rejected.error.transient) == ("provider_rejected", False)
    assert "first message must use" in rejected.error.message
    assert throttled.error is not None and (throttled.error.code, throttled.error.transient) == (
        "rate_limited",
        True,
    )
    assert broken.error is not None and (broken.error.code, broken.error.transient) == ("provider_5xx", True)


def test_batch_output_record_oddities() -> None:
    assert transform.batch_record_result({"modelOutput": {"generation": "x"}}) is None
    empty = transform.batch_record_result({"recordId": "seq-9", "modelInput": {}})
    assert empty is not None and empty.transient_failure
    named = transform.batch_record_result(
        {"recordId": "seq-8", "error": {"errorCode": "ModelTimeoutException", "errorMessage": "slow"}}
    )
    assert named is not None and named.error is not None
    assert (named.error.code, named.error.transient) == ("provider_timeout", True)


# -- batch jobs ------------------------------------------------------------------------------
# Bedrock's job status -> ours, grouped by ours.
EXPECTED_STATES = {
    bedrock: ours
    for ours, statuses in {
        "validating": ("Submitted", "Validating", "Scheduled"),
        "in_progress": ("InProgress", "Stopping"),
        "completed": ("Completed", "PartiallyCompleted"),
        "failed": ("Failed",),
        "cancelled": ("Stopped",),
        "expired": ("Expired",),
    }.items()
    for bedrock in statuses
}


@pytest.mark.parametrize(("status", "state"), sorted(EXPECTED_STATES.items()))
def test_job_states(status: str, state: str) -> None:
    body = fixture("get_model_invocation_job")["states"][status]
    parsed = create_parser("rest-json").parse(
        {"status_code": 200, "headers": {}, "body": json.dumps(body).encode()},
        service("bedrock").operation_model("GetModelInvocationJob").output_shape,
    )
    assert parsed["status"] == status
    job = transform.job_status(parsed)
    assert job.state == state
    assert job.terminal == (state in ("completed", "failed", "expired", "cancelled"))
    assert (job.total, job.completed_count, job.failed_count) == (
        body.get("totalRecordCount", 0),
        body.get("successRecordCount", 0),
        body.get("errorRecordCount", 0),
    )


def test_every_bedrock_job_status_is_mapped() -> None:
    enum = service("bedrock").shape_for("ModelInvocationJobStatus").enum
    assert set(enum) == set(transform.JOB_STATES) == set(fixture("get_model_invocation_job")["states"])


def test_output_location() -> None:
    job = fixture("get_model_invocation_job")["states"]["Completed"]
    assert transform.output_location(job) == (
        "batchroute-bedrock-batch",
        "bedrock-batch/output/x7k2m9p4q1r8/batchroute-20250301120000-3f9a1c2b7d4e.jsonl.out",
    )
    assert transform.job_id(job["jobArn"]) == "x7k2m9p4q1r8"
    assert transform.split_s3_uri("s3://b/k/e/y") == ("b", "k/e/y")
    with pytest.raises(ValueError, match="not an S3 URI"):
        transform.split_s3_uri("https://b/k")


# -- the adapter without calls ---------------------------------------------------------------
ENDPOINT = ProviderEndpoint(
    slug="bedrock",
    adapter="bedrock",
    base_url="http://127.0.0.1:9/bedrock/runtime",
    region="eu-central-1",
    batch_api=True,
    credentials="iam",
    options={
        "control_url": "http://127.0.0.1:9/bedrock",
        "batch_bucket": "batch-bucket",
        "batch_role_arn": "arn:aws:iam::123456789012:role/br",
        "batch_prefix": "/lanes/",
        "batch_timeout_hours": "48",
    },
    timeouts=Timeouts(connect=2.0, read=30.0),
)


def test_make_sync_and_batch_read_the_endpoint() -> None:
    sync = make_sync(ENDPOINT, None)
    assert sync.slug == "bedrock"
    assert (sync.clients.region, sync.clients.runtime_url, sync.clients.control_url) == (
        "eu-central-1",
        "http://127.0.0.1:9/bedrock/runtime",
        "http://127.0.0.1:9/bedrock",
    )
    batch = make_batch(ENDPOINT, "ignored")
    assert batch.settings == BatchSettings(
        bucket="batch-bucket",
        role_arn="arn:aws:iam::123456789012:role/br",
        prefix="lanes",
        timeout_hours=48,
        min_records=100,
    )


def test_clients_have_no_botocore_retries_and_the_endpoint_timeouts() -> None:
    clients = BedrockClients(region="us-east-1", timeouts=Timeouts(connect=2.0, read=30.0))
    runtime = clients.runtime()
    assert runtime is clients.runtime()
    assert runtime.meta.config.retries["total_max_attempts"] == 1
    assert (runtime.meta.config.connect_timeout, runtime.meta.config.read_timeout) == (2.0, 30.0)
    assert runtime.meta.config.parameter_validation
    first_byte = clients.runtime(read_timeout=4.0)
    assert first_byte is not runtime and first_byte.meta.config.read_timeout == 4.0
    assert clients.control().meta.service_model.service_name == "bedrock"
    assert clients.s3().meta.config.retries["total_max_attempts"] > 1  # S3 keeps its retries


def test_a_stream_reads_with_the_longer_of_first_byte_and_idle() -> None:
    clients = BedrockClients(region="us-east-1", timeouts=Timeouts(read=30.0, first_byte=5.0, idle=20.0))
    converse = BedrockConverse("bedrock", clients)
    assert converse.stream_read_timeout(request({"input": "x"})) == 20.0
    assert converse.stream_read_timeout(request({"input": "x"}, first_byte_timeout_seconds=45.0)) == 45.0
    slow_start = BedrockClients(region="us-east-1", timeouts=Timeouts(first_byte=90.0, idle=15.0))
    assert BedrockConverse("bedrock", slow_start).stream_read_timeout(request({"input": "x"})) == 90.0


def test_the_pinned_api_versions_are_the_installed_service_models() -> None:
    sync = make_sync(replace(ENDPOINT, api_version="2023-09-30", control_api_version="2023-04-20"), None)
    assert sync.clients.runtime().meta.service_model.api_version == "2023-09-30"
    assert sync.clients.control().meta.service_model.api_version == "2023-04-20"
    for pinned in ({"api_version": "2031-01-01"}, {"control_api_version": "2019-01-01"}):
        with pytest.raises(ProviderNotConfigured) as raised:
            make_batch(replace(ENDPOINT, **pinned), None)
        assert "2031-01-01" in str(raised.value) or "2019-01-01" in str(raised.value)
    with pytest.raises(ProviderNotConfigured):
        BedrockClients(region="us-east-1", api_versions={"bedrock-runtime": "1999-12-31"})


def test_submit_refusals_before_any_call() -> None:
    clients = BedrockClients(region="us-east-1")
    settings = BatchSettings(bucket="b", role_arn="arn:aws:iam::123456789012:role/r", min_records=2)
    batch = BedrockBatch("bedrock", clients, settings)
    with pytest.raises(PermanentProviderError):
        batch.submit([])
    with pytest.raises(ProviderUnavailable) as raised:
        batch.submit([request({"input": "x"})])
    assert raised.value.code == "batch_too_small"
    with pytest.raises(PermanentProviderError):
        batch.submit([request({"input": "x"}), request({"input": "y"}, model=LLAMA)])
    unconfigured = BedrockBatch("bedrock", clients, BatchSettings(bucket="", role_arn=""))
    with pytest.raises(ProviderUnavailable) as raised:
        unconfigured.submit([request({"input": "x"})])
    assert raised.value.code == "provider_not_configured"


def test_a_job_is_named_by_its_submission_key_within_bedrock_s_pattern() -> None:
    clients = BedrockClients(region="us-east-1")
    batch = BedrockBatch("bedrock", clients, BatchSettings(bucket="b", role_arn="r", min_records=7))
    assert batch.min_requests == 7
    shape = clients.control().meta.service_model.shape_for("ModelInvocationJobName")
    pattern, longest = re.compile(shape.metadata["pattern"]), shape.metadata["max"]
    key = "0123456789abcdef0123456789abcdef"
    assert batch._job_name(key) == batch._job_name(key) == f"batchroute-{key}"
    odd = batch._job_name("lane 3/seq 7-" + "x" * 80)  # not letters and digits, too long: hashed
    assert odd == batch._job_name("lane 3/seq 7-" + "x" * 80) != batch._job_name("lane 3/seq 7")
    assert batch._job_name(None) != batch._job_name(None)  # no key: a fresh name each time
    for name in (batch._job_name(key), odd, batch._job_name("k" * 46), batch._job_name(None)):
        stopped = name + "-stops"  # a job with stop sequences
        assert len(stopped) <= longest and pattern.fullmatch(stopped), stopped


# -- the contract: every body the adapter builds, and what Bedrock refuses ---------------------
HAIKU_35 = "anthropic.claude-3-5-haiku-20241022-v1:0"  # the catalog's Bedrock lanes
LLAMA_33 = "meta.llama3-3-70b-instruct-v1:0"
LANE_ENDPOINT = ProviderEndpoint(slug="bedrock", adapter="bedrock", region="us-east-1")
CALL = {
    "id": "call 1/\u00e9",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
}
ACCEPTED: dict[str, dict[str, Any]] = {
    "a string": {"input": "Hi"},
    "chat with system, developer and refusal parts": {
        "messages": [
            {"role": "system", "content": "Be kind."},
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "Hi"}, {"type": "text", "text": "  "}],
            },
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
            {"role": "user", "content": "Why?"},
        ],
        "temperature": 2,
        "top_p": 0.5,
    },
    "responses items with a function call and its output": {
        "instructions": "Use tools.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {
                "type": "function_call",
                "call_id": "fc:1",
                "name": "get_weather",
                "arguments": '{"city":"Oslo"}',
            },
            {"type": "function_call_output", "call_id": "fc:1", "output": ""},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"properties": {}}}],
        "tool_choice": "auto",
    },
    "tool history, tools undeclared": {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": CALL["id"], "content": "-3 C"},
            {"role": "user", "content": "Thanks"},
        ]
    },
    "tool choice none": {"input": "Hi", "tools": TOOLS, "tool_choice": "none"},
    "a user's words before the tool's answer": {
        "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
            {"role": "user", "content": "Quickly"},
            {"role": "tool", "tool_call_id": CALL["id"], "content": "-3 C"},
        ],
        "tools": TOOLS,
    },
    "a prefill ending in whitespace, a blank system prompt": {
        "system": "  ",
        "messages": [{"role": "user", "content": "List three"}, {"role": "assistant", "content": "1. "}],
    },
    "json_object": {"input": "Reply in JSON", "response_format": {"type": "json_object"}},
    # Llama's batch body has none: the adapter cuts the answer (BedrockBatch.results).
    "stop sequences": {"input": "Count", "stop": ["7", "eight", "IX", "10"]},
    "json_object as text.format": {"input": "JSON please", "text": {"format": {"type": "json_object"}}},
    "json_schema": {
        "input": "Extract",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "object"}},
        },
    },
}
CLAUDE_ONLY: dict[str, dict[str, Any]] = {
    "tool choice required": {"input": "Hi", "tools": TOOLS, "tool_choice": "required"},
    "one named function": {
        "input": "Hi",
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "get_time"}},
    },
}


def provider_request(payload: dict[str, Any], model: str, **kw: Any) -> ProviderRequest:
    return ProviderRequest(
        custom_id="seq-0",
        customer_item_id="item",
        operation="responses",
        model="catalog-model",
        provider_model_id=model,
        input=payload,
        max_output_tokens=kw.pop("max_output_tokens", 0),
        **kw,
    )


# Llama's batch body (a prompt) carries no tools and no tool turns: those items are refused
# there, and take Converse only.
TOOL_CASES = frozenset(
    {
        "a user's words before the tool's answer",
        "responses items with a function call and its output",
        "tool history, tools undeclared",
        "tool choice none",
    }
)


@pytest.mark.parametrize("model", [HAIKU_35, LLAMA_33, CLAUDE, LLAMA])
@pytest.mark.parametrize("case", list(ACCEPTED))
@pytest.mark.parametrize("sampling", [True, False])
def test_every_body_the_adapter_sends_fits_the_contract(model: str, case: str, sampling: bool) -> None:
    payload = ACCEPTED[case]
    built = provider_request(payload, model, sampling=sampling)
    if model.startswith("meta.") and case in TOOL_CASES:
        with pytest.raises(PermanentProviderError) as raised:
            outgoing(built, LANE_ENDPOINT, lane_max_output_tokens=8192)
        assert raised.value.code in ("unsupported_tool", "unsupported_input")
        sent = [
            ("Converse", transform.converse_request(built)),
            ("ConverseStream", transform.converse_request(built)),
        ]
    else:
        sent = outgoing(built, LANE_ENDPOINT, lane_max_output_tokens=8192)
        assert [op for op, _ in sent] == [
            "Converse",
            "ConverseStream",
            f"batch_record:{transform.model_family(model)}",
        ]
    for operation, body in sent:
        assert request_violations(operation, body) == [], (operation, body)
        text = json.dumps(body, default=str)
        assert ("temperature" in text) == (sampling and "temperature" in payload)


@pytest.mark.parametrize("case", list(CLAUDE_ONLY))
def test_claude_bodies_with_stops_and_forced_tools_fit_the_contract(case: str) -> None:
    for operation, body in outgoing(
        provider_request(CLAUDE_ONLY[case], HAIKU_35), LANE_ENDPOINT, lane_max_output_tokens=8192
    ):
        assert request_violations(operation, body) == [], (operation, body)


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"input": "Hi", "tools": TOOLS, "tool_choice": "required"}, "unsupported_tool_choice"),
        (
            {"input": "Hi", "tools": TOOLS, "tool_choice": {"type": "function", "name": "get_time"}},
            "unsupported_tool_choice",
        ),
    ],
)
def test_llama_cannot_be_forced_to_call_a_tool(payload: dict[str, Any], code: str) -> None:
    with pytest.raises(PermanentProviderError) as raised:
        transform.converse_request(provider_request(payload, LLAMA_33))
    assert raised.value.code == code


def test_llama_output_limit_and_no_sampling() -> None:
    kwargs = transform.converse_request(
        provider_request(
            {"input": "Hi", "temperature": 0.3}, LLAMA_33, max_output_tokens=8192, sampling=False
        )
    )
    assert kwargs["inferenceConfig"] == {"maxTokens": 2048}
    record = transform.batch_record(provider_request({"input": "Hi", "top_p": 0.3}, LLAMA_33, sampling=False))
    assert set(record["modelInput"]) == {"prompt", "max_gen_len"}


def test_tool_ids_bedrock_refuses_are_replaced_the_same_way_on_both_sides() -> None:
    kwargs = transform.converse_request(
        provider_request(ACCEPTED["tool history, tools undeclared"], HAIKU_35)
    )
    use = kwargs["messages"][1]["content"][0]["toolUse"]
    result = kwargs["messages"][2]["content"][0]["toolResult"]
    assert use["toolUseId"] == result["toolUseId"] != CALL["id"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", use["toolUseId"])
    # the undeclared tool the history uses is declared, with an open schema
    assert kwargs["toolConfig"]["tools"] == [
        {"toolSpec": {"name": "get_weather", "inputSchema": {"json": {"type": "object", "properties": {}}}}}
    ]


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "assistant", "content": "I start."}, {"role": "user", "content": "Hi"}],
        [{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "nobody", "content": "x"}],
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "user", "content": "Never mind"},
        ],
        [{"role": "user", "content": "   "}],
    ],
)
def test_conversations_bedrock_cannot_take_are_refused(messages: list[dict[str, Any]]) -> None:
    for build in (transform.converse_request, transform.batch_record):
        with pytest.raises(PermanentProviderError) as raised:
            build(provider_request({"messages": messages, "tools": TOOLS}, HAIKU_35))
        assert raised.value.code in ("invalid_conversation", "invalid_tool_call")


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"input": "Hi", "tool_choice": {"type": "web_search_preview"}}, "unsupported_tool"),
        (
            {"input": "Hi", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]},
            "unsupported_tool",
        ),
        (
            {"input": "Hi", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}},
            "invalid_tool_call",
        ),
    ],
)
def test_tools_bedrock_cannot_run_are_refused(payload: dict[str, Any], code: str) -> None:
    for build in (transform.converse_request, transform.batch_record):
        with pytest.raises(PermanentProviderError) as raised:
            build(provider_request(payload, HAIKU_35))
        assert raised.value.code == code


def test_a_seed_a_message_name_or_serial_tool_calls_are_refused_never_dropped() -> None:
    named = {"messages": [{"role": "user", "content": "Hi", "name": "ann"}]}
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    serial = {"input": "Hi", "tools": [tool], "parallel_tool_calls": False}  # Converse has no switch
    for payload in ({"input": "Hi", "seed": 7}, named, serial):
        for model in (HAIKU_35, LLAMA_33):
            for build in (transform.converse_request, transform.batch_record):
                with pytest.raises(PermanentProviderError) as raised:
                    build(provider_request(payload, model))
                assert raised.value.code == "unsupported_parameter"


def test_llama_stop_sequences_go_to_converse_and_stay_with_the_adapter_in_batch() -> None:
    built = provider_request({"input": "Count", "stop": ["7", "", "eight"]}, LLAMA_33)
    assert transform.converse_request(built)["inferenceConfig"] == {"stopSequences": ["7", "eight"]}
    assert set(transform.batch_record(built)["modelInput"]) == {"prompt", "max_gen_len"}
    assert transform.record_stops(built) == ["7", "eight"]
    assert transform.record_stops(provider_request({"input": "Count"}, LLAMA_33)) == []
    # Claude's body says them itself: nothing for the adapter to apply.
    assert transform.record_stops(provider_request({"input": "Count", "stop": "7"}, HAIKU_35)) == []


def test_apply_stops_cuts_at_the_first_stop_and_keeps_the_billed_usage() -> None:
    answer = {"generation": "one two eight seven 7 nine", "stop_reason": "length"}
    answer |= {"prompt_token_count": 11, "generation_token_count": 6}
    result = transform.llama_result("seq-0", answer)
    cut = transform.apply_stops(result, ["7", "eight"])
    assert cut.output is not None and cut.output["content"] == "one two "
    assert cut.output["finish_reason"] == "stop"
    assert (cut.usage, cut.raw) == (result.usage, result.raw)
    assert transform.apply_stops(result, ["ten"]) == result
    assert transform.apply_stops(result, []) == result
    failed = transform.batch_record_result({"recordId": "seq-1", "error": {"errorCode": 400}})
    assert failed is not None and transform.apply_stops(failed, ["7"]) == failed


def test_stops_file_next_to_the_input_and_its_parsing() -> None:
    assert transform.stops_key("lanes/input/job-1.jsonl") == "lanes/input/job-1.stops.json"
    job = {"inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://b/lanes/input/job-1-stops.jsonl"}}}
    assert transform.stops_location(job) == ("b", "lanes/input/job-1-stops.stops.json")
    plain = {"inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://b/lanes/input/job-1.jsonl"}}}
    assert transform.stops_location(plain) is None  # never looked for
    assert transform.parse_stops(b'{"stops": {"seq-0": ["7", 8, ""], "seq-1": "x"}}') == {"seq-0": ["7"]}
    assert transform.parse_stops(b"not json") == {} == transform.parse_stops(b"[1]")


def test_claude_takes_no_whitespace_stop_sequence() -> None:
    for build in (transform.converse_request, transform.batch_record):
        with pytest.raises(PermanentProviderError) as raised:
            build(provider_request({"input": "Hi", "stop": ["\n"]}, HAIKU_35))
        assert raised.value.code == "unsupported_stop"


GOOD_CONVERSE: dict[str, Any] = {
    "modelId": HAIKU_35,
    "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
    "inferenceConfig": {"maxTokens": 100, "temperature": 0.5, "stopSequences": ["a"]},
}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"inferenceConfig": {"maxTokens": 100, "topK": 5}}, 'Unknown parameter in inferenceConfig: "topK"'),
        ({"inferenceConfig": {"stopSequences": ["s"] * 2501}}, "at most 2500 items"),
        ({"inferenceConfig": {"maxTokens": 9000}}, "writes at most 8192 tokens"),
        ({"inferenceConfig": {"topP": 1.5}}, "at most 1, not 1.5"),
        (
            {"toolConfig": {"tools": [{"webSearch": {}}]}},
            'Unknown parameter in toolConfig.tools[0]: "webSearch"',
        ),
        (
            {"toolConfig": {"tools": [{"toolSpec": {"name": "web search", "inputSchema": {"json": {}}}}]}},
            "does not match the pattern",
        ),
        ({"messages": [{"role": "user", "content": [{"text": " "}]}]}, "blank"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"text": "a"}]},
                    {"role": "assistant", "content": [{"text": "b "}]},
                ]
            },
            "may not end in whitespace",
        ),
        ({"messages": [{"role": "assistant", "content": [{"text": "a"}]}]}, "start with a user message"),
        (
            {
                "messages": [
                    {"role": "user", "content": [{"text": "a"}]},
                    {
                        "role": "assistant",
                        "content": [{"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}],
                    },
                ]
            },
            "toolConfig: required",
        ),
        (
            {
                "outputConfig": {
                    "textFormat": {"type": "json_schema", "structure": {"jsonSchema": {"schema": "{}"}}}
                }
            },
            "no structured output",
        ),
        (
            {
                "modelId": LLAMA_33,
                "toolConfig": {
                    "tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {}}}}],
                    "toolChoice": {"any": {}},
                },
            },
            "only the auto tool choice",
        ),
        (
            {
                "modelId": LLAMA_33,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}],
                    }
                ],
            },
            "take no images",
        ),
    ],
)
def test_the_contract_refuses_what_bedrock_refuses(change: dict[str, Any], reason: str) -> None:
    body = {**GOOD_CONVERSE, **change}
    assert request_violations("Converse", GOOD_CONVERSE) == []
    found = request_violations("Converse", body)
    assert any(reason in line for line in found), found


@pytest.mark.parametrize(
    ("family", "body", "reason"),
    [
        ("meta", {"prompt": "x", "stop": ["a"]}, "$.stop: extraneous key"),
        ("meta", {"prompt": "x", "max_gen_len": 4096}, "between 1 and 2048"),
        ("meta", {"max_gen_len": 10}, "$.prompt: required"),
        ("anthropic", {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, "anthropic_version"),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
            },
            "$.model: not permitted",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "color": "red"}]}],
            },
            "content[0].color: unknown field",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 5,
                "temperature": 1.2,
                "messages": [{"role": "user", "content": "x"}],
            },
            "$.temperature",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": "5",
                "messages": [{"role": "user", "content": "x"}],
            },
            "$.max_tokens",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
                "tools": [{"type": "web_search_20250305", "name": "web_search", "bogus": 1}],
            },
            "bogus: unknown field",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
                "metadata": {"user_id": "u"},
            },
            "$.metadata: extraneous key",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 5,
                "stream": True,
                "messages": [{"role": "user", "content": "x"}],
            },
            "$.stream: not permitted",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "anthropic_beta": "x",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "x"}],
            },
            "$.anthropic_beta: should be a list",
        ),
        (
            "anthropic",
            {
                "anthropic_version": "bedrock-2023-05-31",
                "max_tokens": 5,
                "messages": [{"role": "assistant", "content": "x"}],
            },
            'the first message must use the "user" role',
        ),
    ],
)
def test_the_contract_refuses_bad_batch_records(family: str, body: dict[str, Any], reason: str) -> None:
    found = request_violations(f"batch_record:{family}", body)
    assert any(reason in line for line in found), found


def test_the_contract_reads_the_job_request() -> None:
    job = {
        "jobName": "batchroute-20250101000000-abcdef012345",
        "roleArn": "arn:aws:iam::123456789012:role/batch",
        "modelId": HAIKU_35,
        "inputDataConfig": {
            "s3InputDataConfig": {"s3Uri": "s3://bucket/in/a.jsonl", "s3InputFormat": "JSONL"}
        },
        "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://bucket/out/"}},
        "timeoutDurationInHours": 24,
    }
    assert request_violations("CreateModelInvocationJob", job) == []
    found = request_violations(
        "CreateModelInvocationJob", {**job, "timeoutDurationInHours": 500, "jobName": "a b"}
    )
    assert any("at most 168" in line for line in found) and any("$.jobName" in line for line in found)
    with pytest.raises(ValueError, match="no Bedrock operation"):
        request_violations("InvokeModel", {})


def test_a_failed_jobs_message_is_its_error() -> None:
    failed = transform.job_status({"status": "Failed", "message": "Could not assume the role."})
    assert [(e.code, e.message, e.transient) for e in failed.errors] == [
        ("provider_rejected", "Could not assume the role.", False)
    ]
    assert transform.job_status({"status": "Completed", "message": "2 records failed."}).errors == ()
    assert transform.job_status({"status": "Failed"}).errors == ()
