"""An emulator of AWS Bedrock (docs/emulators.md): the runtime's Converse and ConverseStream
and the control plane's batch inference jobs and model list, in the REST-JSON wire protocol
botocore speaks, so the adapter's real boto3 clients talk to it through `endpoint_url`.

Bedrock is two botocore services, so two endpoint URLs, both under the vendor's prefix
(botocore keeps an endpoint URL's path): the runtime at `<prefix>/runtime`, the control
plane at `<prefix>` (`runtime_url(base)` / `control_url(base)`).

    POST <prefix>/runtime/model/{modelId}/converse         a Converse answer
    POST <prefix>/runtime/model/{modelId}/converse-stream  an AWS event stream
                                                            (application/vnd.amazon.eventstream):
                                                            messageStart, contentBlockDelta per
                                                            word, contentBlockStop, messageStop,
                                                            metadata {usage, metrics}
    POST <prefix>/model-invocation-job                     CreateModelInvocationJob
    GET  <prefix>/model-invocation-job/{jobIdentifier}     GetModelInvocationJob (ARN or id)
    POST <prefix>/model-invocation-job/{jobIdentifier}/stop StopModelInvocationJob
    GET  <prefix>/model-invocation-jobs                    ListModelInvocationJobs (nameContains,
                                                            statusEquals, submitTimeAfter/Before,
                                                            sortOrder, maxResults, nextToken)
    GET  <prefix>/foundation-models                        ListFoundationModels
    GET  <prefix>/inference-profiles                       ListInferenceProfiles

An event-stream frame (`event_frame`): prelude (total length, headers length, CRC32 of those
8 bytes), headers (`:event-type` or `:exception-type`, `:content-type`, `:message-type` =
event / exception; each as name length, name, type 7 = string, value length, value), the
JSON payload, and the CRC32 of everything before it; all integers big-endian.

Errors are AWS's: the status, header `x-amzn-ErrorType: <Code>`, body `{"message": ...}`.
Every Converse / ConverseStream request, every CreateModelInvocationJob and every batch
record is checked against Bedrock's contract (batchroute_tools/contracts/bedrock.py:
botocore's service model with the limits it documents, the service's own rules, the models'
native bodies), the same check the adapter's tests run: a request the contract refuses is
AWS's 400 ValidationException ("N validation errors detected: ..."), a record it refuses an
error record ({errorCode: 400, errorMessage: "Malformed input request: ..."}). An unknown
model is refused too, and so is Converse or ConverseStream on the bare id of a model the
emulated region serves on demand only through a cross-region inference profile (PROFILE_ONLY:
AWS's ValidationException "Invocation of model ID ... with on-demand throughput isn't
supported. ...", its apostrophe U+2019; the `us.` profile id is answered). Converse's
`cachePoint` blocks write to and read from the prompt cache (cache.py:
`cacheReadInputTokens`, `cacheWriteInputTokens`); on a non-Claude model they are refused.
Faults from behaviour.py: fail -> 400 ValidationException; transient and 5xx -> 500
InternalServerException; rate_limited -> 429 ThrottlingException; overloaded -> 503
ServiceUnavailableException; down -> the connection dropped; reset -> the event stream reset
after its first delta; timeout -> no first byte.

A Converse / ConverseStream body that forces a tool call (`toolConfig.toolChoice` `{any:
{}}`: its first tool; `{tool: {name}}`: that one, if declared) is answered with that call
(`forced_call`), as botocore's service model has it: `output.message.content` `[{toolUse:
{toolUseId: "tooluse_...", name, input}}]` (input valid under its `inputSchema`),
`stopReason` `tool_use`, usage as for text; streamed, messageStart, contentBlockStart
`{start: {toolUse: {toolUseId, name}}}`, one contentBlockDelta `{delta: {toolUse: {input}}}`
(the input's JSON), contentBlockStop, messageStop `tool_use`, metadata. `{auto: {}}` or no
toolChoice: text.

Batch jobs read their JSONL input from S3 and write `<output>/<job id>/<input name>.out` and
`manifest.json.out` through the injected S3 client (moto in tests and local mode). A job is
Submitted, then InProgress for the configured batch time (by the injected clock), then
Completed; a stopped job is Stopping for STOP_SECONDS (by the clock), then Stopped. Records
take the native body of the job's model (Anthropic messages with `anthropic_version`, or a
Llama `prompt`) and answer in kind; a record with a fault gets an
`error` record ({errorCode: 400 / 429 / 500 / 503, errorMessage}); a record with the expire
marker is not written and the job ends Expired; a malformed one is not JSON the first time.

The model list is AWS's two: ListFoundationModels lists foundation models by their bare id
(a configured `us.` or other geography-prefixed model by the model it routes to, once), and
ListInferenceProfiles the region's US cross-region inference profiles (`profile_ids`): each
configured `us.`-prefixed model, and `us.` + each PROFILE_ONLY model of the region the
emulator serves, sorted by id. A profile is summarized in botocore's InferenceProfileSummary
shape, deterministically: inferenceProfileId, inferenceProfileArn
(`arn:aws:bedrock:<region>:<account>:inference-profile/<id>`), inferenceProfileName (`US `
and the model's provider and name), models (the foundation-model ARN in each of
US_PROFILE_REGIONS), status ACTIVE, type SYSTEM_DEFINED. Query `type=APPLICATION` lists none
(no application profile is emulated); `maxResults` (default PROFILE_PAGE) pages the list,
`nextToken` being the offset of the next page.
"""

from __future__ import annotations

import json
import re
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import unquote

from batchroute_tools.contracts.anthropic import CACHE_TTLS, MAX_CACHE_BREAKPOINTS
from batchroute_tools.contracts.bedrock import model_family, request_violations
from batchroute_tools.emulators.behaviour import (
    DOWN_MARK,
    Answer,
    Behaviour,
    Fault,
    Work,
    call_arguments,
    stop_sequences,
)
from batchroute_tools.emulators.cache import Breakpoint, PromptCache, anthropic_minimum, digest
from batchroute_tools.emulators.server import Reply, Request, Vendor

Clock = Callable[[], float]  # seconds since the epoch

EVENT_STREAM: Final = "application/vnd.amazon.eventstream"
DEFAULT_MODELS: Final = (
    "anthropic.claude-3-5-haiku-20241022-v1:0",
    "anthropic.claude-3-haiku-20240307-v1:0",
    "meta.llama3-1-8b-instruct-v1:0",
    "meta.llama3-1-70b-instruct-v1:0",
)
_GEO: Final = re.compile(r"^(?:us|eu|apac|us-gov|global|jp|au|ca)\.")
# Models a region serves on demand only through a cross-region inference profile (the model
# id with its geography in front: `us.meta.llama3-3-70b-instruct-v1:0`): Converse and
# ConverseStream on the bare id (or its foundation-model ARN) there are refused with
# ValidationException ON_DEMAND_UNSUPPORTED. By region; the emulator's region's row applies.
#   meta.llama3-3-70b-instruct-v1:0, us-east-1: AWS's model card "Llama 3.3 70B Instruct"
#     (docs.aws.amazon.com/bedrock/latest/userguide/model-card-meta-llama-3-3-70b-instruct.html),
#     Regional availability: us-east-1 In-Region no, Geo yes (us-east-2 alone serves it
#     in-Region); geo inference id us.meta.llama3-3-70b-instruct-v1:0.
#   anthropic.claude-3-5-haiku-20241022-v1:0, us-east-1: AWS's sample aws-samples/
#     bedrock-engineer, src/main/api/bedrock/models.ts (Claude 3.5 Haiku: in-Region
#     us-west-2 only; cross-region us-east-1, us-east-2, us-west-2); sblakey/
#     llm-bedrock-anthropic#18 registers it by its `us.` profile id; Anthropic's "Claude on
#     Amazon Bedrock" lists its `us` profile (and no other).
PROFILE_ONLY: Final[Mapping[str, frozenset[str]]] = {
    "us-east-1": frozenset({"anthropic.claude-3-5-haiku-20241022-v1:0", "meta.llama3-3-70b-instruct-v1:0"}),
}
# AWS's message, verbatim (with its typographic apostrophe), as users quote it (e.g.
# anthropics/anthropic-sdk-python#894, aws-samples/bedrock-multi-agents-collaboration-workshop#21).
ON_DEMAND_UNSUPPORTED: Final = (
    "Invocation of model ID {model} with on-demand throughput isn\u2019t supported. Retry your "
    "request with the ID or ARN of an inference profile that contains this model."
)
US_PROFILE: Final = "us."
# The Regions a US cross-region inference profile routes to (its `models`): those of AWS's
# model card and the sample cited for each PROFILE_ONLY model (us-east-1, us-east-2, us-west-2).
US_PROFILE_REGIONS: Final = ("us-east-1", "us-east-2", "us-west-2")
PROFILE_PAGE: Final = 100  # ListInferenceProfiles' page when the request sets no maxResults
_JOB_ID: Final = re.compile(
    r"(?:arn:aws(?:-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:model-invocation-job/)?([a-z0-9]{12})"
)
_PROVIDER_NAMES: Final = {"anthropic": "Anthropic", "meta": "Meta", "amazon": "Amazon", "cohere": "Cohere"}
STOP_SECONDS: Final = 1.0  # a stopped job is Stopping this long (by the clock), then Stopped
_FAULT_STATUS: Final = {"fail": 400, "rate_limited": 429, "overloaded": 503}


# -- the wire ------------------------------------------------------------------------------
def event_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message (string headers only)."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", 7, len(raw_value)) + raw_value


def stream_event(event_type: str, body: Mapping[str, Any]) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return event_frame(headers, json.dumps(body, separators=(",", ":")).encode())


def stream_exception(exception_type: str, message: str) -> bytes:
    """An exception event (e.g. `throttlingException`) in the middle of a stream."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return event_frame(headers, json.dumps({"message": message}).encode())


def validation_reply(violations: Sequence[str]) -> Reply:
    """Bedrock's 400 for a request its contract refuses, worded as AWS words it."""
    count = len(violations)
    message = f"{count} validation error{'s' if count > 1 else ''} detected: {'; '.join(violations)}"
    return error_reply(400, "ValidationException", message)


def error_reply(status: int, error_type: str, message: str) -> Reply:
    return Reply.json(
        status, {"message": message}, {"x-amzn-ErrorType": error_type, "x-amzn-RequestId": str(uuid.uuid4())}
    )


def fault_reply(fault: Fault) -> Reply | None:
    """The answer of a fault, as Bedrock gives it; None for faults met later (a stream's)."""
    if fault.kind == "down":
        return Reply.dropped()
    if fault.kind == "fail":
        return error_reply(400, "ValidationException", fault.message)
    if fault.kind in ("transient", "5xx"):
        return error_reply(500, "InternalServerException", fault.message)
    if fault.kind == "rate_limited":
        return error_reply(
            429,
            "ThrottlingException",
            f"Too many requests, please wait before trying again. ({fault.message})",
        )
    if fault.kind == "overloaded":
        return error_reply(503, "ServiceUnavailableException", fault.message)
    return None


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# -- batch jobs ----------------------------------------------------------------------------
@dataclass
class _Output:
    """One input file of a job: its object and how many records it holds. The records are
    read from S3 when the job runs, not kept: a job holds no item in memory (issue 18: the
    local service process, which runs the emulators, stays flat in the batch's size)."""

    bucket: str
    key: str  # the input object's key
    count: int


@dataclass
class _Job:
    id: str
    arn: str
    name: str
    model: str
    role_arn: str
    token: str | None
    input_uri: str
    output: dict[str, Any]  # s3OutputDataConfig as given
    timeout_hours: int
    invocation_type: str | None
    submitted: float
    inputs: list[_Output]
    status: str = "Submitted"  # then InProgress, and one of the ends below
    stop_requested: float | None = None  # StopModelInvocationJob: Stopping, then Stopped
    ended: float | None = None
    message: str | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: {"total": 0, "processed": 0, "success": 0, "error": 0}
    )

    @property
    def finished(self) -> bool:
        return self.status in ("Completed", "Expired", "Stopped", "Failed")


class BedrockEmulator:
    def __init__(
        self,
        behaviour: Behaviour,
        *,
        provider: str = "bedrock",
        prefix: str = "/bedrock",
        s3: Any,
        models: Sequence[str] = DEFAULT_MODELS,
        clock: Clock = time.time,
        region: str = "us-east-1",
        account: str = "123456789012",
    ) -> None:
        self.behaviour = behaviour
        self.provider = provider
        self.prefix = prefix
        self.s3 = s3
        self.models = tuple(models)
        self.clock = clock
        self.cache = PromptCache(clock)
        self.region = region
        self.account = account
        self._lock = threading.Lock()
        self._jobs: dict[str, _Job] = {}
        self.vendor = Vendor(prefix)
        route = self.vendor.route
        route("POST", r"/runtime/model/(?P<model_id>[^/]+)/converse")(self.converse)
        route("POST", r"/runtime/model/(?P<model_id>[^/]+)/converse-stream")(self.converse_stream)
        route("POST", "/model-invocation-job")(self.create_job)
        route("GET", r"/model-invocation-job/(?P<job>[^/]+)")(self.get_job)
        route("POST", r"/model-invocation-job/(?P<job>[^/]+)/stop")(self.stop_job)
        route("GET", "/model-invocation-jobs")(self.list_jobs)
        route("GET", "/foundation-models")(self.list_models)
        route("GET", "/inference-profiles")(self.list_profiles)

    def runtime_url(self, base_url: str) -> str:
        """The bedrock-runtime endpoint URL on a server at `base_url`."""
        return f"{base_url.rstrip('/')}{self.prefix}/runtime"

    def control_url(self, base_url: str) -> str:
        """The bedrock (control plane) endpoint URL on a server at `base_url`."""
        return f"{base_url.rstrip('/')}{self.prefix}"

    # -- Converse ---------------------------------------------------------------------------
    def converse(self, request: Request) -> Reply:
        return self._converse(request, stream=False)

    def converse_stream(self, request: Request) -> Reply:
        return self._converse(request, stream=True)

    def _converse(self, request: Request, *, stream: bool) -> Reply:
        model = unquote(request.params["model_id"])
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "ValidationException", "The request body is not valid JSON.")
        invalid = self._invalid_model(model) or self._on_demand_refusal(model)
        if invalid:
            return error_reply(400, "ValidationException", invalid)
        if not isinstance(body, dict):
            return error_reply(400, "ValidationException", "The request body must be a JSON object.")
        violations = request_violations(
            "ConverseStream" if stream else "Converse", {"modelId": model, **body}
        )
        if violations:
            return validation_reply(violations)
        work = self.converse_work(model, body, stream=stream)
        marks = cache_points(body, work.messages)
        refused = _cache_point_refusal(model, body)
        if refused:
            return error_reply(400, "ValidationException", refused)
        fault = self.behaviour.fault(work)
        if fault is not None and fault.kind == "timeout":
            return Reply(200, {"content-type": EVENT_STREAM}, delay_headers=3600.0)
        if fault is not None and (refusal := fault_reply(fault)) is not None:
            return refusal
        answer = self.behaviour.answer(work)
        if marks is not None:
            tools = ((body.get("toolConfig") or {}).get("tools")) or []
            scope = f"{self.provider}\n{model}\n{digest('tools', tuple(tools)).hex()}"
            use = self.cache.marked(scope, marks, anthropic_minimum(model))
            answer = replace(answer, cache_read_tokens=use.read, cache_write_tokens=use.written)
        headers = {"x-amzn-RequestId": str(uuid.uuid4())}
        cached = marks is not None
        call = forced_call(body, answer)
        if not stream:
            self.behaviour.think()
            # (the text answer's call as before: tests wrap these methods with its signature)
            whole = self.converse_response(answer) if call is None else self.converse_response(answer, call)
            if cached:
                whole["usage"] = _usage(answer, cached=True)
            return Reply.json(200, whole, headers)
        reset = 2 if fault is not None and fault.kind == "reset" else None
        return Reply.stream(
            self._events(answer, cached=cached, call=call)
            if call is not None
            else (self._events(answer, cached=True) if cached else self._events(answer)),
            content_type=EVENT_STREAM,
            headers=headers,
            reset_after=reset,
        )

    def converse_work(self, model: str, body: Mapping[str, Any], *, stream: bool) -> Work:
        messages: list[dict[str, Any]] = []
        system = "\n\n".join(str(b.get("text")) for b in body.get("system") or [] if b.get("text"))
        if system:
            messages.append({"role": "system", "content": system})
        for message in body.get("messages") or []:
            messages.append(
                {"role": message.get("role"), "content": [_part(b) for b in message.get("content") or []]}
            )
        config = body.get("inferenceConfig") or {}
        return Work(
            self.provider,
            model,
            "chat",
            messages=tuple(messages),
            max_tokens=int(config.get("maxTokens") or 4096),
            stream=stream,
            stops=stop_sequences(config.get("stopSequences")),
        )

    def converse_response(self, answer: Answer, call: dict[str, Any] | None = None) -> dict[str, Any]:
        """A Converse answer: the text, or `call` (a forced tool call, `forced_call`)."""
        content = [{"toolUse": call}] if call is not None else [{"text": answer.content}]
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": "tool_use" if call is not None else _stop_reason(answer),
            "usage": _usage(answer),
            "metrics": {"latencyMs": int(self.behaviour.config.latency_seconds * 1000)},
        }

    def _events(
        self, answer: Answer, *, cached: bool = False, call: dict[str, Any] | None = None
    ) -> Iterator[tuple[float, bytes]]:
        """ConverseStream's events: the text as deltas, or a forced tool call (`call`) as
        Bedrock streams one, its toolUseId and name in contentBlockStart, its input JSON in a
        contentBlockDelta."""
        config = self.behaviour.config
        yield config.ttft_seconds, stream_event("messageStart", {"role": "assistant"})
        deltas = 1 if call is not None else len(answer.pieces)
        if call is not None:
            opened = {"toolUse": {"toolUseId": call["toolUseId"], "name": call["name"]}}
            yield 0.0, stream_event("contentBlockStart", {"start": opened, "contentBlockIndex": 0})
            delta = {"contentBlockIndex": 0, "delta": {"toolUse": {"input": json.dumps(call["input"])}}}
            yield config.inter_token_seconds, stream_event("contentBlockDelta", delta)
        for piece in answer.pieces if call is None else ():
            delta = {"contentBlockIndex": 0, "delta": {"text": piece}}
            yield config.inter_token_seconds, stream_event("contentBlockDelta", delta)
        yield 0.0, stream_event("contentBlockStop", {"contentBlockIndex": 0})
        stop = "tool_use" if call is not None else _stop_reason(answer)
        yield 0.0, stream_event("messageStop", {"stopReason": stop})
        latency = int((config.ttft_seconds + config.inter_token_seconds * deltas) * 1000)
        yield (
            0.0,
            stream_event(
                "metadata", {"usage": _usage(answer, cached=cached), "metrics": {"latencyMs": latency}}
            ),
        )

    def _invalid_model(self, model: str) -> str | None:
        """A model none of the emulated ones is (a geography prefix looked through, on both)."""
        if self.models and _GEO.sub("", model) not in {_GEO.sub("", m) for m in self.models}:
            return "The provided model identifier is invalid."
        return None

    def _on_demand_refusal(self, model: str) -> str | None:
        """AWS's refusal of an on-demand call on a bare model id (or its foundation-model ARN)
        that the emulated region serves only through an inference profile (PROFILE_ONLY)."""
        name = (
            model.rsplit("/", 1)[-1] if model.startswith("arn:") and ":foundation-model/" in model else model
        )
        if name in PROFILE_ONLY.get(self.region, frozenset()):
            return ON_DEMAND_UNSUPPORTED.format(model=model)
        return None

    # -- the control plane ------------------------------------------------------------------
    def list_models(self, request: Request) -> Reply:
        if self.provider in self.behaviour.config.providers_down:
            return Reply.dropped()
        wanted = (request.query.get("byProvider") or "").lower()
        summaries = [self._summary(m) for m in dict.fromkeys(_GEO.sub("", m) for m in self.models)]
        if wanted:
            summaries = [s for s in summaries if str(s["providerName"]).lower() == wanted]
        return Reply.json(200, {"modelSummaries": summaries})

    def _summary(self, model: str) -> dict[str, Any]:
        owner, _, name = model.partition(".")
        return {
            "modelArn": f"arn:aws:bedrock:{self.region}::foundation-model/{model}",
            "modelId": model,
            "modelName": name.split(":")[0][:20],
            "providerName": _PROVIDER_NAMES.get(owner, owner.capitalize()),
            "inputModalities": ["TEXT", "IMAGE"] if owner == "anthropic" else ["TEXT"],
            "outputModalities": ["TEXT"],
            "responseStreamingSupported": True,
            "customizationsSupported": [],
            "inferenceTypesSupported": ["ON_DEMAND"],
            "modelLifecycle": {"status": "ACTIVE"},
        }

    def list_profiles(self, request: Request) -> Reply:
        """ListInferenceProfiles: the region's system-defined profiles (`profile_ids`), a page."""
        if self.provider in self.behaviour.config.providers_down:
            return Reply.dropped()
        try:
            start = int(request.query.get("nextToken") or 0)
            size = int(request.query.get("maxResults") or PROFILE_PAGE)
        except ValueError:
            return error_reply(400, "ValidationException", "The provided pagination token is invalid.")
        if start < 0 or not 1 <= size <= 1000:
            return error_reply(400, "ValidationException", "The provided pagination token is invalid.")
        listed = self.profile_ids() if request.query.get("type", "SYSTEM_DEFINED") == "SYSTEM_DEFINED" else []
        page: dict[str, Any] = {
            "inferenceProfileSummaries": [self._profile(p) for p in listed[start : start + size]]
        }
        if start + size < len(listed):
            page["nextToken"] = str(start + size)
        return Reply.json(200, page)

    def profile_ids(self) -> list[str]:
        """The US cross-region inference profiles of the emulated region, sorted: each
        configured `us.` model, and `us.` + each PROFILE_ONLY model of the region it serves."""
        configured = {m for m in self.models if m.startswith(US_PROFILE)}
        required = {
            US_PROFILE + m
            for m in PROFILE_ONLY.get(self.region, frozenset())
            if self._invalid_model(m) is None
        }
        return sorted(configured | required)

    def _profile(self, profile_id: str) -> dict[str, Any]:
        """A profile in botocore's InferenceProfileSummary shape (its required members)."""
        model = profile_id.removeprefix(US_PROFILE)
        owner, _, name = model.partition(".")
        provider = _PROVIDER_NAMES.get(owner, owner.capitalize())
        words = re.sub(r"[^0-9a-zA-Z]+", " ", f"{provider} {name}").split()
        arn = f"arn:aws:bedrock:{self.region}:{self.account}:inference-profile/{profile_id}"
        return {
            "inferenceProfileName": " ".join(["US", *words])[:64].rstrip(),
            "inferenceProfileArn": arn,
            "models": [
                {"modelArn": f"arn:aws:bedrock:{r}::foundation-model/{model}"} for r in US_PROFILE_REGIONS
            ],
            "inferenceProfileId": profile_id,
            "status": "ACTIVE",
            "type": "SYSTEM_DEFINED",
        }

    def create_job(self, request: Request) -> Reply:
        if self.provider in self.behaviour.config.providers_down:
            return Reply.dropped()
        try:
            body = request.json()
        except ValueError:
            return error_reply(400, "ValidationException", "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return error_reply(400, "ValidationException", "The request body must be a JSON object.")
        violations = request_violations("CreateModelInvocationJob", body)
        if violations:
            return validation_reply(violations)
        invalid = self._invalid_model(str(body.get("modelId")))
        if invalid:
            return error_reply(400, "ValidationException", invalid)
        token = body.get("clientRequestToken")
        with self._lock:
            for job in self._jobs.values():
                if token and job.token == token:
                    return Reply.json(200, {"jobArn": job.arn})  # an idempotent retry
                if job.name == body["jobName"]:
                    return error_reply(409, "ConflictException", f"A job named {job.name} already exists.")
        ident = uuid.uuid4().hex[:12]
        source = str(body["inputDataConfig"]["s3InputDataConfig"]["s3Uri"])
        job = _Job(
            id=ident,
            arn=f"arn:aws:bedrock:{self.region}:{self.account}:model-invocation-job/{ident}",
            name=str(body["jobName"]),
            model=str(body["modelId"]),
            role_arn=str(body["roleArn"]),
            token=str(token) if token else None,
            input_uri=source,
            output=dict(body["outputDataConfig"]["s3OutputDataConfig"]),
            timeout_hours=int(body.get("timeoutDurationInHours") or 24),
            invocation_type=body.get("modelInvocationType"),
            submitted=self.clock(),
            inputs=[],
        )
        try:
            job.inputs = self._read_inputs(source)
        except Exception as exc:  # a missing object or bucket (botocore's ClientError), bad JSON
            job.status, job.ended, job.message = "Failed", job.submitted, f"Could not read the input: {exc}"
        if self._finds_down(job):
            return Reply.dropped()  # the provider is down: the job is never made
        job.counts["total"] = sum(i.count for i in job.inputs)
        with self._lock:
            self._jobs[job.id] = job
        return Reply.json(200, {"jobArn": job.arn})

    def get_job(self, request: Request) -> Reply:
        job, refusal = self._find(request)
        if job is None:
            return refusal
        self._advance(job)
        return Reply.json(200, self._description(job))

    def stop_job(self, request: Request) -> Reply:
        job, refusal = self._find(request)
        if job is None:
            return refusal
        self._advance(job)
        with self._lock:
            if job.finished or job.status == "Stopping":
                return error_reply(
                    400, "ValidationException", f"The job is {job.status} and cannot be stopped."
                )
            job.status, job.stop_requested = "Stopping", self.clock()
        return Reply.json(200, {})

    def list_jobs(self, request: Request) -> Reply:
        """ListModelInvocationJobs: the jobs that match every filter given, by submit time
        (newest first unless `sortOrder=Ascending`), `maxResults` a page (AWS documents no
        default: all, up to 1000, here); `nextToken` the offset of the next page."""
        query, violations = _list_query(request.query)
        violations += request_violations("ListModelInvocationJobs", query)
        offset = _page_offset(query.get("nextToken"))
        if offset is None:
            violations.append("$.nextToken: not a token this service gave")
        if violations or offset is None:
            return validation_reply(violations)
        with self._lock:
            known = list(self._jobs.values())
        for job in known:
            self._advance(job)
        jobs = [job for job in known if _listed(job, query)]
        jobs.sort(key=lambda job: job.submitted, reverse=query.get("sortOrder") != "Ascending")
        size = int(query.get("maxResults") or 1000)
        page = jobs[offset : offset + size]
        answer: dict[str, Any] = {"invocationJobSummaries": [self._description(job) for job in page]}
        if offset + size < len(jobs):
            answer["nextToken"] = f"offset-{offset + size}"
        return Reply.json(200, answer)

    def _find(self, request: Request) -> tuple[_Job | None, Reply]:
        identifier = unquote(request.params["job"])
        found = _JOB_ID.fullmatch(identifier)
        if found is None:
            return None, error_reply(400, "ValidationException", f"{identifier} is not a job identifier.")
        job = self._jobs.get(found.group(1))
        if job is None:
            return None, error_reply(404, "ResourceNotFoundException", "The specified job was not found.")
        return job, Reply()

    def _read_inputs(self, uri: str) -> list[_Output]:
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        if key.endswith(".jsonl"):
            keys = [key]
        else:
            listed = self.s3.list_objects_v2(Bucket=bucket, Prefix=key)
            keys = sorted(o["Key"] for o in listed.get("Contents") or [] if o["Key"].endswith(".jsonl"))
        inputs = []
        for name in keys:
            count = sum(1 for _ in self._records(bucket, name))  # checks every line now
            inputs.append(_Output(bucket, name, count))
        if not inputs:
            raise ValueError(f"no .jsonl file at {uri}")
        return inputs

    def _finds_down(self, job: _Job) -> bool:
        """Whether a record of the job's input finds this provider down (`Behaviour.down`):
        only the lines that carry a down marker are read as requests."""
        for found in job.inputs:
            body = self.s3.get_object(Bucket=found.bucket, Key=found.key)["Body"]
            for raw in body.iter_lines():
                if DOWN_MARK in raw:
                    work, _ = self._record_work(job, json.loads(raw).get("modelInput"))
                    if work is not None and self.behaviour.down(work):
                        return True
        return False

    def _records(self, bucket: str, key: str) -> Iterator[dict[str, Any]]:
        """The input file's records, one line at a time."""
        body = self.s3.get_object(Bucket=bucket, Key=key)["Body"]
        for raw in body.iter_lines():
            if not raw.strip():
                continue
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise ValueError(f"{key} has a line that is not a JSON object")
            yield record

    def _advance(self, job: _Job) -> None:
        """Run the job as far as the clock says: done once the batch time has passed."""
        with self._lock:
            if job.finished:
                return
            if job.stop_requested is not None:
                if self.clock() - job.stop_requested >= STOP_SECONDS:
                    job.status, job.ended = "Stopped", job.stop_requested + STOP_SECONDS
                return
            elapsed = self.clock() - job.submitted
            duration = self.behaviour.config.batch_seconds
            total = job.counts["total"]
            if elapsed < duration:
                job.status = "InProgress" if elapsed > 0 else "Submitted"
                job.counts["processed"] = int(total * elapsed / duration)
                return
            bucket, _, prefix = str(job.output["s3Uri"]).removeprefix("s3://").partition("/")
            folder = "/".join(p for p in (prefix.strip("/"), job.id) if p)
            expired = False
            tokens = [0, 0]
            counts = {"total": total, "processed": 0, "success": 0, "error": 0}
            for source in job.inputs:
                lines: list[bytes] = []
                for record in self._records(source.bucket, source.key):
                    row = self._run_record(job, record, tokens)
                    if row is None:
                        expired = True
                        continue
                    lines.append(row[1])
                    counts["processed"] += 1
                    counts["success" if row[0] == "ok" else "error"] += 1
                name = source.key.rsplit("/", 1)[-1]
                self.s3.put_object(Bucket=bucket, Key=f"{folder}/{name}.out", Body=b"".join(lines))
            manifest = {
                "totalRecordCount": counts["total"],
                "processedRecordCount": counts["processed"],
                "successRecordCount": counts["success"],
                "errorRecordCount": counts["error"],
                "inputTokenCount": tokens[0],
                "outputTokenCount": tokens[1],
            }
            self.s3.put_object(
                Bucket=bucket, Key=f"{folder}/manifest.json.out", Body=json.dumps(manifest).encode()
            )
            job.counts = counts
            job.status = "Expired" if expired else "Completed"
            job.ended = job.submitted + duration
            if expired:
                job.message = "The job reached its time limit before every record was processed."

    def _run_record(
        self, job: _Job, record: Mapping[str, Any], tokens: list[int]
    ) -> tuple[str, bytes] | None:
        """One record's `.out` line (ok or error); None when the job expires before it."""
        record_id = str(record.get("recordId") or uuid.uuid4().hex[:11].upper())
        model_input = record.get("modelInput")
        head = {"recordId": record_id, "modelInput": model_input}
        work, invalid = self._record_work(job, model_input)
        if work is None:
            return "error", _line({**head, "error": {"errorCode": 400, "errorMessage": invalid}})
        fault = self.behaviour.fault(work, in_batch=True)
        if fault is not None and fault.kind == "expire":
            return None
        if fault is not None and fault.kind == "malformed":
            return "ok", b'{"recordId": ' + json.dumps(record_id).encode() + b', "modelOutp\n'
        if fault is not None and fault.kind in (
            "fail",
            "transient",
            "rate_limited",
            "overloaded",
            "down",
            "5xx",
        ):
            error = {"errorCode": _FAULT_STATUS.get(fault.kind, 500), "errorMessage": fault.message}
            return "error", _line({**head, "error": error})
        answer = self.behaviour.answer(work)
        tokens[0] += answer.prompt_tokens
        tokens[1] += answer.completion_tokens
        claude = model_family(job.model) == "anthropic"
        output = _anthropic_output(job.model, answer) if claude else _llama_output(answer)
        return "ok", _line({**head, "modelOutput": output})

    def _record_work(self, job: _Job, body: object) -> tuple[Work | None, str]:
        """The request of a record's native body, or why Bedrock would refuse it (the
        body the job's model takes: contracts/bedrock.py)."""
        family = model_family(job.model)
        if family not in ("anthropic", "meta"):
            return None, f"Malformed input request: batch inference does not run {job.model} here."
        violations = request_violations(f"batch_record:{family}", body)
        if violations or not isinstance(body, Mapping):
            return (
                None,
                f"Malformed input request: {'; '.join(violations)}; please reformat your input and try again."
                if violations
                else "Malformed input request: modelInput must be an object.",
            )
        if family == "anthropic":
            messages: list[Mapping[str, Any]] = []
            if body.get("system"):
                messages.append({"role": "system", "content": body["system"]})
            messages.extend(m for m in body["messages"] if isinstance(m, Mapping))
            return Work(
                self.provider,
                job.model,
                "chat",
                messages=tuple(messages),
                max_tokens=body["max_tokens"],
                stops=stop_sequences(body.get("stop_sequences")),
            ), ""
        prompt = ({"role": "user", "content": body["prompt"]},)
        limit = int(body.get("max_gen_len", 512))
        return Work(self.provider, job.model, "chat", messages=prompt, max_tokens=limit), ""

    def _description(self, job: _Job) -> dict[str, Any]:
        """GetModelInvocationJob's answer."""
        answer: dict[str, Any] = {
            "jobArn": job.arn,
            "jobName": job.name,
            "modelId": job.model,
            "roleArn": job.role_arn,
            "status": job.status,
            "submitTime": _iso(job.submitted),
            "lastModifiedTime": _iso(job.ended if job.ended is not None else self.clock()),
            "inputDataConfig": {"s3InputDataConfig": {"s3InputFormat": "JSONL", "s3Uri": job.input_uri}},
            "outputDataConfig": {"s3OutputDataConfig": job.output},
            "timeoutDurationInHours": job.timeout_hours,
            "jobExpirationTime": _iso(job.submitted + job.timeout_hours * 3600),
            "totalRecordCount": job.counts["total"],
            "processedRecordCount": job.counts["processed"],
            "successRecordCount": job.counts["success"],
            "errorRecordCount": job.counts["error"],
        }
        if job.token:
            answer["clientRequestToken"] = job.token
        if job.invocation_type:
            answer["modelInvocationType"] = job.invocation_type
        if job.message:
            answer["message"] = job.message
        if job.ended is not None:
            answer["endTime"] = _iso(job.ended)
        return answer


def _list_query(raw: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """ListModelInvocationJobs' query string as the request's typed parameters (botocore's
    model: `maxResults` an integer, the submit times ISO 8601 timestamps)."""
    query: dict[str, Any] = dict(raw)
    violations: list[str] = []
    if "maxResults" in query:
        if not str(query["maxResults"]).isdecimal():
            violations.append("$.maxResults: should be an integer")
            del query["maxResults"]
        else:
            query["maxResults"] = int(query["maxResults"])
    for name in ("submitTimeAfter", "submitTimeBefore"):
        if name in query:
            try:
                query[name] = datetime.fromisoformat(str(query[name]).replace("Z", "+00:00"))
            except ValueError:
                violations.append(f"$.{name}: should be an ISO 8601 timestamp")
                del query[name]
    return query, violations


def _page_offset(token: str | None) -> int | None:
    if token is None:
        return 0
    found = re.fullmatch(r"offset-(\d+)", token)
    return int(found.group(1)) if found else None


def _listed(job: _Job, query: Mapping[str, Any]) -> bool:
    after, before = query.get("submitTimeAfter"), query.get("submitTimeBefore")
    return (
        str(query.get("nameContains", "")) in job.name
        and query.get("statusEquals", job.status) == job.status
        and (after is None or job.submitted > after.timestamp())
        and (before is None or job.submitted < before.timestamp())
    )


def forced_call(body: Mapping[str, Any], answer: Answer) -> dict[str, Any] | None:
    """The `toolUse` of the call a Converse body forces: `toolConfig.toolChoice` `{any: {}}`
    calls its first tool, `{tool: {name}}` that tool (if declared), with input valid under its
    `inputSchema`; None
    otherwise (`{auto: {}}` or no toolChoice: text)."""
    config = body.get("toolConfig")
    if not isinstance(config, Mapping):
        return None
    choice = config.get("toolChoice")
    schemas = {
        str(spec.get("name")): (spec.get("inputSchema") or {}).get("json")
        for tool in config.get("tools") or []
        if isinstance(tool, Mapping) and isinstance(spec := tool.get("toolSpec"), Mapping)
    }
    names = list(schemas)
    name: str | None = None
    if isinstance(choice, Mapping) and "any" in choice and names:
        name = names[0]
    elif isinstance(choice, Mapping) and isinstance(chosen := choice.get("tool"), Mapping):
        name = str(chosen.get("name")) if chosen.get("name") in names else None
    if name is None:
        return None
    return {"toolUseId": f"tooluse_{answer.ident[:22]}", "name": name, "input": call_arguments(schemas[name])}


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    """A Converse content block in the OpenAI-like form behaviour.py reads."""
    if "text" in block:
        return {"type": "text", "text": block["text"]}
    if "image" in block:
        return {"type": "image", "format": (block.get("image") or {}).get("format")}
    if "toolUse" in block:
        use = block["toolUse"]
        return {"type": "tool_use", "name": use.get("name"), "input": use.get("input")}
    if "toolResult" in block:
        return {"type": "tool_result", "content": block["toolResult"].get("content")}
    return {"type": next(iter(block), "unknown")}


def _anthropic_output(model: str, answer: Answer) -> dict[str, Any]:
    """An Anthropic `message`, as InvokeModel answers for Claude on Bedrock."""
    return {
        "id": f"msg_bdrk_{answer.ident}",
        "type": "message",
        "role": "assistant",
        "model": _GEO.sub("", model).removeprefix("anthropic.").rsplit("-v", 1)[0],
        "content": [{"type": "text", "text": answer.content}],
        "stop_reason": _stop_reason(answer),
        "stop_sequence": answer.stop_sequence,
        "usage": {"input_tokens": answer.prompt_tokens, "output_tokens": answer.completion_tokens},
    }


def _llama_output(answer: Answer) -> dict[str, Any]:
    """Llama's InvokeModel answer."""
    return {
        "generation": answer.content,
        "prompt_token_count": answer.prompt_tokens,
        "generation_token_count": answer.completion_tokens,
        "stop_reason": answer.finish,
    }


def _stop_reason(answer: Answer) -> str:
    if answer.stop_sequence:
        return "stop_sequence"
    return "max_tokens" if answer.finish == "length" else "end_turn"


def _usage(answer: Answer, *, cached: bool = False) -> dict[str, int]:
    """Converse's usage; `cached` (the request sent cache points): its cache reads and writes
    too, `inputTokens` then only what neither read nor wrote."""
    if cached:
        return {
            "inputTokens": answer.prompt_tokens - answer.cache_read_tokens - answer.cache_write_tokens,
            "outputTokens": answer.completion_tokens,
            "totalTokens": answer.prompt_tokens + answer.completion_tokens,
            "cacheReadInputTokens": answer.cache_read_tokens,
            "cacheWriteInputTokens": answer.cache_write_tokens,
        }
    return {
        "inputTokens": answer.prompt_tokens,
        "outputTokens": answer.completion_tokens,
        "totalTokens": answer.prompt_tokens + answer.completion_tokens,
    }


def cache_points(body: Mapping[str, Any], turns: tuple[Mapping[str, Any], ...]) -> list[Breakpoint] | None:
    """The prefixes a Converse body's `cachePoint` blocks end (`turns`: its system prompt
    and messages as `converse_work` has them), each with its ttl; None without cache points.
    A cache point among the tools makes them part of every prefix's key and counts no
    tokens of its own, as the emulator's input tokens count none of the tools."""
    tools = (body.get("toolConfig") or {}).get("tools") or []
    system = body.get("system") or []
    found = any("cachePoint" in block for block in [*tools, *system])
    marks: list[Breakpoint] = []
    for cut, block in enumerate(system):
        if "cachePoint" in block:
            text = "\n\n".join(str(b.get("text")) for b in system[:cut] if b.get("text"))
            if text:
                marks.append(Breakpoint(({"role": "system", "content": text},), _ttl(block["cachePoint"])))
    offset = 1 if turns and turns[0].get("role") == "system" else 0
    for index, message in enumerate(body.get("messages") or []):
        for cut, block in enumerate(message.get("content") or []):
            if "cachePoint" in block:
                found = True
                turn = turns[offset + index]
                prefix = (*turns[: offset + index], {**turn, "content": turn["content"][: cut + 1]})
                marks.append(Breakpoint(prefix, _ttl(block["cachePoint"])))
    return marks if found else None


def _ttl(point: Mapping[str, Any]) -> float:
    return CACHE_TTLS[str(point.get("ttl", "5m"))]


def _cache_point_refusal(model: str, body: Mapping[str, Any]) -> str | None:
    """Bedrock's refusal of cache points: on a model without prompt caching (here, every
    model but Claude), or more than four checkpoints."""
    blocks = [
        *((body.get("toolConfig") or {}).get("tools") or []),
        *(body.get("system") or []),
        *(block for message in body.get("messages") or [] for block in message.get("content") or []),
    ]
    count = sum(1 for block in blocks if "cachePoint" in block)
    if count and model_family(model) != "anthropic":
        return (
            "You invoked an unsupported model or your request did not allow prompt caching."
            " See the documentation for more information."
        )
    if count > MAX_CACHE_BREAKPOINTS:
        return f"A maximum of {MAX_CACHE_BREAKPOINTS} cache checkpoints may be provided. Found {count}."
    return None


def _line(row: Mapping[str, Any]) -> bytes:
    return (json.dumps(row) + "\n").encode()
