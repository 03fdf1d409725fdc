"""The vendor-compatible surface's rules (docs/compat.md). Pure: no boto3, no FastAPI.

- Input rows `{custom_id, method, url, body}` become native items: `url` picks the
  operation, `body.model` the model, the rest of `body` the input.
- Native batch states map to the vendor's Batch statuses; a terminal status is shown only
  once the result artifacts exist, so a client that sees it can fetch the files at once.
- Native result rows become the vendor's output lines
  `{id, custom_id, response: {status_code, request_id, body}, error}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Generic, Literal, TypedDict, TypeVar, cast, get_args

from batchroute.domain.batches.jsonl import MAX_LINE_BYTES, JsonlReader, LineError, ParsedLine
from batchroute.domain.batches.record import ArtifactKeys, BatchRecord, CompatFields
from batchroute.domain.catalog.pricing import NO_USAGE, UsageFields
from batchroute.domain.chat.objects import ChatCompletionView, ServedBy, ToolCallView, chat_completion
from batchroute.domain.routing.items import MAX_CUSTOMER_ITEM_ID
from batchroute.domain.routing.lane_plan import is_prefix_count_key
from batchroute.domain.workflow.results import ArtifactRow, LaneTally, PublicError
from batchroute.ids import suffix_of

ENDPOINT_OPERATIONS: Final[dict[str, str]] = {
    "/v1/chat/completions": "responses",
    "/v1/responses": "responses",
    "/v1/embeddings": "embeddings",
}
ENDPOINTS: Final[tuple[str, ...]] = tuple(ENDPOINT_OPERATIONS)
COMPLETION_WINDOW: Final = "24h"
BodyFormat = Literal["normalized", "raw"]
BODY_FORMATS: Final[tuple[BodyFormat, ...]] = get_args(BodyFormat)
DEFAULT_BODY_FORMAT: Final[BodyFormat] = "normalized"
MAX_LISTED_PROBLEMS: Final = 20

VendorStatus = Literal[
    "validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"
]
_NO_COMPAT: Final = CompatFields()
_NO_ARTIFACTS: Final = ArtifactKeys()
# Native states before the router has dispatched any work: the vendor's `validating`.
_VALIDATING: Final = frozenset({"received", "validated", "priced", "queued"})
_IN_PROGRESS: Final = frozenset({"dispatching", "running"})
# Native states the failure path may settle without artifacts (services/workflow/steps.py: fail).
_SETTLED_UNFINALIZED: Final = frozenset({"failed", "expired", "canceled"})


# -- input rows ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RowProblem:
    """Why one input line is not a usable request; `param` names the field (vendor `param`)."""

    line: int
    param: str | None
    message: str

    def text(self) -> str:
        return f"Line {self.line}: {self.message}"


@dataclass(frozen=True)
class Row:
    url: str
    item: dict[str, Any]  # the native item


def read_row(line: int, parsed: Mapping[str, Any] | LineError) -> Row | RowProblem:
    """One input line as a native item, or the first problem found in it."""
    if isinstance(parsed, LineError):
        # "line 3 is not JSON: ..." -> "not JSON: ...": text() names the line once.
        return RowProblem(
            line, None, parsed.message.removeprefix(f"line {line} is ").removeprefix(f"line {line} ")
        )
    custom_id = parsed.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id or len(custom_id) > MAX_CUSTOMER_ITEM_ID:
        return RowProblem(
            line, "custom_id", f"custom_id must be a string of 1-{MAX_CUSTOMER_ITEM_ID} characters."
        )
    if parsed.get("method") != "POST":
        return RowProblem(line, "method", "method must be POST.")
    url = parsed.get("url")
    operation = ENDPOINT_OPERATIONS.get(url) if isinstance(url, str) else None
    if operation is None:
        return RowProblem(line, "url", f"url must be one of {', '.join(ENDPOINTS)}.")
    body = parsed.get("body")
    if not isinstance(body, dict):
        return RowProblem(line, "body", "body must be a JSON object.")
    model = body.get("model")
    preset = body.get("preset")  # a preset may give the model (docs/presets.md)
    if preset is not None and not isinstance(preset, str):
        return RowProblem(line, "body.preset", "body.preset must name a preset (name or name@version).")
    if (not isinstance(model, str) or not model) and (preset is None or model is not None):
        return RowProblem(line, "body.model", "body.model must name a model.")
    assert isinstance(url, str)
    foreign = _FOREIGN_FIELDS.get(url, "")
    if foreign in body:  # the native reader takes both dialects; the vendor's endpoint takes its own
        return RowProblem(
            line, f"body.{foreign}", f"Unrecognized request argument supplied: {foreign} ({url})."
        )
    item: dict[str, Any] = {
        "customer_item_id": custom_id,
        "operation": operation,
        "input": {key: value for key, value in body.items() if key not in ("model", "preset")},
    }
    if model is not None:
        item["model"] = model
    if preset is not None:
        item["preset"] = preset
    return Row(url=url, item=item)


# The other dialect's name of an endpoint's own field, which that endpoint does not take (the
# native reader takes either): Chat Completions has messages, the Responses API input, the
# embeddings endpoint input.
_FOREIGN_FIELDS: Final[dict[str, str]] = {
    "/v1/chat/completions": "input",
    "/v1/responses": "messages",
    "/v1/embeddings": "text",
}
# A request field the native reader names by one of its two names (chat `messages` or the
# Responses API's `input`; embeddings `text` or `input`), as the endpoint's body calls it.
_ENDPOINT_NAMES: Final[dict[str, tuple[str, str]]] = {
    "/v1/responses": ("messages", "input"),
    "/v1/embeddings": ("text", "input"),
}


def input_param(path: str | None, endpoint: str = "") -> str | None:
    """A native preflight path (`items[3].input.messages[0]`) as the vendor row's field
    (`body.messages[0]`), named as `endpoint`'s body names it (a Responses row lacking its
    input: `body.input`, not the chat name `body.messages`)."""
    if not path or not path.startswith("items["):
        return path
    _, _, rest = path.partition("].")
    if not rest:
        return None
    head, dot, tail = rest.partition(".")
    if head == "input":
        native, named = _ENDPOINT_NAMES.get(endpoint, ("", ""))
        if native and (tail == native or tail.startswith((f"{native}.", f"{native}["))):
            tail = named + tail[len(native) :]
        return f"body.{tail}" if dot else "body"
    return {
        "customer_item_id": "custom_id",
        "model": "body.model",
        "operation": "url",
        "preset": "body.preset",
    }.get(head, rest)


def input_message(message: str, path: str | None, endpoint: str = "") -> str:
    """A native preflight message in the names a vendor row has: the issue's own field
    (`input.n`) as `input_param` names it (`body.n`), a customer item id as `custom_id`, and
    another item (`items[0]`) as another line."""
    native = path.partition("].")[2] if path and path.startswith("items[") else ""
    named = input_param(path, endpoint)
    if native and named and native != named:
        message = re.sub(rf"(?<![\w.]){re.escape(native)}(?![\w])", named, message)
    message = re.sub(r"(?<![\w.])customer_item_id(?![\w])", "custom_id", message)
    return _OTHER_ITEM.sub(lambda found: f"line {found[1]}" if found[1] else "another line", message)


# Another item, with its file line when the preflight knew it: `items[0] (line 2)` -> `line 2`
_OTHER_ITEM: Final = re.compile(r"\bitems\[\d+\](?: \(line (\d+)\))?")


@dataclass
class RowCheck:
    """Push check of a file's rows as its bytes stream past: `feed(chunk)`, then `finish()`.
    Holds one partial line at most; keeps the first problems and counts the rest."""

    max_line_bytes: int = MAX_LINE_BYTES
    rows: int = 0
    problem_count: int = 0
    problems: list[RowProblem] = field(default_factory=list)
    _reader: JsonlReader | None = None

    def feed(self, chunk: bytes) -> None:
        self._take(self._lines().feed(chunk))

    def finish(self) -> None:
        self._take(self._lines().finish())

    def message(self) -> str:
        first = self.problems[0].text()
        if self.problem_count == 1:
            return first
        return f"{first} ({self.problem_count} invalid lines in all; the first is shown.)"

    def _lines(self) -> JsonlReader:
        if self._reader is None:
            self._reader = JsonlReader(max_line_bytes=self.max_line_bytes)
        return self._reader

    def _take(self, lines: list[ParsedLine]) -> None:
        for line, parsed in lines:
            self.rows += 1
            read = read_row(line, parsed)
            if isinstance(read, RowProblem):
                self.problem_count += 1
                if len(self.problems) < MAX_LISTED_PROBLEMS:
                    self.problems.append(read)


# -- batch statuses and the Batch object -------------------------------------------------------
def unix(moment: str | None) -> int | None:
    """An ISO 8601 timestamp as integer Unix seconds (the vendor's time format)."""
    if not moment:
        return None
    return int(datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp())


def finalized(batch: BatchRecord) -> bool:
    return bool(batch.results_key) and bool(batch.finalized_at)


def vendor_status(batch: BatchRecord) -> VendorStatus:
    """docs/compat.md has the table. A terminal native state whose artifacts are not written
    yet is `finalizing` (`cancelling` for a cancel), so a terminal vendor status comes with its
    output and error files. The one exception: a failed, expired or canceled batch settled
    without them (its Finalize gave up; the failure path settles it anyway) has nothing more
    coming, so it shows its terminal status with no files rather than `finalizing` (or
    `cancelling`) for ever."""
    state = batch.state
    gave_up = state in _SETTLED_UNFINALIZED and bool(batch.settled_at)
    done = finalized(batch) or gave_up
    if state in _VALIDATING:
        return "validating"
    if state in _IN_PROGRESS:
        return "in_progress"
    if state == "finalizing":
        return "finalizing"
    if state == "completed":
        return "completed" if done else "finalizing"
    if state == "canceled":
        return "cancelled" if done else "cancelling"
    if state == "failed":
        return "failed" if done else "finalizing"
    if state == "expired":
        return "expired" if done else "finalizing"
    raise ValueError(f"unknown batch state {state!r}")


def request_counts(batch: BatchRecord) -> dict[str, int]:
    """Canceled items are counted as failed: they are lines of the error file."""
    counts = batch.counts or {}

    def count(name: str) -> int:
        return max(0, int(counts.get(name, 0)))

    return {
        "total": count("total"),
        "completed": count("completed"),
        "failed": count("failed") + count("canceled"),
    }


class InputTokensDetails(TypedDict):
    cached_tokens: int


class OutputTokensDetails(TypedDict):
    reasoning_tokens: int


class VendorBatchUsage(TypedDict):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


def batch_usage(batch: BatchRecord) -> VendorBatchUsage | None:
    """The Batch object's `usage`: the tokens of the answers delivered (the output file's
    lines, as charged), summed over the lanes once Finalize counted them (`lane_tallies`);
    None before. Input tokens include those read from the prompt cache (`cached_tokens`);
    reasoning tokens are not told apart from the other output tokens (0)."""
    if batch.lane_tallies is None:
        return None
    used = sum((LaneTally.from_dict(tally).usage for tally in batch.lane_tallies.values()), NO_USAGE)
    prompt, completion = used.prompt_tokens, used.completion_tokens
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": used.cache.cached_input_tokens},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def batch_model(batch: BatchRecord) -> str | None:
    """The Batch object's `model`: the one model its requests name; None when they name
    several (a vendor batch runs one model, ours may route many)."""
    models = {key for chunk in batch.chunk_models or () for key in chunk if not is_prefix_count_key(key)}
    return models.pop() if len(models) == 1 else None


def output_files(batch: BatchRecord) -> tuple[str | None, str | None]:
    """(output_file_id, error_file_id) as the vendor fills them: once the batch is terminal,
    the output file when some request succeeded, the error file when some failed."""
    compat = batch.compat or _NO_COMPAT
    artifacts = batch.artifacts or _NO_ARTIFACTS
    if vendor_status(batch) not in ("completed", "failed", "expired", "cancelled"):
        return None, None
    results = artifacts.result_count or 0
    errors = artifacts.error_count or 0
    output = compat.output_file_id if results > errors else None
    error = compat.error_file_id if errors > 0 else None
    return output, error


class VendorBatchErrorView(TypedDict):
    code: str
    message: str
    param: None
    line: None


class VendorBatchErrorsView(TypedDict):
    object: Literal["list"]
    data: list[VendorBatchErrorView]


class VendorBatchView(TypedDict):
    """The vendor's Batch object, as the compat surface answers it."""

    id: str
    object: Literal["batch"]
    endpoint: str | None
    model: str | None
    input_file_id: str | None
    completion_window: str
    status: VendorStatus
    output_file_id: str | None
    error_file_id: str | None
    errors: VendorBatchErrorsView | None
    created_at: int | None
    in_progress_at: int | None
    expires_at: int | None
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: dict[str, int]
    usage: VendorBatchUsage | None
    metadata: dict[str, str] | None
    body_format: str


def _finalizing_at(batch: BatchRecord) -> str | None:
    """`finalizing_at`, one time in every poll: when the batch entered native `finalizing`
    (kept as `finalizing_at`); for a failed or expired batch, the moment it entered that state
    (its files are written from then on, while it shows `finalizing`; the same time once it
    shows `failed` / `expired`); else (a batch canceled, or one recorded before the entry was
    kept) when Finalize finished."""
    if batch.state in ("failed", "expired"):
        return batch.state_changed_at
    if batch.state == "finalizing":
        return batch.finalizing_at or batch.state_changed_at
    if batch.finalizing_at:
        return batch.finalizing_at
    return batch.finalized_at or (batch.state_changed_at if vendor_status(batch) == "finalizing" else None)


def batch_object(batch: BatchRecord) -> VendorBatchView:
    """The vendor's Batch object of a compat batch record."""
    compat = batch.compat or _NO_COMPAT
    status = vendor_status(batch)
    state = batch.state
    steps = batch.workflow_steps
    changed = batch.state_changed_at
    finalized_at = batch.finalized_at
    output_file_id, error_file_id = output_files(batch)
    latest_error = batch.latest_error
    errors: VendorBatchErrorsView | None = None
    if status == "failed":
        errors = {
            "object": "list",
            "data": [
                {
                    "code": "batch_failed",
                    "message": str(latest_error or "The batch failed."),
                    "param": None,
                    "line": None,
                }
            ],
        }
    in_progress_at = steps.get("route") or (changed if state in _IN_PROGRESS else None)
    finalizing_at = _finalizing_at(batch)
    return {
        "id": batch.batch_id,
        "object": "batch",
        "endpoint": compat.endpoint,
        "model": batch_model(batch),
        "input_file_id": compat.input_file_id,
        "completion_window": compat.completion_window or COMPLETION_WINDOW,
        "status": status,
        "output_file_id": output_file_id,
        "error_file_id": error_file_id,
        "errors": errors,
        "created_at": unix(batch.created_at),
        "in_progress_at": unix(in_progress_at) if status not in ("validating",) else None,
        "expires_at": unix(batch.deadline_at),
        "finalizing_at": unix(finalizing_at)
        if status in ("finalizing", "completed", "failed", "expired", "cancelled")
        else None,
        "completed_at": unix(batch.completed_at) if status == "completed" else None,
        "failed_at": unix(changed) if status == "failed" else None,
        "expired_at": unix(changed) if status == "expired" else None,
        "cancelling_at": unix(changed) if state == "canceled" else None,
        "cancelled_at": unix(finalized_at) if status == "cancelled" else None,
        "request_counts": request_counts(batch),
        "usage": batch_usage(batch),
        "metadata": dict(batch.metadata) if batch.metadata else None,
        "body_format": compat.body_format or DEFAULT_BODY_FORMAT,
    }


# -- output lines --------------------------------------------------------------------------------
class VendorResponse(TypedDict):
    """A completed line's `response`: its `body` the vendor endpoint's answer (or the
    provider's raw one), JSON by nature."""

    status_code: int
    request_id: str
    body: ChatCompletionView | ResponseView | dict[str, Any] | None


class OutputLine(TypedDict):
    """One line of a compat batch's output or error file."""

    id: str
    custom_id: object  # the row's custom_id, as the customer gave it
    response: VendorResponse | None
    error: PublicError | None


def request_line_id(batch_id: str, sequence_number: int) -> str:
    return f"batch_req_{suffix_of(batch_id)}_{sequence_number}"


def output_line(
    batch_id: str,
    row: ArtifactRow,
    body_format: BodyFormat,
    *,
    endpoint: str = "/v1/chat/completions",
    created: int = 0,
) -> OutputLine:
    """One vendor line of a native results.jsonl row: a populated `response` for a completed
    row (its body in the vendor's shape for `endpoint`, or the provider's raw body), a
    populated `error` otherwise."""
    seq = int(row["sequence_number"])
    line: OutputLine = {
        "id": request_line_id(batch_id, seq),
        "custom_id": row.get("customer_item_id"),
        "response": None,
        "error": None,
    }
    if row.get("status") == "completed":
        line["response"] = {
            "status_code": 200,
            "request_id": f"req_{suffix_of(batch_id)}_{seq}",
            "body": row.get("raw")
            if body_format == "raw"
            else vendor_body(endpoint, row, request_id=f"{suffix_of(batch_id)}_{seq}", created=created),
        }
    else:
        error: PublicError | dict[str, str] = row.get("error") or {}
        line["error"] = {
            "code": str(error.get("code") or "error"),
            "message": str(error.get("message") or "The request failed."),
        }
    return line


def vendor_body(
    endpoint: str, row: ArtifactRow, *, request_id: str, created: int
) -> ChatCompletionView | ResponseView | dict[str, Any]:
    """A completed row's normalized output as the vendor's endpoint answers it, so code that
    reads `response.body` of a vendor batch works unchanged: a `chat.completion` for
    `/v1/chat/completions`, a `response` for `/v1/responses`, an embedding `list` for
    `/v1/embeddings`. Usage and model come from the row (results.jsonl keeps them)."""
    output = row.get("output") or {}
    usage: UsageFields | dict[str, int] = row.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    cached = int(usage.get("cached_input_tokens") or 0)  # the vendor's real cache counts
    written = int(usage.get("cache_write_input_tokens") or 0)
    model = str(row.get("model") or "")
    if endpoint == "/v1/embeddings":
        vectors = output.get("embeddings") or ([output["embedding"]] if "embedding" in output else [])
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "model": model,
            "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
        }
    content = str(output.get("content") or "")
    finish_reason = str(output.get("finish_reason") or "stop")
    # The model's function calls and refusal (providers/base.py): paid for, so never dropped.
    tool_calls = [cast(ToolCallView, c) for c in output.get("tool_calls") or [] if isinstance(c, dict)]
    refusal = str(output["refusal"]) if output.get("refusal") else None
    if endpoint == "/v1/responses":
        return response_body(
            request_id,
            created,
            model,
            content,
            finish_reason,
            usage=(prompt, completion, cached, written),
            tool_calls=tool_calls,
            refusal=refusal,
        )
    served = ServedBy(f"chatcmpl-{request_id}", created, model, str(row.get("provider") or ""))
    return chat_completion(
        served,
        content=content,
        finish_reason=finish_reason,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        tool_calls=tool_calls,
        refusal=refusal,
    )


class _OutputTextView(TypedDict):
    type: Literal["output_text"]
    text: str
    annotations: list[object]
    logprobs: list[object]


class _RefusalView(TypedDict):
    type: Literal["refusal"]
    refusal: str


class _OutputMessageView(TypedDict):
    type: Literal["message"]
    id: str
    status: str
    role: Literal["assistant"]
    content: list[_OutputTextView | _RefusalView]


class _FunctionCallView(TypedDict):
    """A function call of the answer (OpenAI's `FunctionToolCall` output item)."""

    type: Literal["function_call"]
    id: str
    call_id: str
    name: str
    arguments: str
    status: str


class _IncompleteDetailsView(TypedDict):
    reason: str


class _ResponseUsageView(TypedDict):
    input_tokens: int
    input_tokens_details: dict[str, int]
    output_tokens: int
    output_tokens_details: dict[str, int]
    total_tokens: int


class ResponseView(TypedDict):
    """The `response` object of /v1/responses (OpenAI's `Response` schema)."""

    id: str
    object: Literal["response"]
    created_at: int
    status: str
    error: None
    incomplete_details: _IncompleteDetailsView | None
    instructions: None
    metadata: None
    model: str
    output: list[_OutputMessageView | _FunctionCallView]
    parallel_tool_calls: bool
    temperature: None
    tool_choice: str
    tools: list[object]
    top_p: None
    usage: _ResponseUsageView


# A finish that cut the answer short, as the Responses API's `incomplete_details.reason`.
_INCOMPLETE_REASONS: Final[dict[str, str]] = {
    "length": "max_output_tokens",
    "content_filter": "content_filter",
}


def response_body(
    request_id: str,
    created: int,
    model: str,
    content: str,
    finish_reason: str,
    *,
    usage: tuple[int, int, int, int],
    tool_calls: Sequence[ToolCallView] = (),
    refusal: str | None = None,
) -> ResponseView:
    """The `response` object /v1/responses answers, with every field OpenAI's `Response`
    schema requires. An answer cut short (`length`, `content_filter`) is `incomplete`, says
    why in `incomplete_details`, and so does its message. The request's own `instructions`,
    `metadata`, `temperature` and `top_p` are not kept with the result: they are null.
    Function calls are `function_call` output items, a refusal a `refusal` content part."""
    prompt, completion, cached, written = usage
    reason = _INCOMPLETE_REASONS.get(finish_reason)
    status = "incomplete" if reason else "completed"
    return {
        "id": f"resp_{request_id}",
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "instructions": None,
        "metadata": None,
        "model": model,
        "output": _response_output(request_id, status, content, tool_calls, refusal),
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        },
    }


def _response_output(
    request_id: str, status: str, content: str, tool_calls: Sequence[ToolCallView], refusal: str | None
) -> list[_OutputMessageView | _FunctionCallView]:
    """A Response's `output`: the message (its text, then its refusal), left out when the
    answer is only function calls, then one `function_call` item per call."""
    parts: list[_OutputTextView | _RefusalView] = []
    if content or not (tool_calls or refusal):
        parts.append({"type": "output_text", "text": content, "annotations": [], "logprobs": []})
    if refusal:
        parts.append({"type": "refusal", "refusal": refusal})
    output: list[_OutputMessageView | _FunctionCallView] = []
    if parts:
        message: _OutputMessageView = {
            "type": "message",
            "id": f"msg_{request_id}",
            "status": status,
            "role": "assistant",
            "content": parts,
        }
        output.append(message)
    for index, call in enumerate(tool_calls):
        function = call.get("function") or {}
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{request_id}_{index}",
                "call_id": str(call.get("id") or f"call_{request_id}_{index}"),
                "name": str(function.get("name") or ""),
                "arguments": str(function.get("arguments") or ""),
                "status": "completed",
            }
        )
    return output


@dataclass(frozen=True, slots=True)
class OutputFile:
    """The record of a compat batch's output or error file: whose it is, which of the two,
    and its size in each body format once measured."""

    org_id: str
    batch_id: str
    role: str  # `output` (the completed rows) or `error`
    sizes: Mapping[BodyFormat, int] = field(default_factory=dict)  # bytes, once measured
    deleted_at: str | None = None  # `DELETE /files/{id}`: gone from the surface from then on

    @property
    def is_output(self) -> bool:
        return self.role == "output"


class VendorFileView(TypedDict):
    """The vendor's File object: an input file, or a compat batch's output or error file."""

    id: str
    object: Literal["file"]
    bytes: int
    created_at: int | None
    filename: str
    purpose: str
    status: str
    status_details: str | None
    expires_at: int | None  # an output or error file's: when retention reclaims it


# A vendor list's items: batches or files.
Listed = TypeVar("Listed", VendorBatchView, VendorFileView)


class VendorListView(TypedDict, Generic[Listed]):
    object: Literal["list"]
    data: list[Listed]
    first_id: str | None
    last_id: str | None
    has_more: bool


VendorBatchListView = VendorListView[VendorBatchView]
VendorFileListView = VendorListView[VendorFileView]


def vendor_list(data: list[Listed], *, has_more: bool) -> VendorListView[Listed]:
    """A page as the vendor lists one: its items, the first and last ids (the cursor)."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


class VendorFileDeletedView(TypedDict):
    id: str
    object: Literal["file"]
    deleted: bool


FILE_LIST_PURPOSES: Final = ("batch", "batch_output")  # what the surface lists (docs/compat.md)
FILE_PAGE_MAX: Final = 100  # files a list page holds at most, whatever `limit` asks


def file_status(native_status: str) -> str:
    """A native file status as the vendor File object shows it (plus `expired`)."""
    return {"uploading": "uploaded", "uploaded": "uploaded"}.get(native_status, native_status)
