"""An emulator of OpenAI's API, and of every host that speaks it (docs/emulators.md).

Routes (under the vendor's prefix, e.g. `/openai`, `/hosts/groq`):

- `POST /v1/chat/completions`: a `chat.completion` (cut before the first `stop` sequence it
  would contain, as OpenAI does: behaviour.py `cut_at_stop`), or with `stream: true` server-sent
  `chat.completion.chunk` events, the usage chunk when `stream_options.include_usage`, then
  `data: [DONE]`; a body whose `tool_choice` forces a function call (`required`, or a named
  function) gets that call (`forced_call`: arguments valid under its `parameters`, `content`
  null, finish_reason `tool_calls`), streamed as OpenAI streams one (`delta.tool_calls`: id,
  type and name in the first chunk, then the arguments);
- (OpenAI itself; a compatible host's instance has `responses_api=False`) `POST /v1/responses`: a `response`
  (openai_responses.py), or with `stream: true` its server-sent events;
- `POST /v1/embeddings`: a `list` of `embedding` objects;
- `GET /v1/models`: the models this vendor serves;
- (with `batch=True`) the Files and Batch APIs: `POST /v1/files` (multipart, purpose
  `batch`), `GET /v1/files/{id}`, `GET /v1/files/{id}/content`, `DELETE /v1/files/{id}`,
  `POST /v1/batches`, `GET /v1/batches` (newest first; `limit` 1-100, default 20, `after` a
  batch id: an id it does not know lists nothing), `GET /v1/batches/{id}`,
  `POST /v1/batches/{id}/cancel`; a batch keeps the `metadata` it was made with.

Every request body is checked against OpenAI's OpenAPI document, the same check the adapter's
tests use (batchroute_tools/contracts/openai.py): a body the vendor would refuse gets OpenAI's
400 `invalid_request_error` naming the `param`. Then its model, when the emulator is given the
models it serves (`models`; none: any name is served), as OpenAI answers it (`model_refusal`):

- a model it does not serve: Chat Completions and Embeddings 404 `model_not_found` ("The
  model `<m>` does not exist or you do not have access to it.", `param` null), the Responses
  API 400 `model_not_found` ("The requested model '<m>' does not exist.", `param` "model");
- a chat model sent to `/v1/embeddings` (one not in `embedding_models`): 403 "You are not
  allowed to generate embeddings from this model";
- `dimensions` for a model that cannot shorten its vectors (OpenAI: "Only supported in
  text-embedding-3 and later models"; `takes_dimensions`), whatever `models` says: 400 "This
  model does not support specifying dimensions."; and more `dimensions` than the model's
  vectors have (OpenAI's embeddings guide: 1536 for text-embedding-3-small, 3072 for
  text-embedding-3-large; `VECTOR_SIZES`): 400 `invalid_value` naming `dimensions` (the
  guide gives the sizes, not the wording, which is modelled).

Groq (provider `groq`) refuses the OpenAI fields its compatibility page lists as "currently
not supported and will result in a 400 error" when supplied (`GROQ_UNSUPPORTED`: `logprobs`,
`logit_bias`, `top_logprobs`, a message's `name`, `n` other than 1): 400
`invalid_request_error` naming the field (`host_refusal`; the wording is modelled).

OpenAI itself (provider `openai`, not the compatible hosts) refuses an embeddings request
whose inputs sum past 300,000 tokens (`REQUEST_TOKEN_LIMIT`, its OpenAPI document's
CreateEmbeddingRequest.input), counted as the answer's `usage` counts them: 400 "Requested
<n> tokens, max 300000 tokens per request", type and code `max_tokens_per_request`, `param`
null, as OpenAI answers it (`refusal`; a batch line gets it in the error file).

Embeddings read `input` as OpenAI does: a string is one input, an array of token ids too; an
array of strings or of token arrays is one input each. A vector has `dimensions` floats when
the body asks (16 otherwise, behaviour.py).

A batch input file is checked when the batch is created: a line that is not a request line of
the batch's endpoint (not JSON, no `custom_id`, a repeated one, another `url`) fails the whole
batch (`failed`, with `errors`); a line whose body is invalid, or whose model is refused, gets
the answer its request would get alone (the 400, 403 or 404) in the error file, as OpenAI does.

Answers follow OpenAI's document: required fields always (null where it allows), optional
ones left out when there is nothing to say; tests parse every answer with the official
SDK's types (`openai.types`), so the emulator cannot drift from them. Answers, usage and faults
come from `behaviour.py`. A batch job stays `in_progress` for the configured time (by the
injected clock), its completed count growing, then writes its output and error files (a
create whose input holds a request that finds the provider down, `[simulate:down]`, is
dropped unanswered, as the provider's every request is: the lane fails over); a cancelled
job is `cancelling` until the clock moves on, then `cancelled`. A chat prompt's prefix seen
within OpenAI's cache lifetime is reported in `cached_tokens` (cache.py; not for a host built
with `prompt_cache=None`).
Files live on disk (`spool.py`), not in memory: a job keeps the path of its input file and
reads it line by line when it runs, writing its output and error lines to files as it goes.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any, Final

import batchroute_tools.emulators.openai_responses as openai_responses
from batchroute_tools.contracts.openai import BATCH_URLS, Violation, line_shape_violations, violations
from batchroute_tools.emulators.behaviour import (
    DOWN_MARK,
    Answer,
    Behaviour,
    Fault,
    Work,
    call_arguments,
    prompt_tokens,
    stop_sequences,
)
from batchroute_tools.emulators.cache import OPENAI_CACHE, CacheRule, PromptCache
from batchroute_tools.emulators.server import Reply, Request, Vendor, sse
from batchroute_tools.emulators.spool import Spool

Clock = Callable[[], float]  # seconds since the epoch


CHAT_URL = "/v1/chat/completions"
RESPONSES_URL = "/v1/responses"
EMBEDDINGS_URL = "/v1/embeddings"
# OpenAI's `dimensions`: "Only supported in text-embedding-3 and later models".
_SHORTENING_MODEL = re.compile(r"text-embedding-(\d+)(?!\d)")
# The vector sizes OpenAI's embeddings guide gives: "By default, the length of the embedding
# vector is 1536 for text-embedding-3-small or 3072 for text-embedding-3-large."
VECTOR_SIZES: Final = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}
# OpenAI's CreateEmbeddingRequest.input: "all embedding models enforce a maximum of 300,000
# tokens summed across all inputs in a single request". OpenAI's own (provider `openai`); the
# compatible hosts document no such limit.
REQUEST_TOKEN_LIMIT: Final = 300_000
# What Groq's OpenAI compatibility page lists as not supported ("will result in a 400 error"
# if supplied), besides a message's `name` and `n` other than 1 (module doc).
GROQ_UNSUPPORTED: Final = ("logprobs", "logit_bias", "top_logprobs")
# A model named like an embedding model (when `embedding_models` is not given).
_EMBEDDING_NAME = re.compile(r"embed|bge", re.IGNORECASE)


def takes_dimensions(model: str) -> bool:
    """Whether OpenAI's embeddings take `dimensions` for `model`: text-embedding-3 and later
    (not text-embedding-ada-002, nor a host's model such as BAAI/bge-large-en-v1.5)."""
    found = _SHORTENING_MODEL.match(model)
    return found is not None and int(found.group(1)) >= 3


def _oversized_dimensions(model: str, dimensions: object) -> tuple[int, dict[str, Any]] | None:
    """OpenAI's 400 for more `dimensions` than `model`'s vectors have (VECTOR_SIZES)."""
    size = VECTOR_SIZES.get(model)
    if size is None or not isinstance(dimensions, int) or dimensions <= size:
        return None
    message = f"Invalid value for 'dimensions': {model} makes vectors of at most {size} dimensions."
    return 400, error_body(message, kind=INVALID, code="invalid_value", param="dimensions")


def _over_request_tokens(work: Work, limit: int | None) -> tuple[int, dict[str, Any]] | None:
    """OpenAI's 400 for an embeddings request whose inputs' tokens sum past `limit` (counted
    as its `usage` counts them, `Work.input_tokens`); None without a limit."""
    if limit is None or work.input_tokens <= limit:
        return None
    message = f"Requested {work.input_tokens} tokens, max {limit} tokens per request"
    return 400, error_body(message, kind="max_tokens_per_request", code="max_tokens_per_request")


def embedding_inputs(value: object) -> tuple[str, ...]:
    """An embeddings body's `input` as OpenAI reads it, one text per input: a string is one
    input, and so is an array of token ids ("the array of integers that will be turned into an
    embedding"); an array of strings or of token arrays is one input each (token ids as JSON)."""
    if isinstance(value, list) and value and not all(_token_id(v) for v in value):
        return tuple(v if isinstance(v, str) else json.dumps(v) for v in value)
    return (value if isinstance(value, str) else json.dumps(value),)


def given_tokens(value: object) -> int | None:
    """An embeddings `input` given as token ids (one array, or an array of them): its tokens,
    one an id, as OpenAI counts them; None for text."""
    if isinstance(value, list) and value and all(_token_id(v) for v in value):
        return len(value)
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        return sum(len(v) for v in value)
    return None


def _token_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


INVALID: Final = "invalid_request_error"


def forced_call(body: Mapping[str, Any], answer: Answer) -> dict[str, Any] | None:
    """The function call a chat body forces (`tool_choice` `required`: its first function;
    or a named function it declares), as the model makes it: arguments valid under the
    function's parameters (`call_arguments`); None otherwise (`auto` and no tool_choice are
    answered with text, as a model may)."""
    schemas = {
        str((tool.get("function") or {}).get("name")): (tool.get("function") or {}).get("parameters")
        for tool in body.get("tools") or []
        if isinstance(tool, Mapping) and tool.get("type") == "function"
    }
    names = list(schemas)
    choice = body.get("tool_choice")
    if not names or choice is None or choice in ("auto", "none"):
        return None
    name = names[0] if choice == "required" else None
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        named = str((choice.get("function") or {}).get("name"))
        name = named if named in names else None
    if name is None:
        return None
    return {
        "id": f"call_{answer.ident[:24]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(call_arguments(schemas[name]))},
    }


def answered_with_call(body: Mapping[str, Any], answer: Answer) -> tuple[Answer, dict[str, Any] | None]:
    """The answer to a chat completion and the call a `tool_choice` forces, if any: then
    no text, finish `tool_calls`."""
    call = forced_call(body, answer)
    return (answer if call is None else replace(answer, pieces=(), finish="tool_calls")), call


def error_body(
    message: str, *, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_reply(
    status: int,
    message: str,
    *,
    kind: str,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    return Reply.json(status, error_body(message, kind=kind, code=code, param=param), headers)


def invalid_body(found: Violation) -> dict[str, Any]:
    """OpenAI's answer to a body its document refuses: the first violation."""
    message = f"Invalid request: {found.reason}" + (f" (at '{found.param}')" if found.param else "")
    return error_body(message, kind="invalid_request_error", code=found.code, param=found.param or None)


def invalid_reply(found: Violation) -> Reply:
    return Reply.json(400, invalid_body(found))


UNPARSED_BODY: Final = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
    "your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not "
    "valid JSON.)"
)


def parsed_body(request: Request) -> Any | Reply:
    """The request's JSON body, or OpenAI's 400 for one that is not JSON (never a 500)."""
    try:
        return request.json()
    except ValueError:  # json.JSONDecodeError, UnicodeDecodeError
        return error_reply(400, UNPARSED_BODY, kind="invalid_request_error")


def _answer_schema(fmt: object, holder: object) -> Mapping[str, Any] | None:
    """The schema a structured-output format asks the answer to keep to (`holder` holds it:
    the format itself on the Responses API, its `json_schema` on Chat Completions); {} for
    JSON mode; None for text."""
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if kind == "json_object":
        return {}
    schema = holder.get("schema") if isinstance(holder, Mapping) else None
    return schema if kind == "json_schema" and isinstance(schema, Mapping) else None


def _base64_floats(vector: Sequence[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _expired_row(custom_id: object) -> bytes:
    """The error file's row of a request the job did not run before its window ended."""
    row = {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": custom_id,
        "response": None,
        "error": {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        },
    }
    return (json.dumps(row) + "\n").encode()


def fault_reply(fault: Fault) -> Reply | None:
    """The HTTP answer of a fault, as OpenAI gives it; None for faults met later (a stream's)."""
    if fault.kind == "down":
        return Reply.dropped()
    if fault.kind == "fail":
        return error_reply(400, fault.message, kind="invalid_request_error", code="simulated_failure")
    if fault.kind in ("transient", "5xx"):
        return error_reply(500, fault.message, kind="server_error", code="server_error")
    if fault.kind == "rate_limited":
        return error_reply(
            429,
            fault.message,
            kind="requests",
            code="rate_limit_exceeded",
            headers={"retry-after-ms": "200", "retry-after": "1"},
        )
    if fault.kind == "overloaded":
        return error_reply(503, fault.message, kind="server_error", code="overloaded")
    return None


@dataclass
class _File:
    id: str
    purpose: str
    filename: str
    path: Path  # the content, on disk
    size: int
    created_at: int


@dataclass
class _Job:
    id: str
    endpoint: str
    input_file_id: str
    created_at: float
    input_path: Path  # the job's own name for its input file (removed when the job ends)
    cancelling_at: float | None = None
    cancelled_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    finished: str | None = None  # completed | expired | cancelled | failed
    errors: list[dict[str, Any]] = field(default_factory=list)  # a failed job's BatchErrors
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    stuck: bool = False  # holds [simulate:stuck_batch]: in_progress at 40 % until cancelled
    metadata: dict[str, str] | None = None


# `GET /v1/batches`: "Limit can range between 1 and 100, and the default is 20." (OpenAI's
# OpenAPI document, listBatches).
LIST_LIMIT_DEFAULT: Final = 20
LIST_LIMIT_MAX: Final = 100

# A batch job holding this stays in_progress with the configured share of its requests done
# (`simulated_stuck_batch_percent`, 40 by default) until it is cancelled: a late vendor, for
# the deadline rescue (docs/batches.md).
STUCK_MARKER = b"[simulate:stuck_batch]"


class OpenAIEmulator:
    def __init__(
        self,
        behaviour: Behaviour,
        *,
        provider: str,
        prefix: str,
        models: tuple[str, ...] = (),
        embedding_models: tuple[str, ...] | None = None,
        windows: Mapping[str, int] | None = None,
        vllm: bool = False,
        batch: bool = True,
        responses_api: bool = True,
        clock: Clock = time.time,
        prompt_cache: CacheRule | None = OPENAI_CACHE,
    ) -> None:
        self.behaviour = behaviour
        self.provider = provider
        self.models = models  # () serves any model name
        # the models of `models` that embed (the others chat); None: those named so
        self.embedding_models = (
            tuple(m for m in models if _EMBEDDING_NAME.search(m))
            if embedding_models is None
            else embedding_models
        )
        # each model's context window (a model not named: no limit), by its vendor name
        self.windows = dict(windows or {})
        self.vllm = vllm  # a vLLM server (the edge pools): its sampling checks too
        # OpenAI's summed-token limit of one embeddings request; the hosts have none
        self.request_token_limit = REQUEST_TOKEN_LIMIT if provider == "openai" else None
        self.clock = clock
        self.prompt_cache = prompt_cache  # None: a host that reports no cached tokens
        self.cache = PromptCache(clock)
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}
        self._jobs: dict[str, _Job] = {}
        self.spool = Spool(provider) if batch else None
        self.vendor = Vendor(prefix)
        if self.spool is not None:
            self.vendor.on_stop.append(self.spool.close)
        route = self.vendor.route
        self.endpoints = {CHAT_URL, EMBEDDINGS_URL} | ({RESPONSES_URL} if responses_api else set())
        route("POST", "/v1/chat/completions")(self.chat)
        if responses_api:
            route("POST", "/v1/responses")(self.responses)
        route("POST", "/v1/embeddings")(self.embeddings)
        route("GET", "/v1/models")(self.list_models)
        if batch:
            route("POST", "/v1/files")(self.upload)
            route("GET", r"/v1/files/(?P<file_id>[\w-]+)")(self.get_file)
            route("DELETE", r"/v1/files/(?P<file_id>[\w-]+)")(self.delete_file)
            route("GET", r"/v1/files/(?P<file_id>[\w-]+)/content")(self.file_content)
            route("POST", "/v1/batches")(self.create_batch)
            route("GET", "/v1/batches")(self.list_batches)
            route("GET", r"/v1/batches/(?P<batch_id>[\w-]+)")(self.get_batch)
            route("POST", r"/v1/batches/(?P<batch_id>[\w-]+)/cancel")(self.cancel_batch)

    # -- chat and embeddings ------------------------------------------------------------
    def work(self, body: Mapping[str, Any], *, path: str) -> Work:
        if path.endswith("/embeddings"):
            dimensions = body.get("dimensions")
            return Work(
                self.provider,
                str(body.get("model")),
                "embeddings",
                inputs=embedding_inputs(body.get("input")),
                given_tokens=given_tokens(body.get("input")),
                dimensions=dimensions if _token_id(dimensions) else None,
            )
        if path.endswith("/responses"):
            text = body.get("text")
            fmt = text.get("format") if isinstance(text, Mapping) else None
            return Work(
                self.provider,
                str(body.get("model")),
                "chat",
                messages=openai_responses.work_messages(body),
                max_tokens=int(body.get("max_output_tokens") or 4096),
                stream=bool(body.get("stream")),
                answer_schema=_answer_schema(fmt, fmt),
            )
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        fmt = body.get("response_format")
        return Work(
            self.provider,
            str(body.get("model")),
            "chat",
            messages=tuple(m for m in body.get("messages") or [] if isinstance(m, Mapping)),
            max_tokens=int(limit),
            stream=bool(body.get("stream")),
            stops=stop_sequences(body.get("stop")),
            answer_schema=_answer_schema(fmt, fmt.get("json_schema") if isinstance(fmt, Mapping) else None),
        )

    def refusal(self, url: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """OpenAI's answer to a valid request to `url` it still refuses: its refusal of the
        model (`model_refusal`), or (OpenAI itself) embeddings inputs over its 300,000 tokens."""
        refused = self.host_refusal(body) or self.model_refusal(url, body) or self.over_window(url, body)
        if refused is not None or url != EMBEDDINGS_URL:
            return refused
        return _over_request_tokens(self.work(body, path=url), self.request_token_limit)

    def over_window(self, url: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """OpenAI's 400 `context_length_exceeded` for a Chat Completions request whose
        messages (counted as its `usage` counts them) and output limit (`max_completion_tokens`
        or `max_tokens`, when given) exceed the model's context window; None when they fit."""
        window = self.windows.get(str(body.get("model")))
        if url != CHAT_URL or not window:
            return None
        asked = int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
        prompt = prompt_tokens(m for m in body.get("messages") or [] if isinstance(m, Mapping))
        if prompt + asked <= window:
            return None
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return 400, error_body(message, kind=INVALID, code="context_length_exceeded", param="messages")

    def host_refusal(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """Groq's 400 for an OpenAI field it does not take (module doc); None elsewhere."""
        if self.provider != "groq":
            return None
        named = [f"messages[{i}].name" for i, m in enumerate(body.get("messages") or []) if "name" in m]
        given = [*(key for key in GROQ_UNSUPPORTED if key in body), *named]
        if body.get("n") not in (None, 1):
            given.append("n")
        if not given:
            return None
        message = f"'{given[0]}' is not supported by this API"
        return 400, error_body(message, kind=INVALID, param=given[0])

    def model_refusal(self, url: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """OpenAI's answer (status, error body) to a request to `url` (its API's path) whose
        model this account cannot use so: one it does not serve, a chat model asked for
        embeddings, `dimensions` for a model without them (module doc); None when it can."""
        model = str(body.get("model"))
        if self.models and model not in self.models:
            if url == RESPONSES_URL:
                message = f"The requested model '{model}' does not exist."
                return 400, error_body(message, kind=INVALID, code="model_not_found", param="model")
            message = f"The model `{model}` does not exist or you do not have access to it."
            return 404, error_body(message, kind=INVALID, code="model_not_found")
        if url != EMBEDDINGS_URL:
            return None
        if self.models and model not in self.embedding_models:
            return 403, error_body("You are not allowed to generate embeddings from this model", kind=INVALID)
        if "dimensions" in body and not takes_dimensions(model):
            return 400, error_body("This model does not support specifying dimensions.", kind=INVALID)
        return _oversized_dimensions(model, body.get("dimensions"))

    def _admit(self, request: Request, operation: str) -> Reply | tuple[dict[str, Any], Work, Fault | None]:
        """The request's body, work and fault; or the answer that ends it now: OpenAI's 400
        for a body its contract refuses, its refusal of the model, a silent host, or a fault
        answered at once."""
        body = parsed_body(request)
        if isinstance(body, Reply):
            return body
        refused = violations(operation, body)
        if refused:
            return invalid_reply(refused[0])
        if self.vllm and body.get("top_p") == 0:  # vLLM's SamplingParams: 0 < top_p <= 1
            message = f"top_p must be in (0, 1], got {body['top_p']}."
            return Reply.json(400, error_body(message, kind="BadRequestError", param="top_p"))
        model_refused = (
            self.host_refusal(body)
            or self.model_refusal(request.path, body)
            or self.over_window(request.path, body)
        )
        if model_refused is not None:
            return Reply.json(*model_refused)
        work = self.work(body, path=request.path)
        fault = self.behaviour.fault(work)
        if fault is not None and fault.kind == "timeout":
            return Reply(200, {"content-type": "text/event-stream; charset=utf-8"}, delay_headers=3600.0)
        if fault is not None and (refusal := fault_reply(fault)) is not None:
            return refusal
        return body, work, fault

    def _whole(self, answer: dict[str, Any], fault: Fault | None) -> Reply:
        """A whole JSON answer, after the configured latency (reset halfway on a reset fault)."""
        self.behaviour.think()
        whole = Reply.json(200, answer)
        if fault is not None and fault.kind == "reset":
            half = len(whole.body) // 2
            return Reply.stream(
                [(0.0, whole.body[:half]), (0.0, whole.body[half:])],
                content_type="application/json",
                reset_after=1,
            )
        return whole

    def chat(self, request: Request) -> Reply:
        admitted = self._admit(request, "chat.completions")
        if isinstance(admitted, Reply):
            return admitted
        body, work, fault = admitted
        answer, call = answered_with_call(body, self.answer(work))
        ident, created = f"chatcmpl-{answer.ident}", int(self.clock())
        if not work.stream:
            return self._whole(self.completion(work, answer, ident, created, call), fault)
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        reset = 2 if fault is not None and fault.kind == "reset" else None
        return Reply.stream(
            self._chunks(work, answer, ident, created, usage, call),
            content_type="text/event-stream; charset=utf-8",
            reset_after=reset,
        )

    def responses(self, request: Request) -> Reply:
        admitted = self._admit(request, "responses")
        if isinstance(admitted, Reply):
            return admitted
        body, work, fault = admitted
        answer = self.answer(work)
        created = int(self.clock())
        if not work.stream:
            response = openai_responses.response_object(
                body, work, answer, ident=answer.ident, created=created
            )
            return self._whole(response, fault)
        events = openai_responses.stream_events(
            body, work, answer, ident=answer.ident, created=created, config=self.behaviour.config
        )
        reset = 2 if fault is not None and fault.kind == "reset" else None
        return Reply.stream(events, content_type="text/event-stream; charset=utf-8", reset_after=reset)

    def answer(self, work: Work) -> Answer:
        """Behaviour's answer, its cached prompt tokens those OpenAI's automatic caching
        would report (cache.py): none for embeddings or a host without caching."""
        answer = self.behaviour.answer(work)
        if self.prompt_cache is None or work.operation != "chat":
            return answer
        scope = f"{self.provider}\n{work.model}"
        read = self.cache.automatic(scope, work.messages, self.prompt_cache)
        return replace(answer, cache_read_tokens=read)

    def completion(
        self, work: Work, answer: Answer, ident: str, created: int, call: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": answer.content, "refusal": None}
        if call is not None:
            message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
        return {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": work.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": answer.finish,
                }
            ],
            "usage": _usage(answer, self.prompt_cache is not None),
        }

    def _chunks(
        self,
        work: Work,
        answer: Answer,
        ident: str,
        created: int,
        usage: bool,
        call: dict[str, Any] | None = None,
    ) -> Iterator[tuple[float, bytes]]:
        config = self.behaviour.config

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": work.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        if call is not None:  # as OpenAI streams a call: id and name first, then the arguments
            function = call["function"]
            first = {**call, "index": 0, "function": {"name": function["name"], "arguments": ""}}
            opening = {"role": "assistant", "content": None, "tool_calls": [first], "refusal": None}
            yield config.ttft_seconds, sse(None, chunk(opening))
            rest = {"tool_calls": [{"index": 0, "function": {"arguments": function["arguments"]}}]}
            yield config.inter_token_seconds, sse(None, chunk(rest))
        else:
            yield config.ttft_seconds, sse(None, chunk({"role": "assistant", "content": ""}))
        for piece in answer.pieces:
            yield config.inter_token_seconds, sse(None, chunk({"content": piece}))
        yield 0.0, sse(None, chunk({}, answer.finish))
        if usage:
            last = {**chunk({}), "choices": [], "usage": _usage(answer, self.prompt_cache is not None)}
            yield 0.0, sse(None, last)
        yield 0.0, sse(None, "[DONE]")

    def embeddings(self, request: Request) -> Reply:
        body = parsed_body(request)
        if isinstance(body, Reply):
            return body
        refused = violations("embeddings", body)
        if refused:
            return invalid_reply(refused[0])
        model_refused = self.refusal(EMBEDDINGS_URL, body)
        if model_refused is not None:
            return Reply.json(*model_refused)
        work = self.work(body, path=request.path)
        fault = self.behaviour.fault(work)
        if fault is not None and (refusal := fault_reply(fault)) is not None:
            return refusal
        self.behaviour.think()
        answer = self.behaviour.answer(work)
        return Reply.json(200, self.embedding_list(work, answer, body.get("encoding_format")))

    @staticmethod
    def embedding_list(work: Work, answer: Answer, encoding: object = None) -> dict[str, Any]:
        """An embeddings answer; `encoding_format` base64: each vector as the base64 of its
        little-endian float32 values, as OpenAI sends it (the SDK decodes it so)."""
        return {
            "object": "list",
            "data": [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": _base64_floats(v) if encoding == "base64" else list(v),
                }
                for i, v in enumerate(answer.vectors)
            ],
            "model": work.model,
            "usage": {"prompt_tokens": answer.prompt_tokens, "total_tokens": answer.prompt_tokens},
        }

    def list_models(self, request: Request) -> Reply:
        if self.provider in self.behaviour.config.providers_down:
            return Reply.dropped()
        created = int(self.clock())
        return Reply.json(
            200,
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": created, "owned_by": self.provider}
                    for m in self.models
                ],
            },
        )

    # -- files --------------------------------------------------------------------------
    def upload(self, request: Request) -> Reply:
        fields = _multipart(request)
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return error_reply(400, "file and purpose=batch are required", kind="invalid_request_error")
        filename, content = fields["file"]
        record = self._store("batch", filename or "batch.jsonl", content)
        with self._lock:
            self._files[record.id] = record
        return Reply.json(200, _file_object(record))

    def get_file(self, request: Request) -> Reply:
        record = self._files.get(request.params["file_id"])
        if record is None:
            return error_reply(404, "No such File object", kind="invalid_request_error")
        return Reply.json(200, _file_object(record))

    def delete_file(self, request: Request) -> Reply:
        with self._lock:
            record = self._files.pop(request.params["file_id"], None)
        if record is None:
            return error_reply(404, "No such File object", kind="invalid_request_error")
        Spool.remove(record.path)
        return Reply.json(200, {"id": record.id, "object": "file", "deleted": True})

    def file_content(self, request: Request) -> Reply:
        record = self._files.get(request.params["file_id"])
        if record is None:
            return error_reply(404, "No such File object", kind="invalid_request_error")
        return Reply.raw(200, Spool.read(record.path), "application/octet-stream")

    # -- batches ------------------------------------------------------------------------
    def create_batch(self, request: Request) -> Reply:
        body = parsed_body(request)
        if isinstance(body, Reply):
            return body
        refused = violations("batches.create", body)
        if refused:
            return invalid_reply(refused[0])
        source = self._files.get(str(body.get("input_file_id")))
        if source is None:
            return error_reply(
                400,
                "input_file_id is not a file of this account",
                kind="invalid_request_error",
                code="invalid_value",
                param="input_file_id",
            )
        if body["endpoint"] not in self.endpoints:
            return error_reply(
                400,
                f"this host's batches take {sorted(self.endpoints)}",
                kind="invalid_request_error",
                code="invalid_value",
                param="endpoint",
            )
        total, errors = self._check_input(source.path, str(body["endpoint"]))
        if not errors and self._finds_down(source.path):
            return Reply.dropped()  # the provider is down: the batch is never made
        assert self.spool is not None  # the batch routes exist only with a spool
        job_id = f"batch_{uuid.uuid4().hex[:24]}"
        job = _Job(
            job_id, str(body["endpoint"]), source.id, self.clock(), self.spool.link(source.path, job_id)
        )
        job.counts["total"] = total
        job.metadata = body.get("metadata")
        job.stuck = any(STUCK_MARKER in line for line in Spool.lines(job.input_path))
        if errors:  # the vendor fails a batch whose input file it cannot read as requests
            job.finished, job.errors = "failed", errors
            job.counts["total"] = 0
            Spool.remove(job.input_path)
        with self._lock:
            self._jobs[job.id] = job
        return Reply.json(200, self._batch_object(job))

    def _finds_down(self, path: Path) -> bool:
        """Whether a request of the input file finds this provider down (`Behaviour.down`):
        only the lines that carry a down marker are read as requests."""
        for line in Spool.lines(path):
            if DOWN_MARK in line:
                parsed = json.loads(line)
                if self.behaviour.down(self.work(parsed["body"], path=str(parsed["url"]))):
                    return True
        return False

    @staticmethod
    def _check_input(path: Path, endpoint: str) -> tuple[int, list[dict[str, Any]]]:
        """The request lines of an input file, and the BatchErrors of the lines that are not
        requests of `endpoint` (their bodies are checked when they run)."""
        total, errors, seen = 0, [], set()
        for number, line in enumerate(Spool.lines(path), start=1):
            if not line.strip():
                continue
            total += 1
            try:
                parsed = json.loads(line)
            except ValueError:
                errors.append(
                    _batch_error(
                        "invalid_json_line", "This line is not parseable as valid JSON.", None, number
                    )
                )
                continue
            shape = line_shape_violations(parsed)
            if isinstance(parsed, Mapping) and not shape and parsed.get("url") != endpoint:
                shape = [Violation("url", f"must be the batch's endpoint {endpoint}")]
            custom_id = parsed.get("custom_id") if isinstance(parsed, Mapping) else None
            if not shape and custom_id in seen:
                shape = [Violation("custom_id", f"{custom_id!r} is not unique in the input file")]
            seen.add(custom_id)
            errors.extend(
                _batch_error("invalid_request", v.reason, v.param or None, number) for v in shape[:1]
            )
        return total, errors[:1000]

    def list_batches(self, request: Request) -> Reply:
        """`ListBatchesResponse`, newest first, as OpenAI pages it (`after`, `limit`)."""
        raw = request.query.get("limit", str(LIST_LIMIT_DEFAULT))
        limit = int(raw) if re.fullmatch(r"-?\d+", raw) else None
        if limit is None or not 1 <= limit <= LIST_LIMIT_MAX:
            bound = "below minimum" if limit is not None and limit < 1 else "above maximum"
            return error_reply(
                400,
                f"Invalid 'limit': expected an integer from 1 to {LIST_LIMIT_MAX}, got {raw!r} ({bound}).",
                kind="invalid_request_error",
                code="integer_below_min_value" if bound == "below minimum" else "integer_above_max_value",
                param="limit",
            )
        with self._lock:
            newest_first = list(reversed(self._jobs.values()))
        after = request.query.get("after")
        if after is not None:
            ids = [job.id for job in newest_first]
            newest_first = newest_first[ids.index(after) + 1 :] if after in ids else []
        page = newest_first[:limit]
        for job in page:
            self._advance(job)
        data = [self._batch_object(job) for job in page]
        body: dict[str, Any] = {"object": "list", "data": data, "has_more": len(newest_first) > limit}
        if data:
            body.update(first_id=data[0]["id"], last_id=data[-1]["id"])
        return Reply.json(200, body)

    def get_batch(self, request: Request) -> Reply:
        job = self._jobs.get(request.params["batch_id"])
        if job is None:
            return error_reply(404, "No such Batch object", kind="invalid_request_error")
        self._advance(job)
        return Reply.json(200, self._batch_object(job))

    def cancel_batch(self, request: Request) -> Reply:
        job = self._jobs.get(request.params["batch_id"])
        if job is None:
            return error_reply(404, "No such Batch object", kind="invalid_request_error")
        self._advance(job)  # what it finished by now is what the cancel leaves (or it had ended)
        with self._lock:
            if job.finished is None and job.cancelling_at is None:
                job.cancelling_at = self.clock()
        return Reply.json(200, self._batch_object(job))

    def _advance(self, job: _Job) -> None:
        """Run the job as far as the clock says: done once `batch_seconds` have passed. A
        cancelled job keeps what it finished before the cancel (its `completed` lines), in its
        output and error files, as OpenAI leaves a cancelled batch's partial results."""
        with self._lock:
            if job.finished is not None:
                return
            if job.cancelling_at is not None:  # cancelling until the clock moves on
                if self.clock() > job.cancelling_at:
                    self._write_outputs(job, limit=job.counts["completed"])
                    job.finished, job.cancelled_at = "cancelled", self.clock()
                    Spool.remove(job.input_path)
                return
            total = job.counts["total"]
            if job.stuck:
                job.counts["completed"] = total * self.behaviour.config.stuck_percent // 100
                return
            elapsed = self.clock() - job.created_at
            duration = self.behaviour.config.batch_seconds
            if elapsed < duration:
                job.counts["completed"] = int(total * elapsed / duration) if duration else total
                return
            expired = self._write_outputs(job)
            job.finished = "expired" if expired else "completed"
            Spool.remove(job.input_path)

    def _write_outputs(self, job: _Job, limit: int | None = None) -> bool:
        """Run the job's input lines (the first `limit` of them) into its output and error
        files and counts; True when a line expired before it ran."""
        assert self.spool is not None
        names = {"ok": f"{job.id}-output", "error": f"{job.id}-errors"}
        paths = {kind: self.spool.path(name) for kind, name in names.items()}
        counts = {"ok": 0, "error": 0}
        expired = False
        with paths["ok"].open("wb") as ok, paths["error"].open("wb") as error:
            out = {"ok": ok, "error": error}
            for line in Spool.lines(job.input_path):
                if limit is not None and counts["ok"] + counts["error"] >= limit:
                    break
                if not line.strip():
                    continue
                request = json.loads(line)
                row = self._run_line(request)
                if row is None:  # not run before the window ended: an error row says so
                    expired = True
                    row = "error", _expired_row(request.get("custom_id"))
                out[row[0]].write(row[1])
                counts[row[0]] += 1
        job.counts = {"total": job.counts["total"], "completed": counts["ok"], "failed": counts["error"]}
        for kind, path in paths.items():
            if not counts[kind]:
                Spool.remove(path)
                continue
            record = self._file_at(path, "batch_output", f"{job.id}_output.jsonl")
            self._files[record.id] = record
            if kind == "ok":
                job.output_file_id = record.id
            else:
                job.error_file_id = record.id
        return expired

    def _run_line(self, line: Mapping[str, Any]) -> tuple[str, bytes] | None:
        """One input line's output (or error) line; None when the job expires before it."""
        custom_id, body = line.get("custom_id"), line.get("body") or {}
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        url = str(line.get("url"))
        refused = violations(BATCH_URLS[url], body)
        # the vendor answers the line's request as it would alone: a 400 for its body, its
        # refusal of the model (404, 403 or 400), of too many embedding tokens (400)
        answered = (400, invalid_body(refused[0])) if refused else self.refusal(url, body)
        if answered is not None:
            status, error = answered
            row = {
                "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": request_id, "body": error},
                "error": None,
            }
            return "error", (json.dumps(row) + "\n").encode()
        work = self.work(body, path=str(line.get("url") or ""))
        fault = self.behaviour.fault(work, in_batch=True)
        if fault is not None and fault.kind == "expire":
            return None
        if fault is not None and fault.kind == "malformed":
            return "ok", b'{"id": "broken", "custom_id": ' + json.dumps(custom_id).encode() + b', "respon\n'
        if fault is not None and fault.kind in ("fail", "transient", "rate_limited", "overloaded", "down"):
            # the answer the same request gets alone (a dropped connection: OpenAI's 500)
            alone = fault_reply(fault)
            status, error = (
                (alone.status, json.loads(alone.body))
                if alone is not None and alone.body
                else (500, error_body(fault.message, kind="server_error", code="server_error"))
            )
            row = {
                "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": request_id, "body": error},
                "error": None,
            }
            return "error", (json.dumps(row) + "\n").encode()
        answer = self.answer(work)
        if work.operation == "embeddings":
            result = self.embedding_list(work, answer, body.get("encoding_format"))
        elif str(line.get("url")) == RESPONSES_URL:
            result = openai_responses.response_object(
                body, work, answer, ident=answer.ident, created=int(self.clock())
            )
        else:  # a forced call answered as Chat Completions answers it alone
            answer, call = answered_with_call(body, answer)
            result = self.completion(work, answer, f"chatcmpl-{answer.ident}", int(self.clock()), call)
        row = {
            "id": f"batch_req_{uuid.uuid4().hex[:24]}",
            "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": request_id, "body": result},
            "error": None,
        }
        return "ok", (json.dumps(row) + "\n").encode()

    def _store(self, purpose: str, filename: str, content: bytes) -> _File:
        assert self.spool is not None
        path = self.spool.path("upload")
        path.write_bytes(content)
        return self._file_at(path, purpose, filename)

    def _file_at(self, path: Path, purpose: str, filename: str) -> _File:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        return _File(file_id, purpose, filename, path, path.stat().st_size, int(self.clock()))

    def _batch_object(self, job: _Job) -> dict[str, Any]:
        """The `batch` as OpenAI answers it: the times of the states it has passed through,
        the files it has; nothing for what has not happened."""
        created = int(job.created_at)
        started = self.clock() > job.created_at
        state = job.finished or ("cancelling" if job.cancelling_at is not None else None)
        if state is None or (state == "failed" and not started):
            state = "in_progress" if started else "validating"
        done_at = int(job.created_at + self.behaviour.config.batch_seconds)
        batch: dict[str, Any] = {
            "id": job.id,
            "object": "batch",
            "endpoint": job.endpoint,
            "input_file_id": job.input_file_id,
            "completion_window": "24h",
            "status": state,
            "created_at": created,
            "expires_at": created + 86_400,
            "request_counts": dict(job.counts),
        }
        times: dict[str, int | None] = {
            "in_progress_at": created if state not in ("validating", "failed") else None,
            "failed_at": created if state == "failed" else None,
            "finalizing_at": done_at if state in ("completed", "expired") else None,
            "completed_at": done_at if state == "completed" else None,
            "expired_at": done_at if state == "expired" else None,
            "cancelling_at": int(job.cancelling_at) if job.cancelling_at is not None else None,
            "cancelled_at": int(job.cancelled_at) if job.cancelled_at is not None else None,
        }
        batch.update({k: v for k, v in times.items() if v is not None})
        if job.metadata is not None:
            batch["metadata"] = job.metadata
        if job.output_file_id:
            batch["output_file_id"] = job.output_file_id
        if job.error_file_id:
            batch["error_file_id"] = job.error_file_id
        if state == "failed":
            batch["errors"] = {"object": "list", "data": job.errors}
        return batch


def _batch_error(code: str, message: str, param: str | None, line: int) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


def _usage(answer: Answer, cached: bool) -> dict[str, Any]:
    details = {"prompt_tokens_details": {"cached_tokens": answer.cache_read_tokens}} if cached else {}
    return {
        **details,
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


def _file_object(record: _File) -> dict[str, Any]:
    return {
        "id": record.id,
        "object": "file",
        "bytes": record.size,
        "created_at": record.created_at,
        "filename": record.filename,
        "purpose": record.purpose,
        "status": "processed",
    }


def _multipart(request: Request) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    head = f"content-type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields
