"""The Bedrock emulator against botocore, and the Bedrock adapter against the emulator.

botocore is Bedrock's SDK, so it is the judge here: every answer of the emulator is parsed
by real boto3 clients (`bedrock-runtime`, `bedrock`) pointed at it with `endpoint_url`, the
event stream is read to its end by botocore's EventStream parser (frame CRCs checked), and
each JSON body is also checked member by member against the service model (required
members, types, enums, no unknown members; botocore's own parser would silently drop or
miss those). botocore's parameter validation stays on, so every request the adapter sends
is checked against the service model too.

S3 is moto in-process (`mock_aws`). moto patches botocore, but only answers URLs that match
an AWS service's host patterns: the emulator's loopback URLs (http://127.0.0.1:<port>/...)
pass through to the emulator (no ThreadedMotoServer needed), while the S3 clients of the
emulator and the adapter both reach moto's in-process S3.
"""

from __future__ import annotations

import base64
import gc
import http.client
import json
import tracemalloc
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError, ParamValidationError
from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape
from moto import mock_aws

from batchroute.providers.base import (
    PermanentProviderError,
    ProviderError,
    ProviderRequest,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamEvent,
    StreamStart,
    TransientProviderError,
    UnknownJob,
)
from batchroute.providers.bedrock import BatchSettings, BedrockBatch, BedrockClients, BedrockConverse
from batchroute.providers.http import Timeouts
from batchroute_tools.emulators.bedrock import EVENT_STREAM, STOP_SECONDS, BedrockEmulator, stream_exception
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.server import EmulatorServer

CLAUDE = "anthropic.claude-3-haiku-20240307-v1:0"
LLAMA = "meta.llama3-1-8b-instruct-v1:0"
BUCKET = "batchroute-bedrock-batch"
ROLE = "arn:aws:iam::123456789012:role/batchroute-bedrock-batch"
REGION = "us-east-1"
BATCH_SECONDS = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000.0

    def __call__(self) -> float:
        return self.now


# -- a strict reading of the service model -------------------------------------------------
def shape_problems(value: Any, shape: Shape, path: str = "$") -> list[str]:
    """What in a wire (JSON) value does not fit `shape`."""
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(shape, StructureShape)
        if shape.is_document_type:
            return []
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object ({shape.name})"]
        problems = [f"{path}.{k}: not a member of {shape.name}" for k in value if k not in shape.members]
        problems += [
            f"{path}.{k}: required by {shape.name}" for k in shape.required_members if k not in value
        ]
        if shape.is_tagged_union and len(value) != 1:
            problems.append(f"{path}: the union {shape.name} sets {len(value)} members")
        for name, member in value.items():
            if name in shape.members:
                problems += shape_problems(member, shape.members[name], f"{path}.{name}")
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        assert isinstance(shape, ListShape)
        return [p for i, item in enumerate(value) for p in shape_problems(item, shape.member, f"{path}[{i}]")]
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{path}: not a map"]
        assert isinstance(shape, MapShape)
        return [p for k, v in value.items() for p in shape_problems(v, shape.value, f"{path}.{k}")]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: not a string"]
        enum = shape.metadata.get("enum")
        return [f"{path}: {value!r} not in {shape.name}"] if enum and value not in enum else []
    if kind in ("integer", "long"):
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: not an integer"]
    if kind in ("float", "double"):
        return (
            []
            if isinstance(value, int | float) and not isinstance(value, bool)
            else [f"{path}: not a number"]
        )
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: not a boolean"]
    if kind == "timestamp":
        try:
            datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return [f"{path}: {value!r} is not ISO 8601"]
        return []
    if kind == "blob":
        try:
            base64.b64decode(str(value), validate=True)
        except ValueError:
            return [f"{path}: not base64"]
        return []
    return [f"{path}: unchecked shape type {kind}"]


def strict(client: Any) -> Any:
    """Check every JSON answer the client receives against its operation's output shape
    (or, for an error, AWS's error form) before botocore parses it."""

    def check(http_response: Any, model: OperationModel, **_: Any) -> None:
        if model.has_event_stream_output:
            return
        body = json.loads(http_response.content or b"{}")
        if http_response.status_code >= 300:
            assert http_response.headers.get("x-amzn-ErrorType"), "an AWS error names its type"
            assert set(body) == {"message"} and isinstance(body["message"], str)
            return
        problems = shape_problems(body, model.output_shape)
        assert not problems, problems

    client.meta.events.register("after-call", check)
    return client


# -- fixtures --------------------------------------------------------------------------------
# One moto, one server and one set of clients per module (building boto3 clients loads the
# service models); every test gets a fresh Behaviour (first-time faults), no jobs, an empty
# bucket and a reset clock.
@pytest.fixture(scope="module")
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET)
        yield client


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def emulator(s3: Any, clock: Clock) -> Iterator[tuple[BedrockEmulator, EmulatorServer]]:
    bedrock = BedrockEmulator(Behaviour(EmulatorConfig()), s3=s3, clock=clock)
    server = EmulatorServer([bedrock.vendor]).start()
    try:
        yield bedrock, server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _fresh(emulator: tuple[BedrockEmulator, EmulatorServer], s3: Any, clock: Clock) -> None:
    bedrock, _ = emulator
    bedrock.behaviour = Behaviour(EmulatorConfig(batch_seconds=BATCH_SECONDS))
    bedrock._jobs.clear()
    for listed in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in listed.get("Contents") or []:
            s3.delete_object(Bucket=BUCKET, Key=item["Key"])
    clock.now = Clock().now


@pytest.fixture(scope="module")
def clients(emulator: tuple[BedrockEmulator, EmulatorServer]) -> BedrockClients:
    bedrock, server = emulator
    built = BedrockClients(
        region=REGION,
        runtime_url=bedrock.runtime_url(server.base_url),
        control_url=bedrock.control_url(server.base_url),
        timeouts=Timeouts(connect=2.0, read=10.0),
    )
    strict(built.runtime())
    strict(built.control())
    return built


@pytest.fixture
def runtime(clients: BedrockClients) -> Any:
    return clients.runtime()


@pytest.fixture
def control(clients: BedrockClients) -> Any:
    return clients.control()


@pytest.fixture
def sync(clients: BedrockClients) -> BedrockConverse:
    return BedrockConverse("bedrock", clients)


@pytest.fixture
def batch(clients: BedrockClients) -> BedrockBatch:
    return BedrockBatch("bedrock", clients, BatchSettings(bucket=BUCKET, role_arn=ROLE, min_records=1))


def request(text: str, *, custom_id: str = "seq-0", model: str = CLAUDE, **kw: Any) -> ProviderRequest:
    return ProviderRequest(
        custom_id=custom_id,
        customer_item_id=custom_id,
        operation="responses",
        model="catalog-model",
        provider_model_id=model,
        input={"system": "Be brief.", "messages": [{"role": "user", "content": text}]},
        max_output_tokens=kw.pop("max_output_tokens", 64),
        **kw,
    )


def drain(events: Iterator[StreamEvent]) -> list[StreamEvent]:
    return list(events)


# -- (a) botocore reads every answer -----------------------------------------------------------
def test_converse_answer_parses(runtime: Any) -> None:
    answer = runtime.converse(
        modelId=CLAUDE,
        system=[{"text": "Be brief."}],
        messages=[{"role": "user", "content": [{"text": "Hello"}]}],
        inferenceConfig={"maxTokens": 8, "temperature": 0.5},
    )
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert answer["stopReason"] == "max_tokens"
    text = answer["output"]["message"]["content"][0]["text"]
    assert text.startswith(f"Simulated answer from bedrock/{CLAUDE}:")
    assert answer["usage"]["outputTokens"] == len(text.split()) == 8
    assert answer["usage"]["totalTokens"] == answer["usage"]["inputTokens"] + 8


def test_converse_stream_parses_to_the_end(runtime: Any) -> None:
    whole = runtime.converse(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "Stream me"}]}])
    opened = runtime.converse_stream(
        modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "Stream me"}]}]
    )
    assert opened["ResponseMetadata"]["HTTPHeaders"]["content-type"] == EVENT_STREAM
    events = list(opened["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    assert set(kinds[1:-3]) == {"contentBlockDelta"}
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text == whole["output"]["message"]["content"][0]["text"]
    assert events[-2]["messageStop"]["stopReason"] == whole["stopReason"]
    assert events[-1]["metadata"]["usage"] == whole["usage"]


def _stream_frames(emulator: tuple[BedrockEmulator, EmulatorServer], body: dict[str, Any]) -> list[Any]:
    """The raw ConverseStream frames the emulator answers `body` with, decoded by botocore's
    EventStreamBuffer (lengths and CRCs checked)."""
    bedrock, server = emulator
    url = urlsplit(bedrock.runtime_url(server.base_url))
    connection = http.client.HTTPConnection(url.netloc, timeout=10)
    connection.request(
        "POST",
        f"{url.path}/model/{CLAUDE}/converse-stream",
        json.dumps(body),
        {"content-type": "application/json"},
    )
    raw = connection.getresponse().read()
    connection.close()
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    return list(buffer)


def test_event_stream_frames_fit_the_service_model(
    emulator: tuple[BedrockEmulator, EmulatorServer], runtime: Any
) -> None:
    """The raw frames, decoded by botocore's EventStreamBuffer (lengths and CRCs checked),
    carry event headers and payloads that fit each event's shape."""
    frames = _stream_frames(emulator, {"messages": [{"role": "user", "content": [{"text": "Frames"}]}]})
    output = runtime.meta.service_model.operation_model("ConverseStream").output_shape.members["stream"]
    assert frames
    for frame in frames:
        assert frame.headers[":message-type"] == "event"
        assert frame.headers[":content-type"] == "application/json"
        event = output.members[frame.headers[":event-type"]]
        problems = shape_problems(json.loads(frame.payload), event)
        assert not problems, problems


def test_errors_parse_as_the_modelled_exceptions(runtime: Any) -> None:
    with pytest.raises(runtime.exceptions.ThrottlingException) as throttled:
        runtime.converse(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "[simulate:429]"}]}])
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    with pytest.raises(runtime.exceptions.ValidationException) as refused:
        runtime.converse(
            modelId=CLAUDE,
            messages=[{"role": "user", "content": [{"text": "Hi"}]}],
            inferenceConfig={"temperature": 1.5},  # botocore checks no maximum; Bedrock does
        )
    assert refused.value.response["Error"]["Message"] == (
        "1 validation error detected: $.inferenceConfig.temperature: at most 1, not 1.5"
    )
    with pytest.raises(runtime.exceptions.ValidationException):
        runtime.converse(
            modelId=CLAUDE,
            messages=[
                {"role": "user", "content": [{"text": "a"}]},
                {"role": "user", "content": [{"text": "b"}]},
            ],
        )
    with pytest.raises(runtime.exceptions.ValidationException):
        runtime.converse(
            modelId="acme.unknown-model-v1", messages=[{"role": "user", "content": [{"text": "a"}]}]
        )
    with pytest.raises(runtime.exceptions.InternalServerException):
        runtime.converse(
            modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "[simulate:transient]"}]}]
        )
    with pytest.raises(runtime.exceptions.ServiceUnavailableException):
        runtime.converse(
            modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "[simulate:overloaded]"}]}]
        )


def test_parameter_validation_stays_on(runtime: Any) -> None:
    with pytest.raises(ParamValidationError):
        runtime.converse(
            modelId=CLAUDE,
            messages=[{"role": "user", "content": [{"text": "a"}]}],
            inferenceConfig={"maxTokens": 0},
        )
    with pytest.raises(ParamValidationError):
        runtime.converse(modelId=CLAUDE, messages=[{"role": "robot", "content": "not a list"}])


def test_control_plane_answers_parse(s3: Any, control: Any, clock: Clock) -> None:
    models = control.list_foundation_models()["modelSummaries"]
    assert CLAUDE in [m["modelId"] for m in models]
    assert [
        m["providerName"] for m in control.list_foundation_models(byProvider="Meta")["modelSummaries"]
    ] == ["Meta", "Meta"]
    record = {
        "recordId": "seq-0",
        "modelInput": {
            "anthropic_version": "bedrock-2023-05-31",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "Hi"}],
        },
    }
    s3.put_object(Bucket=BUCKET, Key="in/a.jsonl", Body=json.dumps(record).encode() + b"\n")
    created = control.create_model_invocation_job(
        jobName="parse-check-1",
        roleArn=ROLE,
        clientRequestToken="parse-check-1",
        modelId=CLAUDE,
        inputDataConfig={
            "s3InputDataConfig": {"s3InputFormat": "JSONL", "s3Uri": f"s3://{BUCKET}/in/a.jsonl"}
        },
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        timeoutDurationInHours=24,
    )
    arn = created["jobArn"]
    again = control.create_model_invocation_job(
        jobName="parse-check-1",
        roleArn=ROLE,
        clientRequestToken="parse-check-1",
        modelId=CLAUDE,
        inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/a.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
    )
    assert again["jobArn"] == arn  # the idempotency token
    job = control.get_model_invocation_job(jobIdentifier=arn)
    assert job["status"] == "Submitted" and isinstance(job["submitTime"], datetime)
    clock.now += BATCH_SECONDS / 2
    assert control.get_model_invocation_job(jobIdentifier=arn)["status"] == "InProgress"
    clock.now += BATCH_SECONDS
    done = control.get_model_invocation_job(jobIdentifier=arn.rsplit("/", 1)[-1])  # the bare id works too
    assert done["status"] == "Completed"
    assert (done["totalRecordCount"], done["successRecordCount"], done["errorRecordCount"]) == (1, 1, 0)
    assert isinstance(done["endTime"], datetime)
    with pytest.raises(control.exceptions.ValidationException):
        control.stop_model_invocation_job(jobIdentifier=arn)  # already over
    second = control.create_model_invocation_job(
        jobName="parse-check-2",
        roleArn=ROLE,
        modelId=CLAUDE,
        inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/"}},  # a folder works too
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
    )["jobArn"]
    assert (
        control.stop_model_invocation_job(jobIdentifier=second)["ResponseMetadata"]["HTTPStatusCode"] == 200
    )
    assert control.get_model_invocation_job(jobIdentifier=second)["status"] == "Stopping"
    clock.now += STOP_SECONDS
    stopped = control.get_model_invocation_job(jobIdentifier=second)
    assert stopped["status"] == "Stopped" and isinstance(stopped["endTime"], datetime)
    with pytest.raises(control.exceptions.ResourceNotFoundException):
        control.get_model_invocation_job(jobIdentifier="abcdefghijkl")
    with pytest.raises(control.exceptions.ValidationException):
        control.get_model_invocation_job(jobIdentifier="Not-A-Job")
    with pytest.raises(control.exceptions.ConflictException):
        control.create_model_invocation_job(
            jobName="parse-check-2",
            roleArn=ROLE,
            modelId=CLAUDE,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/a.jsonl"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
        )
    missing = control.create_model_invocation_job(
        jobName="parse-check-3",
        roleArn=ROLE,
        modelId=CLAUDE,
        inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/nothing/here.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
    )["jobArn"]
    failed = control.get_model_invocation_job(jobIdentifier=missing)
    assert failed["status"] == "Failed" and "Could not read the input" in failed["message"]


def test_model_invocation_jobs_list_filters_pages_and_refuses_as_bedrock_does(
    s3: Any, control: Any, clock: Clock
) -> None:
    s3.put_object(Bucket=BUCKET, Key="in/a.jsonl", Body=b"")
    made = []
    for n in range(3):
        made.append(
            control.create_model_invocation_job(
                jobName=f"list-check-{n}",
                roleArn=ROLE,
                modelId=CLAUDE,
                inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/a.jsonl"}},
                outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
            )["jobArn"]
        )
        clock.now += 60
    listed = control.list_model_invocation_jobs()["invocationJobSummaries"]
    assert [job["jobArn"] for job in listed] == made[::-1]  # newest first
    named = control.list_model_invocation_jobs(nameContains="check-1")["invocationJobSummaries"]
    assert [job["jobName"] for job in named] == ["list-check-1"]
    since = datetime.fromtimestamp(clock.now - 150, UTC)
    recent = control.list_model_invocation_jobs(submitTimeAfter=since, sortOrder="Ascending")
    assert [job["jobArn"] for job in recent["invocationJobSummaries"]] == made[1:]
    pages = control.get_paginator("list_model_invocation_jobs").paginate(PaginationConfig={"PageSize": 2})
    assert [len(page["invocationJobSummaries"]) for page in pages] == [2, 1]
    with pytest.raises(control.exceptions.ValidationException):
        control.list_model_invocation_jobs(nextToken="not-ours")
    with pytest.raises(control.exceptions.ValidationException):
        control.list_model_invocation_jobs(nameContains="not a name!")


# -- (b) the adapter against the emulator --------------------------------------------------
def test_complete(sync: BedrockConverse) -> None:
    result = sync.complete(request("Hello there", max_output_tokens=12))
    assert result.status == "completed" and result.output is not None
    assert result.output["content"].startswith(f"Simulated answer from bedrock/{CLAUDE}:")
    assert result.output["finish_reason"] == "length"
    assert result.usage.completion_tokens == 12 and result.usage.prompt_tokens > 0
    assert result.raw is not None and "ResponseMetadata" not in result.raw
    assert result.raw["stopReason"] == "max_tokens"


def test_stream(sync: BedrockConverse) -> None:
    events = drain(sync.stream(request("Stream this", max_output_tokens=400)))
    assert isinstance(events[0], StreamStart) and isinstance(events[-1], StreamEnd)
    deltas = [e.text for e in events if isinstance(e, StreamDelta)]
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.result.output is not None
    assert end.result.output["content"] == "".join(deltas)
    assert end.result.output["finish_reason"] == "stop"
    assert end.usage.completion_tokens == len(deltas)
    whole = sync.complete(request("Stream this", max_output_tokens=400))
    assert whole.output == end.result.output and whole.usage == end.usage


def test_throttling_is_transient_rate_limited_then_answers(sync: BedrockConverse) -> None:
    with pytest.raises(TransientProviderError) as raised:
        sync.complete(request("Busy [simulate:429]"))
    assert raised.value.code == "rate_limited"
    assert sync.complete(request("Busy [simulate:429]")).status == "completed"


def test_stream_reset_midway_is_stream_interrupted(sync: BedrockConverse) -> None:
    events = sync.stream(request("Cut me off [simulate:reset]"))
    assert isinstance(next(events), StreamStart)
    with pytest.raises(TransientProviderError) as raised:
        drain(events)
    assert raised.value.code == "stream_interrupted"
    assert isinstance(drain(sync.stream(request("Cut me off [simulate:reset]")))[-1], StreamEnd)


def test_dropped_connection_is_unavailable(sync: BedrockConverse) -> None:
    with pytest.raises(ProviderUnavailable) as raised:
        sync.complete(request("Gone [simulate:down:bedrock]"))
    assert raised.value.code == "provider_unreachable"
    events = sync.stream(request("Gone [simulate:down]"))
    with pytest.raises(ProviderUnavailable):  # before StreamStart: eligible for failover
        next(events)


def test_validation_exception_is_permanent(sync: BedrockConverse) -> None:
    with pytest.raises(PermanentProviderError) as raised:
        sync.complete(request("Never [simulate:fail]"))
    assert raised.value.code == "provider_rejected"
    assert "ValidationException" in raised.value.message


def test_server_faults_before_the_first_byte(
    sync: BedrockConverse, emulator: tuple[BedrockEmulator, EmulatorServer]
) -> None:
    with pytest.raises(TransientProviderError) as five:
        next(sync.stream(request("Hm [simulate:5xx:bedrock]")))
    assert five.value.code == "provider_5xx"
    with pytest.raises(TransientProviderError) as overloaded:
        sync.complete(request("Hm [simulate:overloaded]"))
    assert overloaded.value.code == "overloaded"
    # One read time-out for every read of a stream: the longer of first byte and idle.
    bedrock, server = emulator
    quick = BedrockClients(
        region=REGION,
        runtime_url=bedrock.runtime_url(server.base_url),
        timeouts=Timeouts(connect=2.0, read=10.0, first_byte=10.0, idle=0.5),
    )
    silent_stream = BedrockConverse("bedrock", quick).stream(
        request("Hm [simulate:timeout:bedrock]", first_byte_timeout_seconds=0.5)
    )
    with pytest.raises(TransientProviderError) as silent:
        next(silent_stream)
    assert silent.value.code == "provider_timeout"


def test_check_lists_the_models(sync: BedrockConverse) -> None:
    assert CLAUDE in sync.check()


def test_batch_job_end_to_end(s3: Any, batch: BedrockBatch, clock: Clock) -> None:
    texts = [
        "Alpha",
        "Bravo [simulate:fail]",
        "Charlie [simulate:malformed]",
        "Delta [simulate:transient]",
        "Echo",
    ]
    requests = [request(text, custom_id=f"seq-{i}") for i, text in enumerate(texts)]
    job_id = batch.submit(requests)
    assert job_id.startswith(f"arn:aws:bedrock:{REGION}:123456789012:model-invocation-job/")
    inputs = s3.list_objects_v2(Bucket=BUCKET, Prefix="bedrock-batch/input/")["Contents"]
    lines = s3.get_object(Bucket=BUCKET, Key=inputs[0]["Key"])["Body"].read().decode().splitlines()
    assert [json.loads(line)["recordId"] for line in lines] == [f"seq-{i}" for i in range(5)]
    assert json.loads(lines[0])["modelInput"]["anthropic_version"] == "bedrock-2023-05-31"

    assert batch.poll(job_id).state == "validating"
    clock.now += BATCH_SECONDS / 2
    running = batch.poll(job_id)
    assert (running.state, running.total) == ("in_progress", 5)
    clock.now += BATCH_SECONDS
    done = batch.poll(job_id)
    assert (done.state, done.total, done.completed_count, done.failed_count) == ("completed", 5, 3, 2)

    results = {r.custom_id: r for r in batch.results(job_id)}
    assert sorted(results) == ["seq-0", "seq-1", "seq-3", "seq-4"]  # seq-2's line was not JSON
    assert results["seq-0"].status == "completed" and results["seq-0"].output is not None
    assert results["seq-0"].output["content"].startswith(f"Simulated answer from bedrock/{CLAUDE}:")
    assert results["seq-0"].raw is not None and results["seq-0"].raw["type"] == "message"
    assert results["seq-0"].usage.completion_tokens > 0
    failed, flaky = results["seq-1"].error, results["seq-3"].error
    assert failed is not None and (failed.code, failed.transient) == ("provider_rejected", False)
    assert flaky is not None and (flaky.code, flaky.transient) == ("provider_5xx", True)
    key = f"bedrock-batch/output/{job_id.rsplit('/', 1)[-1]}/{inputs[0]['Key'].rsplit('/', 1)[-1]}.out"
    assert s3.get_object(Bucket=BUCKET, Key=key)["ContentLength"] > 0
    manifest_key = key.rsplit("/", 1)[0] + "/manifest.json.out"
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=manifest_key)["Body"].read())
    assert manifest["totalRecordCount"] == 5 and manifest["errorRecordCount"] == 2

    # The lane runner resubmits what is missing or transient: now they succeed.
    retry = batch.submit([requests[2], requests[3]])
    clock.now += BATCH_SECONDS
    assert batch.poll(retry).state == "completed"
    assert {r.custom_id: r.status for r in batch.results(retry)} == {
        "seq-2": "completed",
        "seq-3": "completed",
    }


def test_a_job_holding_a_record_that_finds_bedrock_down_is_never_made(
    batch: BedrockBatch, clock: Clock
) -> None:
    fine = request("Fine [simulate:down:anthropic]", custom_id="seq-0")  # another provider's mark
    # Then the create is dropped unanswered: the lane is unavailable (it fails over)
    with pytest.raises(ProviderUnavailable) as raised:
        batch.submit([fine, request("Gone [simulate:down:bedrock]", custom_id="seq-1")])
    assert raised.value.code == "provider_unreachable"
    job_id = batch.submit([fine])
    clock.now += BATCH_SECONDS * 2
    assert batch.poll(job_id).state == "completed"


def test_expired_job_keeps_the_finished_records(batch: BedrockBatch, clock: Clock) -> None:
    job_id = batch.submit(
        [request("One", custom_id="seq-0"), request("Two [simulate:expire]", custom_id="seq-1")]
    )
    clock.now += BATCH_SECONDS
    status = batch.poll(job_id)
    assert (status.state, status.total, status.completed_count) == ("expired", 2, 1)
    assert [r.custom_id for r in batch.results(job_id)] == ["seq-0"]


def test_llama_batch(batch: BedrockBatch, clock: Clock) -> None:
    job_id = batch.submit([request("Prime?", custom_id="seq-0", model=LLAMA, max_output_tokens=5000)])
    clock.now += BATCH_SECONDS
    [result] = list(batch.results(job_id))
    assert result.status == "completed" and result.raw is not None and "generation" in result.raw
    assert result.output is not None and result.output["content"].startswith(
        f"Simulated answer from bedrock/{LLAMA}:"
    )
    assert result.usage.completion_tokens == result.raw["generation_token_count"]


def test_llama_batch_answers_are_cut_at_their_stop_sequences(
    s3: Any, batch: BedrockBatch, clock: Clock
) -> None:
    def asking(custom_id: str, **extra: Any) -> ProviderRequest:
        built = request("Prime?", custom_id=custom_id, model=LLAMA)
        return replace(built, input={**built.input, **extra})

    job_id = batch.submit(
        [asking("seq-0", stop=["never said", "answer"]), asking("seq-1"), asking("seq-2", stop="zzz")]
    )
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    [stops_key] = [key for key in keys if key.endswith(".stops.json")]
    assert stops_key.removesuffix(".stops.json") + ".jsonl" in keys  # beside the input
    assert json.loads(s3.get_object(Bucket=BUCKET, Key=stops_key)["Body"].read()) == {
        "stops": {"seq-0": ["never said", "answer"], "seq-2": ["zzz"]}
    }
    clock.now += BATCH_SECONDS
    assert batch.poll(job_id).total == 3  # the stops file is no input of the job
    results = {r.custom_id: r for r in batch.results(job_id)}
    cut, whole, unmatched = results["seq-0"], results["seq-1"], results["seq-2"]
    assert cut.output is not None and cut.output["content"] == "Simulated "
    assert cut.output["finish_reason"] == "stop"
    assert cut.raw is not None and cut.raw["generation"].startswith("Simulated answer from")
    assert cut.usage == whole.usage and cut.usage.completion_tokens == cut.raw["generation_token_count"]
    assert whole.output is not None and unmatched.output is not None
    assert whole.output["content"] == unmatched.output["content"] == cut.raw["generation"]


def test_llama_converse_takes_stop_sequences(sync: BedrockConverse) -> None:
    built = request("Prime?", model=LLAMA)
    result = sync.complete(replace(built, input={**built.input, "stop": ["zzz"]}))
    assert result.status == "completed"


def test_converse_stop_sequences_cut_the_answer_as_bedrock_does(sync: BedrockConverse) -> None:
    built = request("Say hi")
    result = sync.complete(replace(built, input={**built.input, "stop": [" from", "zzz"]}))
    assert result.output is not None and result.raw is not None
    assert (result.output["content"], result.output["finish_reason"]) == ("Simulated answer", "stop")
    assert result.raw["stopReason"] == "stop_sequence"


def test_a_batch_without_stops_writes_no_stops_file(s3: Any, batch: BedrockBatch, clock: Clock) -> None:
    job_id = batch.submit([request("Prime?", model=LLAMA)])
    assert not [o for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"] if o["Key"].endswith(".json")]
    clock.now += BATCH_SECONDS
    [result] = list(batch.results(job_id))
    assert result.status == "completed"


def test_a_stops_job_whose_stops_file_is_gone_answers_nothing_uncut(
    s3: Any, batch: BedrockBatch, clock: Clock
) -> None:
    built = request("Prime?", model=LLAMA)
    job_id = batch.submit([replace(built, input={**built.input, "stop": ["answer"]})])
    for listed in s3.list_objects_v2(Bucket=BUCKET)["Contents"]:
        if listed["Key"].endswith(".stops.json"):
            s3.delete_object(Bucket=BUCKET, Key=listed["Key"])
    clock.now += BATCH_SECONDS
    with pytest.raises(ProviderError):
        list(batch.results(job_id))


def test_cancel_and_unknown_jobs(batch: BedrockBatch, clock: Clock) -> None:
    job_id = batch.submit([request("Stop me")])
    batch.cancel(job_id)
    assert batch.poll(job_id).state == "in_progress"  # Stopping
    batch.cancel(job_id)  # still stopping: Bedrock refuses a second stop, the adapter shrugs
    clock.now += STOP_SECONDS
    assert batch.poll(job_id).state == "cancelled"
    assert list(batch.results(job_id)) == []  # stopped before writing anything
    batch.cancel(job_id)  # already over: nothing to do
    unknown = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/zzzzzzzzzzzz"
    with pytest.raises(UnknownJob):
        batch.poll(unknown)
    with pytest.raises(UnknownJob):
        batch.cancel(unknown)
    with pytest.raises(UnknownJob):
        batch.poll("not-a-job-id")


def test_submit_to_a_missing_bucket_fails_the_submit(clients: BedrockClients) -> None:
    adapter = BedrockBatch(
        "bedrock", clients, BatchSettings(bucket="no-such-bucket", role_arn=ROLE, min_records=1)
    )
    with pytest.raises(PermanentProviderError) as raised:
        adapter.submit([request("x")])
    assert raised.value.code == "not_found"


def test_emulator_errors_are_aws_errors(control: Any) -> None:
    with pytest.raises(ClientError) as raised:
        control.get_model_invocation_job(jobIdentifier="000000000000")
    assert raised.value.response["Error"] == {
        "Code": "ResourceNotFoundException",
        "Message": "The specified job was not found.",
    }


def test_the_strict_check_catches_a_shape_error(runtime: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore alone would parse an answer without its required `usage`: the check fails it."""
    original = BedrockEmulator.converse_response

    def broken(self: BedrockEmulator, answer: Any) -> dict[str, Any]:
        body = original(self, answer)
        del body["usage"]
        body["extra"] = True
        return body

    monkeypatch.setattr(BedrockEmulator, "converse_response", broken)
    with pytest.raises(AssertionError, match=r"usage: required by ConverseResponse"):
        runtime.converse(modelId=CLAUDE, messages=[{"role": "user", "content": [{"text": "Hi"}]}])


def test_an_exception_event_mid_stream(sync: BedrockConverse, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bedrock reports trouble after the stream opened as an exception frame: botocore raises
    it from the iteration, the adapter maps it like the same error before the first byte."""
    original = BedrockEmulator._events

    def throttled(self: BedrockEmulator, answer: Any) -> Iterator[tuple[float, bytes]]:
        frames = original(self, answer)
        yield next(frames)
        yield next(frames)
        yield (
            0.0,
            stream_exception("throttlingException", "Too many tokens, please wait before trying again."),
        )

    monkeypatch.setattr(BedrockEmulator, "_events", throttled)
    events = sync.stream(request("Midway"))
    assert isinstance(next(events), StreamStart)
    assert isinstance(next(events), StreamDelta)
    with pytest.raises(TransientProviderError) as raised:
        next(events)
    assert raised.value.code == "rate_limited"
    assert "Too many tokens" in raised.value.message


# -- (c) memory ---------------------------------------------------------------------------------
def _emulator_heap() -> int:
    """Bytes of live Python heap allocated under the Bedrock emulator's code, leaving out what
    moto stores (the S3 objects the jobs read and write live in moto here, in S3 on AWS)."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [
            tracemalloc.Filter(True, "*/emulators/bedrock.py", all_frames=True),
            tracemalloc.Filter(False, "*/moto/*", all_frames=True),
        ]
    )
    return sum(trace.size for trace in snapshot.traces)


def test_a_finished_batch_job_keeps_no_record_in_memory(batch: BedrockBatch, clock: Clock) -> None:
    """Bedrock reads a job's input from S3 when it runs; so does the emulator, which keeps only
    each input's key and count (issue 18: the local service process, which runs the
    emulators, stays flat in the batch's size). Before, every job kept its parsed records."""
    # Each job 160 KB of prompts, so what a job keeps regardless of its size (its key and
    # count, ~5 KB in all) stays far under the bound, while a job's records would not.
    records, prompt = 5, "x" * 32_000

    def run(jobs: int) -> None:
        for _ in range(jobs):
            job = batch.submit(
                [request(f"{prompt} #{uuid.uuid4().hex}", custom_id=f"seq-{n}") for n in range(records)]
            )
            clock.now += BATCH_SECONDS
            assert batch.poll(job).state == "completed"

    run(2)  # clients, connections, lazy imports
    tracemalloc.start(30)
    try:
        run(3)
        gc.collect()
        after_3 = _emulator_heap()
        run(5)
        gc.collect()
        after_8 = _emulator_heap()
    finally:
        tracemalloc.stop()
    per_job = (after_8 - after_3) / 5
    job_bytes = records * len(prompt)
    assert per_job < job_bytes / 8, f"{per_job:.0f} bytes kept per job of {job_bytes} bytes"


# -- (c) the emulator refuses what Bedrock refuses, as Bedrock does -----------------------------
def post_raw(emulator: tuple[BedrockEmulator, EmulatorServer], model: str, body: dict[str, Any]) -> Any:
    """A Converse request as bytes on the wire (botocore would not serialize unknown members),
    its answer parsed by botocore's REST-JSON parser as boto3 parses an answer."""
    from botocore.parsers import create_parser

    bedrock, server = emulator
    url = urlsplit(bedrock.runtime_url(server.base_url))
    connection = http.client.HTTPConnection(url.netloc, timeout=10)
    connection.request(
        "POST", f"{url.path}/model/{model}/converse", json.dumps(body), {"content-type": "application/json"}
    )
    answer = connection.getresponse()
    headers = {name.lower(): value for name, value in answer.getheaders()}
    raw = {"status_code": answer.status, "headers": headers, "body": answer.read()}
    connection.close()
    assert answer.status == 400
    assert headers["x-amzn-errortype"] == "ValidationException"
    assert headers["content-type"].startswith("application/json")
    assert set(json.loads(raw["body"])) == {"message"}
    shape = boto3.session.Session().client("bedrock-runtime", region_name=REGION).meta.service_model
    parsed = create_parser("rest-json").parse(raw, shape.operation_model("Converse").output_shape)
    return ClientError(parsed, "Converse")


HI = [{"role": "user", "content": [{"text": "Hi"}]}]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {"messages": HI, "inferenceConfig": {"maxTokens": 10, "topK": 5}},
            "Unknown parameter in inferenceConfig",
        ),
        ({"messages": HI, "inferenceConfig": {"stopSequences": ["s"] * 2501}}, "at most 2500 items"),
        (
            {"messages": HI, "toolConfig": {"tools": [{"webSearch": {}}]}},
            'Unknown parameter in toolConfig.tools[0]: "webSearch"',
        ),
        (
            {"messages": HI, "toolConfig": {"tools": [{"type": "web_search"}]}},
            "Unknown parameter in toolConfig.tools[0]",
        ),
        ({"messages": HI, "seed": 7}, 'Unknown parameter in input: "seed"'),
    ],
)
def test_bodies_bedrock_refuses_are_its_400(
    emulator: tuple[BedrockEmulator, EmulatorServer], body: dict[str, Any], said: str
) -> None:
    error = post_raw(emulator, CLAUDE, body)
    assert error.response["Error"]["Code"] == "ValidationException"
    assert error.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert said in error.response["Error"]["Message"]


def test_botocore_raises_the_refusals_it_cannot_see(runtime: Any) -> None:
    """Valid for botocore's validator, refused by Bedrock: a ClientError with AWS's code."""
    tools = {"tools": [{"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object"}}}}]}
    with pytest.raises(ClientError) as raised:
        runtime.converse(modelId=LLAMA, messages=HI, toolConfig={**tools, "toolChoice": {"any": {}}})
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert "only the auto tool choice" in raised.value.response["Error"]["Message"]
    with pytest.raises(runtime.exceptions.ValidationException):
        runtime.converse(modelId=CLAUDE, messages=HI, inferenceConfig={"stopSequences": ["s"] * 2501})
    with pytest.raises(runtime.exceptions.ValidationException):
        runtime.converse_stream(
            modelId=CLAUDE,
            messages=[
                *HI,
                {
                    "role": "assistant",
                    "content": [{"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}}],
                },
                {"role": "user", "content": [{"text": "no answer to t1"}]},
            ],
            toolConfig=tools,
        )


def test_the_adapters_requests_pass(sync: BedrockConverse) -> None:
    """What the adapter builds for the catalog's lanes is what the emulator takes."""
    payload = {
        "instructions": "Use tools.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "call_id": "fc 1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "fc 1", "output": "sunny"},
        ],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "temperature": 1.5,
        "response_format": {"type": "json_object"},
    }
    for model in (CLAUDE, LLAMA):
        built = ProviderRequest(
            custom_id="seq-0",
            customer_item_id="i",
            operation="responses",
            model="m",
            provider_model_id=model,
            input=payload,
            max_output_tokens=9000,
        )
        assert sync.complete(built).status == "completed"
        assert isinstance(drain(sync.stream(built))[-1], StreamEnd)


def test_a_batch_record_bedrock_refuses_is_an_error_record(s3: Any, control: Any, clock: Clock) -> None:
    good = {"prompt": "Hi", "max_gen_len": 16}
    lines = [
        {"recordId": "REC0000001", "modelInput": good},
        {"recordId": "REC0000002", "modelInput": {**good, "stop": ["x"]}},
        {"recordId": "REC0000003", "modelInput": {**good, "max_gen_len": 9000}},
    ]
    s3.put_object(
        Bucket=BUCKET,
        Key="in/records.jsonl",
        Body="".join(json.dumps(line) + "\n" for line in lines).encode(),
    )
    arn = control.create_model_invocation_job(
        jobName="record-check",
        roleArn=ROLE,
        modelId=LLAMA,
        inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/records.jsonl"}},
        outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
    )["jobArn"]
    clock.now += BATCH_SECONDS
    done = control.get_model_invocation_job(jobIdentifier=arn)
    assert (done["successRecordCount"], done["errorRecordCount"]) == (1, 2)
    key = f"out/{arn.rsplit('/', 1)[-1]}/records.jsonl.out"
    out = [json.loads(line) for line in s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().splitlines()]
    assert "modelOutput" in out[0]
    assert out[1]["error"]["errorCode"] == 400 and "$.stop: extraneous key" in out[1]["error"]["errorMessage"]
    assert "max_gen_len" in out[2]["error"]["errorMessage"]


def test_a_job_request_bedrock_refuses_is_its_400(control: Any) -> None:
    with pytest.raises(control.exceptions.ValidationException) as raised:
        control.create_model_invocation_job(
            jobName="too-long-a-wait",
            roleArn=ROLE,
            modelId=CLAUDE,
            inputDataConfig={"s3InputDataConfig": {"s3Uri": f"s3://{BUCKET}/in/a.jsonl"}},
            outputDataConfig={"s3OutputDataConfig": {"s3Uri": f"s3://{BUCKET}/out/"}},
            timeoutDurationInHours=500,
        )
    assert "timeoutDurationInHours: at most 168" in raised.value.response["Error"]["Message"]


# -- forced tool calls -------------------------------------------------------------------------
def tool_config(choice: Any) -> dict[str, Any]:
    schema = {"json": {"type": "object", "properties": {"city": {"type": "string"}}}}
    tools = [{"toolSpec": {"name": name, "inputSchema": schema}} for name in ("get_time", "get_weather")]
    return {"tools": tools, "toolChoice": choice}


def test_botocore_reads_a_forced_tool_call(
    emulator: tuple[BedrockEmulator, EmulatorServer], runtime: Any
) -> None:
    # Given a Converse body that must call a tool ({any}: the first; {tool}: the one named)
    messages = [{"role": "user", "content": [{"text": "Weather?"}]}]
    # When botocore sends it, Then the answer is one toolUse block and stopReason tool_use
    forced = runtime.converse(modelId=CLAUDE, messages=messages, toolConfig=tool_config({"any": {}}))
    [block] = forced["output"]["message"]["content"]
    # its input valid under the tool's inputSchema, as a model fills it in (it was always `{}`)
    assert block["toolUse"]["name"] == "get_time" and block["toolUse"]["input"] == {"city": "simulated"}
    assert block["toolUse"]["toolUseId"].startswith("tooluse_") and forced["stopReason"] == "tool_use"
    assert forced["usage"]["outputTokens"] > 0  # usage as for text
    named = tool_config({"tool": {"name": "get_weather"}})
    chosen = runtime.converse(modelId=CLAUDE, messages=messages, toolConfig=named)
    assert chosen["output"]["message"]["content"][0]["toolUse"]["name"] == "get_weather"
    # And streamed as ConverseStream streams a tool call
    events = list(runtime.converse_stream(modelId=CLAUDE, messages=messages, toolConfig=named)["stream"])
    assert [next(iter(e)) for e in events] == [
        "messageStart",
        "contentBlockStart",
        "contentBlockDelta",
        "contentBlockStop",
        "messageStop",
        "metadata",
    ]
    start = events[1]["contentBlockStart"]
    assert start["start"]["toolUse"] == {
        "toolUseId": chosen["output"]["message"]["content"][0]["toolUse"]["toolUseId"],
        "name": "get_weather",
    }
    assert events[2]["contentBlockDelta"]["delta"] == {"toolUse": {"input": '{"city": "simulated"}'}}
    assert events[4]["messageStop"]["stopReason"] == "tool_use"
    assert events[5]["metadata"]["usage"] == chosen["usage"]
    # And every frame fits its event's shape in the service model
    output = runtime.meta.service_model.operation_model("ConverseStream").output_shape.members["stream"]
    for frame in _stream_frames(emulator, {"messages": messages, "toolConfig": named}):
        problems = shape_problems(json.loads(frame.payload), output.members[frame.headers[":event-type"]])
        assert not problems, problems
    # {auto} is answered with text, as before
    auto = runtime.converse(modelId=CLAUDE, messages=messages, toolConfig=tool_config({"auto": {}}))
    assert "text" in auto["output"]["message"]["content"][0] and auto["stopReason"] == "end_turn"


CHAT_TOOLS: Any = [
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    },
]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_a_forced_call_comes_back_through_the_adapter(sync: BedrockConverse, choice: Any) -> None:
    # Given an item that must call a function (the first, or the one it names)
    messages = [{"role": "user", "content": "Weather?"}]
    asked = replace(request(""), input={"messages": messages, "tools": CHAT_TOOLS, "tool_choice": choice})
    name = "get_time" if choice == "required" else "get_weather"
    # When the adapter completes it, Then the call is its tool_calls, finish_reason tool_calls
    whole = sync.complete(asked)
    assert whole.status == "completed" and whole.output is not None
    [call] = whole.output["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("tooluse_")
    assert call["function"] == {"name": name, "arguments": "{}"}
    assert whole.output["finish_reason"] == "tool_calls" and whole.usage.completion_tokens > 0
    # And streamed, the deltas' fragments joined are the call
    events = drain(sync.stream(asked))
    fragments = [f for e in events if isinstance(e, StreamDelta) for f in e.tool_calls]
    assert fragments[0].id == call["id"] and fragments[0].name == name
    assert {f.index for f in fragments} == {0} and "".join(f.arguments for f in fragments) == "{}"
    end = events[-1]
    assert isinstance(end, StreamEnd) and end.result.output == whole.output
    assert end.usage == whole.usage
