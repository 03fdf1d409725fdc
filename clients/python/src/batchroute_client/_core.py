"""The sans-IO core of the client: every behaviour of `Client` and `AsyncClient` written once.

An API call is a *plan*: a generator that yields effects (`Send` a request, `Open` a streamed
one, `Read` from it, `Sleep`, `Emit` a value to the caller) and is sent each effect's result
back (or has its exception thrown in). The plan builds the requests, decides the retries and
their backoff (`_retry`), turns answers into models or typed errors (`errors`), pages through
listings and walks the upload steps (`_upload`); it never touches the network or the clock's
sleep. `Client` runs plans with a blocking loop on `httpx.Client`, `AsyncClient` with an
awaiting loop on `httpx.AsyncClient` (docs/client.md, "Structure").
"""

from __future__ import annotations

import contextlib
import dataclasses
import json as _json
import os
import re
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, BinaryIO, Generic, Literal, TypedDict, TypeVar, Unpack
from urllib.parse import quote

import httpx

from batchroute_client import models
from batchroute_client._retry import Backoff, wait_before_retry
from batchroute_client._upload import (
    PENDING_STATUSES,
    Progress,
    Source,
    UploadMethod,
    UploadSource,
    complete_body,
    direct_headers,
    part_headers,
    start_body,
    upload_source,
    use_direct,
)
from batchroute_client.errors import (
    APIConnectionError,
    APIError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    WaitTimeoutError,
    error_for,
    error_from_response,
    unexpected,
)

__version__ = "0.1.0"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 4

T = TypeVar("T")

# The routes that honour an `Idempotency-Key` (a repeat with the same key and body is answered
# the first answer): a POST to one is retried like `batches.create`, with one key per call.
KEYED_ROUTES = frozenset({"/v1/batches", "/v1/compat/v1/batches", "/v1/work-orders"})
# A batch retry: the service derives its key from the source batch and the items it retries
# (docs/batches.md, "Retry"), so a repeat answers with the same new batch, never a second one.
RETRY_ROUTE = re.compile(r"/v1/batches/[^/]+/retry")
# The methods that may act twice when repeated: retried only on the answers that say nothing
# was done (429, `NOTHING_DONE`) unless the route honours their `Idempotency-Key`.
UNSAFE_METHODS = frozenset({"POST", "PATCH"})

# A request httpx or h11 refuses to send as built: retrying cannot help, and the text of a
# LocalProtocolError quotes the refused header, which may be the Authorization header.
UNSENDABLE = (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL)
# A header value HTTP carries as it is: visible ASCII, spaces and tabs.
_SENDABLE_VALUE = re.compile(r"[\x20-\x7e\t]*")
# Failures before the request reached the service: nothing it could have done.
NEVER_REACHED = (httpx.ConnectError, httpx.ConnectTimeout)


def new_idempotency_key() -> str:
    """A fresh `Idempotency-Key` for one call: `br-` and 32 hex characters."""
    return f"br-{uuid.uuid4().hex}"


def json_bytes(value: Any) -> bytes:
    """A JSON body as the client sends it: UTF-8, compact, non-ASCII kept (httpx 0.27 escapes
    it: a CJK text doubles, an emoji triples). The CLI sizes its inline items with it."""
    return _json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


@dataclass(frozen=True)
class Call:
    """One HTTP request, described: `content` is a factory of the body (bytes or an iterator of
    chunks), called again for every attempt so a streamed upload restarts from its first byte."""

    method: str
    url: str
    params: Mapping[str, Any] | None = None
    # Kept out of `repr`: the headers carry the API key, a body may carry a secret (a webhook's,
    # a delivery target's access key).
    json: Any = field(default=None, repr=False)
    content: Callable[[], Any] | None = field(default=None, repr=False)
    headers: Mapping[str, str] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Send:
    """Send `call` and read its body: the `httpx.Response` (a transport error is thrown in)."""

    call: Call


@dataclass(frozen=True)
class Open:
    """Send `call` and return the response with its body unread; closed when the plan ends."""

    call: Call


@dataclass(frozen=True)
class Read:
    """From an opened response: the whole `body` (None back), or its next `line` or `chunk`
    (None at the end)."""

    response: httpx.Response
    unit: Literal["body", "line", "chunk"]


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Emit(Generic[T]):
    """Hand `value` to the caller (a row of a listing, a streamed event); None comes back."""

    value: T


Effect = Send | Open | Read | Sleep | Emit[Any]
Plan = Generator[Effect, Any, T]  # a plan whose value is a T
Stream = Generator[Send | Open | Read | Sleep | Emit[T], Any, None]  # a plan that emits T's


def returning(plan: Plan[T]) -> Plan[None]:
    """The plan with its result emitted last (how a loop runs a plan to its value)."""
    result = yield from plan
    yield Emit(result)


class Runner:
    """Steps a plan: what a driver loop asks for the next effect and answers with its outcome."""

    def __init__(self, plan: Plan[Any]) -> None:
        self._plan = plan
        self._value: Any = None
        self._error: BaseException | None = None

    def next(self) -> Effect | None:
        """The plan's next effect, or None when it is done; raises what the plan raises. An
        emitted value is answered with None."""
        error, self._error = self._error, None
        try:
            value, self._value = self._value, None
            return self._plan.throw(error) if error is not None else self._plan.send(value)
        except StopIteration:
            return None

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Around performing an effect: what it raises is thrown into the plan, which decides."""
        try:
            yield
        except BaseException as exc:
            self._error = exc

    def resolve(self, value: Any) -> None:
        self._value = value

    def close(self) -> None:
        self._plan.close()


def request_arguments(call: Call, body: Callable[[Any], Any]) -> dict[str, Any]:
    """The keyword arguments of `build_request` for `call`; `body` adapts a fresh body to the
    HTTP client (an async client streams async iterators only). A JSON body is encoded here
    (`json_bytes`), so the bytes sent do not depend on the httpx version."""
    if any(not _SENDABLE_VALUE.fullmatch(value) for value in (call.headers or {}).values()):
        # httpx raises a bare UnicodeEncodeError for non-ASCII and lets some control
        # characters through to a 400: neither is what a bad `idempotency_key` should meet
        raise unsendable(call, ValueError("a header value holds a control or non-ASCII character"))
    headers = httpx.Headers(call.headers)
    content = body(call.content()) if call.content is not None else None
    if call.json is not None:
        headers.setdefault("Content-Type", "application/json")
        content = json_bytes(call.json)
    return {
        "method": call.method,
        "url": call.url,
        "params": call.params,
        "content": content,
        "headers": headers,
    }


def unsendable(call: Call, exc: Exception) -> InvalidRequestError:
    """The error of a request that cannot be sent, naming the call, never the refused value."""
    try:
        label = f"{call.method} {httpx.URL(call.url).path}"
    except httpx.InvalidURL:
        label = call.method
    return InvalidRequestError(
        f"{label}: the request cannot be sent ({type(exc).__name__}): a header value, the URL or "
        "the body's length is not valid HTTP"
    )


def decoded(call: Call, response: httpx.Response) -> Any:
    """The JSON body of a successful answer to `call` (None when it is empty), or
    `UnexpectedResponse` when the body is not JSON (an HTML page, a proxy's text)."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise unexpected(call.method, call.url, response, "not the API's JSON") from exc


def read_model(call: Call, response: httpx.Response, build: Callable[[Any], T]) -> T:
    """`build` applied to the JSON body of a successful answer to `call`; `UnexpectedResponse`
    when the body is empty, not JSON or not the document `build` reads."""
    body = decoded(call, response)
    try:
        return build(body)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        problem = (
            "an empty body where the API sends a JSON document"
            if body is None
            else f"JSON that is not the API's document ({type(exc).__name__}: {exc})"
        )
        raise unexpected(call.method, call.url, response, problem) from exc


def iterator_of(content: Any) -> Iterator[bytes] | None:
    """The body as a sync iterator of chunks, when it is one (bytes and async bodies are not)."""
    if isinstance(content, bytes | str) or not isinstance(content, Iterator):
        return None
    return content


class ClientBase:
    """What both clients hold: the resolved key and URL, the retry policy and the clocks."""

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        http_base_url: str | None,
        *,
        max_retries: int,
        backoff: Backoff | None,
        clock: Callable[[], float],
        monotonic: Callable[[], float],
    ) -> None:
        key = (api_key or os.environ.get("BATCHROUTE_API_KEY") or "").strip()
        if not key:
            raise ValueError("no API key: pass api_key= or set BATCHROUTE_API_KEY")
        if not all("!" <= char <= "~" for char in key):  # the key itself is never shown
            raise ValueError("the API key holds whitespace, control or non-ASCII characters: copy it again")
        url = (base_url or os.environ.get("BATCHROUTE_BASE_URL") or http_base_url or "").strip()
        if not url:
            raise ValueError("no base URL: pass base_url= or set BATCHROUTE_BASE_URL")
        try:
            parsed: httpx.URL | None = httpx.URL(url)
        except httpx.InvalidURL:
            parsed = None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            # not shown either: a key passed where the URL goes would be printed
            raise ValueError(
                "the base URL must be http:// or https:// and a host, e.g. https://api.example.com"
            )
        self.base_url = url.rstrip("/")
        self.max_retries = max(0, max_retries)
        self._api_key = key
        self._backoff = backoff or Backoff()
        self._clock = clock
        self.monotonic = monotonic
        self.ops = Operations(self)

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def route_of(self, url: str) -> str | None:
        """The API route `url` names (its path below the base URL's), None for another place."""
        try:
            base, target = httpx.URL(self.base_url), httpx.URL(url)
        except httpx.InvalidURL:
            return None
        prefix = base.path.rstrip("/")
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            return None
        if not target.path.startswith(prefix + "/"):
            return None
        return target.path[len(prefix) :].rstrip("/")

    def error_of(self, response: httpx.Response, call: Call) -> APIError:
        """The typed error of `response` to `call` (a `Retry-After` date read on the clock)."""
        return error_from_response(response, call.method, call.url, now=self._clock())

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": f"batchroute-python/{__version__}",
            **(extra or {}),
        }

    def retry_wait(self, attempt: int, response: httpx.Response | None, repeatable: bool) -> float | None:
        """Seconds before retrying failed attempt `attempt` (None: give up); `response` None is a
        network error. A request that is not repeatable is retried on a 503 whose code says the
        service did nothing and charged nothing (`NOTHING_DONE`), as on a 429. An answer that
        says `x-should-retry: false` (the vendor-compatible surface's 429 `insufficient_quota`,
        its final 409s) is never retried, as the official SDK reads it."""
        if response is None:
            return wait_before_retry(
                self._backoff, attempt, self.max_retries, status=None, repeatable=repeatable
            )
        if response.headers.get("x-should-retry", "").lower() == "false":
            return None
        return wait_before_retry(
            self._backoff,
            attempt,
            self.max_retries,
            status=response.status_code,
            retry_after=response.headers.get("retry-after"),
            now=self._clock(),
            repeatable=repeatable or nothing_done(response),
        )


# The 503 codes of a chat request no provider answered (`provider_unavailable`) or whose
# provider failed before the answer was whole (`provider_failed`, not streamed): the service
# released the hold and charged nothing (docs/chat.md), so repeating it is safe.
NOTHING_DONE = frozenset({"provider_unavailable", "provider_failed"})


def nothing_done(response: httpx.Response) -> bool:
    if response.status_code != 503:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and error.get("code") in NOTHING_DONE


def _batch_of(body: Any) -> models.Batch:
    return models.Batch.from_dict(body["batch"])


def _batch_with_receipt(body: Any) -> models.Batch:
    """GET /v1/batches/{id}'s answer: the batch, with the receipt beside it when there is one."""
    batch = _batch_of(body)
    receipt = body.get("billing_receipt")
    if not isinstance(receipt, Mapping):
        return batch
    return dataclasses.replace(batch, billing_receipt=_receipt_of(receipt, batch.id))


def _receipt_of(data: Mapping[str, Any], batch_id: str) -> models.BillingReceipt:
    """A billing receipt; one the service's stale-hold sweep wrote for a direct chat request
    before 2026-12-02 lacks its batch id, subtotal and fee: the charge, with no fee."""
    charged = data.get("final_settled_price")
    filled = {
        "batch_id": batch_id,
        "provider_subtotal": charged,
        "service_fee": {"currency": (charged or {}).get("currency", "usd"), "amount": "0"},
        **data,
    }
    return models.BillingReceipt.from_dict(filled)


def _delivery_of(body: Any) -> models.BucketDelivery:
    return models.BucketDelivery.from_dict(body["delivery"])


def _webhook_deliveries_of(body: Any) -> list[models.WebhookDelivery]:
    return [models.WebhookDelivery.from_dict(row) for row in body["data"]]


def _file_of(body: Any) -> models.File:
    return models.File.from_dict(body["file"])


def _in(key: str, build: Callable[[Any], T]) -> Callable[[Any], T]:
    """Read the envelope's `key` with `build` (`{"auto_topup": {...}}`, `{"model": {...}}`)."""
    return lambda body: build(body[key])


_auto_topup_of = _in("auto_topup", models.AutoTopup.from_dict)


def _given(**fields: Any) -> dict[str, Any]:
    """The body of a partial update: the fields given (None leaves a field as it is)."""
    return {name: value for name, value in fields.items() if value is not None}


# USD as the service reads it in a request: a number, a decimal string or a Money object.
Usd = Decimal | int | float | str | models.Money


def _usd(value: Usd | None) -> Any:
    """`value` as JSON: a `Decimal` as its plain decimal string, a `Money` as its object."""
    if isinstance(value, models.Money):
        return {"currency": value.currency, "amount": value.amount}
    return format(value, "f") if isinstance(value, Decimal) else value


class TargetOptions(TypedDict, total=False):
    """A delivery target's optional fields (docs/delivery-targets.md, Registering a target)."""

    name: str | None  # a label; the bucket's name by default (null: back to it)
    endpoint_url: str  # an S3-compatible service's https origin; left out for AWS S3
    region: str  # required without endpoint_url
    prefix: str
    enabled: bool


class TargetChanges(TargetOptions, total=False):
    """What a PATCH may change: any field of a target."""

    bucket: str
    access_key_id: str
    secret_access_key: str  # with its access_key_id


class ScheduleChanges(TypedDict, total=False):
    """What a schedule's PATCH may change (docs/schedules.md, The body): any field given
    makes a new version."""

    name: str
    expression: str  # a 5-field cron or rate(N minutes|hours|days), at least 5 minutes apart
    time_zone: str  # an IANA zone
    input_source: dict[str, Any]  # {type: file, file_id} or {type: bucket_prefix, target_id, prefix}
    description: str | None
    batch_options: dict[str, Any]  # what POST /v1/batches takes beside its items
    golden_set: dict[str, Any] | None


class PresetFields(TypedDict, total=False):
    """A preset's template (docs/presets.md, The preset): a `model` or a `workflow_product`."""

    description: str | None
    model: str | None
    workflow_product: str | None
    operation: str | None  # responses, embeddings, vision
    system_prompt: str | None
    parameters: dict[str, Any] | None  # max_output_tokens, temperature, top_p, response_format, ...
    routing: dict[str, Any] | None  # routing_mode, privacy_tier, region, max_price
    metadata: dict[str, Any] | None
    golden_set: dict[str, Any] | None


class FeedbackFilters(TypedDict, total=False):
    """What a feedback listing may be narrowed to (docs/feedback.md)."""

    target_type: str  # batch_item or chat_completion
    batch_id: str
    model: str
    provider: str
    rating_scale: str  # thumbs or stars


class PolicyFields(TypedDict, total=False):
    """A route policy's fields (docs/routing-policy.md, The policy object)."""

    provider_allow: list[str]
    provider_deny: list[str]
    allowed_regions: list[str]
    routing_mode: str | None  # cheapest, balanced, sla_aware; None: each request's own
    privacy_tier_floor: str | None
    max_price_per_million_tokens: dict[str, Any]  # per operation: {input, output} USD caps
    chat_fallbacks_allowed: bool


class ScheduleOptions(TypedDict, total=False):
    """A new schedule's optional fields; `time_zone` is UTC and `state` active by default."""

    time_zone: str
    description: str | None
    batch_options: dict[str, Any]
    golden_set: dict[str, Any] | None
    state: str  # "active" or "paused"


def _segment(value: str, safe: str = "") -> str:
    """`value` as one path segment (`safe`: the characters kept, "/" for a model id); `.` and
    `..`, which a URL resolves as dot segments, stay themselves (`%2E`)."""
    quoted = quote(value, safe=safe)
    return "%2E" * len(quoted) if quoted in (".", "..") else quoted


def _account_of(body: Any) -> dict[str, Any]:
    if not isinstance(body["org"], dict):
        raise TypeError("org is not an object")
    return dict(body)


def _answers_a_repeat(route: str | None) -> bool:
    """Whether a POST to `route` is answered the first answer when repeated: it honours the
    `Idempotency-Key` (`KEYED_ROUTES`) or derives its own (`RETRY_ROUTE`)."""
    return route is not None and (route in KEYED_ROUTES or RETRY_ROUTE.fullmatch(route) is not None)


def _next_page(body: Any) -> dict[str, str] | None:
    """The query of the page after `body`, None after the last: a native listing carries
    `next_cursor`; a vendor-compatible one (`/v1/compat/v1/batches`, `.../files`) carries
    OpenAI's cursor instead, `has_more` and `last_id`, asked for as `after`."""
    cursor = body.get("next_cursor")
    if cursor:
        return {"cursor": cursor}
    last_id = body.get("last_id")
    if body.get("has_more") is True and isinstance(last_id, str) and last_id:
        return {"after": last_id}
    return None


def _answered(error: type[APIError], code: str) -> Callable[[APIError], bool]:
    """Whether an error is `error` with `code`: a retry's answer that says the attempt whose
    answer was lost did the work (`_done_unless_lost`)."""
    return lambda exc: isinstance(exc, error) and exc.code == code


def _preset_path(name: str) -> str:
    return f"/v1/presets/{_segment(name)}"


def _flag(value: bool | None) -> str | None:
    """A boolean query parameter as the API reads it."""
    return None if value is None else ("true" if value else "false")


def _work_order_path(work_order_id: str) -> str:
    return f"/v1/work-orders/{_segment(work_order_id)}"


def _policy_of(body: Any) -> models.RoutePolicy:
    return models.RoutePolicy.from_dict(body["policy"])


def _schedule_path(schedule_id: str) -> str:
    return f"/v1/schedules/{_segment(schedule_id)}"


def _local(source: Source | UploadSource) -> UploadSource:
    return source if isinstance(source, UploadSource) else upload_source(source)


class Operations:
    """Every API call of the client as a plan (see the module docstring), with the public
    signature and documentation: `Client` and `AsyncClient` expose these methods as their own
    (`_surface`), run by their loops."""

    def __init__(self, client: ClientBase) -> None:
        self._client = client

    # -- the exchange, with the spec's retries --------------------------------------------

    def exchange(
        self, call: Call, *, repeatable: bool = True, on_retry: Callable[[bool], None] | None = None
    ) -> Plan[httpx.Response]:
        """One exchange with the spec's retries: the successful response, or the typed error.
        A request that is not `repeatable` (it may have acted) is retried only on 429; one that
        cannot be sent (`UNSENDABLE`) never. `on_retry(may_have_acted)` is told before each
        retry whether the attempt that failed may have reached the service and acted: a 5xx or
        a connection lost after it was made; not a 429 (answered before any work) nor a
        connection never made."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response: httpx.Response = yield Send(call)
            except UNSENDABLE as exc:
                raise unsendable(call, exc) from None
            except httpx.TransportError as exc:
                wait = self._client.retry_wait(attempt, None, repeatable)
                if wait is None:
                    label = f"{call.method} {httpx.URL(call.url).path}"
                    raise APIConnectionError(f"{label}: {type(exc).__name__}: {exc}") from exc
                may_have_acted = not isinstance(exc, NEVER_REACHED)
            else:
                if response.status_code < 400:
                    return response
                wait = self._client.retry_wait(attempt, response, repeatable)
                if wait is None:
                    raise self._client.error_of(response, call)
                may_have_acted = response.status_code >= 500
            if on_retry is not None:
                on_retry(may_have_acted)
            yield Sleep(wait)

    def send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: Callable[[], Any] | None = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool | None = None,
    ) -> Plan[httpx.Response]:
        """One HTTP exchange with the spec's retries; the successful response, or the typed error.

        `content` is a factory of the body (bytes or an iterator of chunks), called again for
        every attempt, so a streamed upload restarts from its first byte. `repeatable` None
        decides by method, as `request` does (`by_method`)."""
        headers, repeats = self.by_method(method, url, headers, repeatable)
        call = Call(method, url, params=params, json=json, content=content, headers=headers)
        return self.exchange(call, repeatable=repeats)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        retry_on_network_error: bool | None = None,
    ) -> Plan[Any]:
        """Send one API call, retrying per the spec's guidance; return the decoded JSON body.

        Every attempt sends the same headers and body. `retry_on_network_error` None decides by
        method (`by_method`): GET, HEAD, PUT and DELETE are retried on network errors and 5xx;
        a POST or PATCH carries one `Idempotency-Key` (yours, or one generated per call) and is
        retried after a network error or a 5xx only on the routes that honour it
        (`KEYED_ROUTES`) and a batch retry, which keys itself (`RETRY_ROUTE`); elsewhere only
        on the answers that say nothing was done (429, the `NOTHING_DONE` 503s). True or False
        overrides that. A body that is not JSON raises `UnexpectedResponse`.
        """
        headers, repeats = self.by_method(
            method, self._client.base_url + path, headers, retry_on_network_error
        )
        call = self._api_call(method, path, params, json, headers)
        return decoded(call, (yield from self.exchange(call, repeatable=repeats)))

    def by_method(
        self, method: str, url: str, headers: Mapping[str, str] | None, repeatable: bool | None
    ) -> tuple[Mapping[str, str] | None, bool]:
        """The headers and the repeatability of a generic call to `url`: a POST or PATCH gets an
        `Idempotency-Key` (`br-` + 32 hex) when it has none, the same on every retry, and is
        repeatable only to a route that honours it or keys itself (a batch retry); other methods
        are. `repeatable` given wins."""
        if method.upper() not in UNSAFE_METHODS:
            return headers, True if repeatable is None else repeatable
        if "idempotency-key" not in httpx.Headers(headers):
            headers = {**(headers or {}), "Idempotency-Key": new_idempotency_key()}
        if repeatable is None:
            repeatable = method.upper() == "POST" and _answers_a_repeat(self._client.route_of(url))
        return headers, repeatable

    def _api_call(
        self,
        method: str,
        path: str,
        params: Mapping[str, Any] | None,
        json: Any,
        headers: Mapping[str, str] | None,
    ) -> Call:
        return Call(
            method,
            self._client.base_url + path,
            params={k: v for k, v in (params or {}).items() if v is not None},
            json=json,
            headers=self._client.headers(headers),
        )

    def _fetch(
        self,
        method: str,
        path: str,
        build: Callable[[Any], T],
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        repeatable: bool = True,
    ) -> Plan[T]:
        """`request`, with the body read by `build` (a model's `from_dict`, its envelope
        unwrapped): an answer that is not that document raises `UnexpectedResponse`."""
        call = self._api_call(method, path, params, json, headers)
        return read_model(call, (yield from self.exchange(call, repeatable=repeatable)), build)

    def _done_unless_lost(
        self,
        method: str,
        path: str,
        build: Callable[[Any], T],
        done_by_lost: Callable[[APIError], bool],
        *,
        json: Any = None,
    ) -> Plan[T | None]:
        """`_fetch`, except that an error answering a retry after an attempt that may have
        acted (its answer lost to a dropped connection or a 5xx) that `done_by_lost` reads as
        "already done" gives None: that attempt did the work. The same error after only
        attempts that did nothing (a 429, a connection never made) raises."""
        call = self._api_call(method, path, None, json, None)
        retried: list[bool] = []
        try:
            response = yield from self.exchange(call, on_retry=retried.append)
        except APIError as exc:
            if not any(retried) or not done_by_lost(exc):
                raise
            return None
        return read_model(call, response, build)

    def _events(self, path: str, json: Any, parse: Callable[[dict[str, Any]], T]) -> Stream[T]:
        call = Call("POST", self._client.base_url + path, json=json, headers=self._client.headers())
        attempt = 0
        while True:
            attempt += 1
            try:
                response = yield Open(call)
                if response.status_code < 400:
                    yield from self._read_events(call, response, parse)
                    return
                yield Read(response, "body")
            except UNSENDABLE as exc:
                raise unsendable(call, exc) from None
            except httpx.TransportError as exc:
                raise APIConnectionError(f"POST {path}: {type(exc).__name__}: {exc}") from exc
            wait = self._client.retry_wait(attempt, response, repeatable=False)
            if wait is None:
                raise self._client.error_of(response, call)
            yield Sleep(wait)

    def _read_events(
        self, call: Call, response: httpx.Response, parse: Callable[[dict[str, Any]], T]
    ) -> Stream[T]:
        """Emit each event's data until `[DONE]`. The error event that ends a stream failed
        midway (`{"error": {code, message, details}}`) raises its `APIError`; a stream that ends
        without `[DONE]` was cut off: `APIConnectionError`. An answer that is not an event
        stream of the API's JSON (an HTML page, a JSON document) raises `UnexpectedResponse`."""
        kind = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if kind not in ("", "text/event-stream", "text/plain"):
            yield Read(response, "body")
            raise unexpected(call.method, call.url, response, "not the API's event stream")
        while (line := (yield Read(response, "line"))) is not None:
            data = line[5:].strip() if line.startswith("data:") else None
            if data == "[DONE]":
                return
            if data is not None:
                try:
                    body = _json.loads(data)
                    if isinstance(body, dict) and isinstance(body.get("error"), dict):
                        raise error_for(response.status_code, body, response.headers.get("x-request-id"))
                    event = parse(body)
                except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                    problem = f"an event that is not the API's JSON ({type(exc).__name__}: {exc})"
                    raise unexpected(call.method, call.url, response, problem) from exc
                yield Emit(event)
        path = httpx.URL(call.url).path
        raise APIConnectionError(
            f"{call.method} {path}: the stream ended before [DONE]: the answer was cut off"
        )

    def stream_events(self, path: str, json: Any) -> Stream[dict[str, Any]]:
        """POST and yield each server-sent event's JSON data until `[DONE]`. Only a 429 (answered
        before any work) is retried: a lost stream is not replayed, it may have been charged."""
        return self._events(path, json, dict)

    def _pages(self, path: str, params: Mapping[str, Any], parse: Callable[[dict[str, Any]], T]) -> Stream[T]:
        def page_of(body: Any) -> tuple[list[T], dict[str, str] | None]:
            return [parse(row) for row in body.get("data") or []], _next_page(body)

        page: dict[str, Any] = {"cursor": None}
        while True:
            rows, after = yield from self._fetch("GET", path, page_of, params={**params, **page})
            for row in rows:
                yield Emit(row)
            if after is None:
                return
            page = after

    def paginate(self, path: str, params: Mapping[str, Any]) -> Stream[dict[str, Any]]:
        """Every row of a cursor-paginated listing, fetching the next page as it is consumed:
        a native listing by its `next_cursor`, a vendor-compatible one (`/v1/compat/v1/...`)
        by its `has_more` and `last_id`."""
        return self._pages(path, params, dict)

    def _poll(
        self,
        get: Callable[[], Plan[T]],
        pending: Callable[[T], str | None],
        poll_interval: float,
        timeout: float | None,
    ) -> Plan[T]:
        """Poll until `pending` (what is still waited for, e.g. "batch_1 still running") is None;
        `WaitTimeoutError` after `timeout` seconds (None: no limit)."""
        started = self._client.monotonic()
        while True:
            value = yield from get()
            still = pending(value)
            if still is None:
                return value
            if timeout is None:
                yield Sleep(poll_interval)
                continue
            left = timeout - (self._client.monotonic() - started)
            if left <= 0:
                raise WaitTimeoutError(f"{still} after {timeout} s")
            yield Sleep(min(poll_interval, left))  # a last look when the time is up

    # -- account ---------------------------------------------------------------------------

    def account(self) -> Plan[dict[str, Any]]:
        """`GET /v1/auth/account`: the key's organization (`org`) and plan, as sent."""
        return (yield from self._fetch("GET", "/v1/auth/account", _account_of))

    def usage(self) -> Plan[models.Usage]:
        return (yield from self._fetch("GET", "/v1/usage", models.Usage.from_dict))

    def billing_controls(self) -> Plan[models.BillingControls]:
        """`GET /v1/billing/controls` (changing them needs a user session: the console)."""
        controls = _in("controls", models.BillingControls.from_dict)
        return (yield from self._fetch("GET", "/v1/billing/controls", controls))

    # -- account settings, retention (docs/auth.md, docs/billing-controls.md) -------------

    def settings_update_profile(
        self, *, display_name: str | None = None, full_name: str | None = None
    ) -> Plan[models.Account]:
        """`PUT /v1/auth/account/profile`: the org's display name (owner, admin) and the key's
        user's own full name ("" clears it; a key with no user: 403 `user_session_required`).
        None leaves a name as it is."""
        body = _given(display_name=display_name, full_name=full_name)
        path = "/v1/auth/account/profile"
        return (yield from self._fetch("PUT", path, models.Account.from_dict, json=body))

    def settings_set_delivery_webhook(self, url: str, secret: str) -> Plan[models.DeliveryWebhook]:
        """`PUT /v1/auth/account/delivery-webhook`: the org's default webhook (a public https
        URL) and the secret its events are signed with (stored sealed, never returned)."""
        body = {"url": url, "secret": secret}
        path = "/v1/auth/account/delivery-webhook"
        return (yield from self._fetch("PUT", path, models.DeliveryWebhook.from_dict, json=body))

    def retention_get(self) -> Plan[models.RetentionSettings]:
        """`GET /v1/retention-settings`: how long the org's result files are kept."""
        return (yield from self._fetch("GET", "/v1/retention-settings", models.RetentionSettings.from_dict))

    def retention_update(
        self,
        *,
        retention_tier: str | None = None,
        extended_days: int | None = None,
        never_charge: bool | None = None,
    ) -> Plan[models.RetentionSettings]:
        """`PUT /v1/retention-settings` (owner, admin): only the fields given change.
        `retention_tier` `grace_only`, `extended_fixed` (with `extended_days`, 1-3650) or
        `until_deleted`; `never_charge=True` forces `grace_only`."""
        body = _given(retention_tier=retention_tier, extended_days=extended_days, never_charge=never_charge)
        return (
            yield from self._fetch(
                "PUT", "/v1/retention-settings", models.RetentionSettings.from_dict, json=body
            )
        )

    # -- delivery targets (docs/delivery-targets.md) ---------------------------------------

    def delivery_target_list(self) -> Plan[models.DeliveryTargetList]:
        """`GET /v1/delivery-targets`: the org's targets (never a secret) and `limit`."""
        return (yield from self._fetch("GET", "/v1/delivery-targets", models.DeliveryTargetList.from_dict))

    def delivery_target_create(
        self, *, bucket: str, access_key_id: str, secret_access_key: str, **options: Unpack[TargetOptions]
    ) -> Plan[models.DeliveryTarget]:
        """`POST /v1/delivery-targets` (owner, admin): a bucket to push finished batches'
        artifacts to; `region` is required without `endpoint_url` (AWS S3). The secret access key
        is write-only. The route takes no idempotency key, so a network error or 5xx is not
        retried (a repeat would register a second target): list the targets to check."""
        keys = {"access_key_id": access_key_id, "secret_access_key": secret_access_key}
        body = {"bucket": bucket, **keys, **options}
        build = models.DeliveryTarget.from_dict
        return (yield from self._fetch("POST", "/v1/delivery-targets", build, json=body, repeatable=False))

    def delivery_target_get(self, target_id: str) -> Plan[models.DeliveryTarget]:
        path = f"/v1/delivery-targets/{_segment(target_id)}"
        return (yield from self._fetch("GET", path, models.DeliveryTarget.from_dict))

    def delivery_target_update(
        self, target_id: str, /, **changes: Unpack[TargetChanges]
    ) -> Plan[models.DeliveryTarget]:
        """`PATCH /v1/delivery-targets/{id}` (owner, admin): only the fields given change
        (`name=None` goes back to the bucket's name); a new `secret_access_key` comes with its
        `access_key_id`. The same change applied twice is the same target: retried like a PUT."""
        path = f"/v1/delivery-targets/{_segment(target_id)}"
        return (yield from self._fetch("PATCH", path, models.DeliveryTarget.from_dict, json=dict(changes)))

    def delivery_target_delete(self, target_id: str) -> Plan[models.DeliveryTargetDeleted]:
        """`DELETE /v1/delivery-targets/{id}` (owner, admin); the objects already delivered
        stay. When a retry (the first answer lost) is answered 404 `delivery_target_not_found`,
        the lost attempt removed it: that is the answer. A 404 to the first attempt raises."""
        path = f"/v1/delivery-targets/{_segment(target_id)}"
        build = models.DeliveryTargetDeleted.from_dict
        gone = _answered(NotFoundError, "delivery_target_not_found")
        deleted = yield from self._done_unless_lost("DELETE", path, build, gone)
        return deleted if deleted is not None else models.DeliveryTargetDeleted(id=target_id, deleted=True)

    def delivery_target_test(self, target_id: str) -> Plan[models.TargetTest]:
        """`POST /v1/delivery-targets/{id}/test` (owner, admin): write a small sample object
        with the target's credentials. A refusal by the bucket is an answer (`ok` False, its
        `error`), not an error. Writing another sample is harmless, so it is retried."""
        path = f"/v1/delivery-targets/{_segment(target_id)}/test"
        return (yield from self._fetch("POST", path, models.TargetTest.from_dict))

    # -- schedules (docs/schedules.md) -----------------------------------------------------

    def schedule_list(self, *, page_size: int | None = None) -> Stream[models.Schedule]:
        """`GET /v1/schedules`: the org's schedules, oldest first, across all pages
        (`page_size` 1-100)."""
        return self._pages("/v1/schedules", {"limit": page_size}, models.Schedule.from_dict)

    def schedule_create(
        self, *, name: str, expression: str, input_source: dict[str, Any], **options: Unpack[ScheduleOptions]
    ) -> Plan[models.Schedule]:
        """`POST /v1/schedules` (owner, admin, member): each fire time of `expression` (in
        `time_zone`) creates a batch from `input_source`. The route takes no idempotency key,
        so a network error or 5xx is not retried (a repeat would make a second schedule): list
        the schedules to check."""
        body = {"name": name, "expression": expression, "input_source": input_source, **options}
        build = models.Schedule.from_dict
        return (yield from self._fetch("POST", "/v1/schedules", build, json=body, repeatable=False))

    def schedule_get(self, schedule_id: str) -> Plan[models.Schedule]:
        return (yield from self._fetch("GET", _schedule_path(schedule_id), models.Schedule.from_dict))

    def schedule_update(
        self, schedule_id: str, /, **changes: Unpack[ScheduleChanges]
    ) -> Plan[models.Schedule]:
        """`PATCH /v1/schedules/{id}`: only the fields given change, as a new version. The
        same change applied twice finds it made (no second version): retried like a PUT."""
        path = _schedule_path(schedule_id)
        return (yield from self._fetch("PATCH", path, models.Schedule.from_dict, json=dict(changes)))

    def schedule_pause(self, schedule_id: str) -> Plan[models.Schedule]:
        """`POST /v1/schedules/{id}/pause`: no fire until resumed (idempotent)."""
        path = f"{_schedule_path(schedule_id)}/pause"
        return (yield from self._fetch("POST", path, models.Schedule.from_dict))

    def schedule_resume(self, schedule_id: str) -> Plan[models.Schedule]:
        """`POST /v1/schedules/{id}/resume`: fires again from the next fire time (idempotent)."""
        path = f"{_schedule_path(schedule_id)}/resume"
        return (yield from self._fetch("POST", path, models.Schedule.from_dict))

    def schedule_delete(self, schedule_id: str) -> Plan[models.ScheduleDeleted]:
        """`DELETE /v1/schedules/{id}`: the schedule, its trigger and its history go; the
        batches it made stay. When a retry (the first answer lost) is answered 404
        `schedule_not_found`, the lost attempt deleted it: that is the answer. A 404 to the
        first attempt raises."""
        path = _schedule_path(schedule_id)
        gone = _answered(NotFoundError, "schedule_not_found")
        deleted = yield from self._done_unless_lost("DELETE", path, models.ScheduleDeleted.from_dict, gone)
        return deleted if deleted is not None else models.ScheduleDeleted(id=schedule_id, deleted=True)

    def schedule_runs(self, schedule_id: str, *, page_size: int | None = None) -> Stream[models.ScheduleRun]:
        """`GET /v1/schedules/{id}/runs`: one run per fire time, newest first, across all pages
        (`page_size` 1-100)."""
        path = f"{_schedule_path(schedule_id)}/runs"
        return self._pages(path, {"limit": page_size}, models.ScheduleRun.from_dict)

    def schedule_versions(
        self, schedule_id: str, *, page_size: int | None = None
    ) -> Stream[models.ScheduleVersion]:
        """`GET /v1/schedules/{id}/versions`: every version, newest first (`page_size` 1-100)."""
        path = f"{_schedule_path(schedule_id)}/versions"
        return self._pages(path, {"limit": page_size}, models.ScheduleVersion.from_dict)

    def schedule_benchmarks(self, schedule_id: str, version: int) -> Plan[models.RegressionRunList]:
        """`GET /v1/schedules/{id}/versions/{v}/benchmarks`: the version's golden-set runs."""
        path = f"{_schedule_path(schedule_id)}/versions/{int(version)}/benchmarks"
        return (yield from self._fetch("GET", path, models.RegressionRunList.from_dict))

    def schedule_regress(self, schedule_id: str) -> Plan[models.RegressionRun]:
        """`POST /v1/schedules/{id}/regression-runs`: run the golden set now on every candidate
        lane, paid at direct prices. Not retried after a network error or 5xx (a repeat would
        run, and charge, again): read the version's benchmarks to check."""
        path = f"{_schedule_path(schedule_id)}/regression-runs"
        return (yield from self._fetch("POST", path, models.RegressionRun.from_dict, repeatable=False))

    # -- presets (docs/presets.md) ---------------------------------------------------------

    def preset_create(self, *, name: str, **template: Unpack[PresetFields]) -> Plan[models.Preset]:
        """`POST /v1/presets`: a template of work at version 1. Not repeated after a network
        error or 5xx (a repeat of a create made answers 409 `preset_exists`): get it to check."""
        body = {"name": name, **template}
        return (
            yield from self._fetch(
                "POST", "/v1/presets", models.Preset.from_dict, json=body, repeatable=False
            )
        )

    def preset_list(
        self, *, include_archived: bool | None = None, page_size: int | None = None
    ) -> Stream[models.Preset]:
        """`GET /v1/presets`: the org's presets by name, across all pages (archived ones
        with `include_archived=True`)."""
        params = {"include_archived": _flag(include_archived), "limit": page_size}
        return self._pages("/v1/presets", params, models.Preset.from_dict)

    def preset_get(self, name: str) -> Plan[models.Preset]:
        return (yield from self._fetch("GET", _preset_path(name), models.Preset.from_dict))

    def preset_replace(self, name: str, /, **template: Unpack[PresetFields]) -> Plan[models.Preset]:
        """`PUT /v1/presets/{name}`: the next version, the whole template again (fields left
        out are dropped). Each save is a version, so it is not repeated after a network error
        or 5xx: get the preset to check."""
        path = _preset_path(name)
        return (
            yield from self._fetch(
                "PUT", path, models.Preset.from_dict, json=dict(template), repeatable=False
            )
        )

    def preset_update(self, name: str, /, **changes: Unpack[PresetFields]) -> Plan[models.Preset]:
        """`PATCH /v1/presets/{name}`: the next version, the fields given over the latest
        (`parameters` and `routing` merge key by key, a None value removes a key). Not
        repeated after a network error or 5xx, as `replace`."""
        path = _preset_path(name)
        return (
            yield from self._fetch(
                "PATCH", path, models.Preset.from_dict, json=dict(changes), repeatable=False
            )
        )

    def preset_archive(self, name: str) -> Plan[models.Preset]:
        """`DELETE /v1/presets/{name}`: archived (its versions and benchmarks stay readable).
        When a retry (the first answer lost) is answered 409 `preset_archived`, the lost
        attempt archived it: the preset is read and returned."""
        path = _preset_path(name)
        archived = _answered(ConflictError, "preset_archived")
        done = yield from self._done_unless_lost("DELETE", path, models.Preset.from_dict, archived)
        return done if done is not None else (yield from self.preset_get(name))

    def preset_versions(self, name: str, *, page_size: int | None = None) -> Stream[models.PresetVersion]:
        """`GET /v1/presets/{name}/versions`: every version, newest first."""
        path = f"{_preset_path(name)}/versions"
        return self._pages(path, {"limit": page_size}, models.PresetVersion.from_dict)

    def preset_version(self, name: str, version: int) -> Plan[models.PresetVersion]:
        path = f"{_preset_path(name)}/versions/{int(version)}"
        return (yield from self._fetch("GET", path, models.PresetVersion.from_dict))

    def preset_benchmarks(self, name: str, version: int) -> Plan[models.PresetRegressionRunList]:
        """`GET /v1/presets/{name}/versions/{v}/benchmarks`: the version's golden-set runs."""
        path = f"{_preset_path(name)}/versions/{int(version)}/benchmarks"
        return (yield from self._fetch("GET", path, models.PresetRegressionRunList.from_dict))

    def preset_regress(self, name: str, *, version: int | None = None) -> Plan[models.PresetRegressionRun]:
        """`POST /v1/presets/{name}/regression-runs`: run the golden set of the latest version
        (or `version`) now on every candidate lane, paid at direct prices. Not repeated after a
        network error or 5xx (a repeat would run, and charge, again)."""
        path = f"{_preset_path(name)}/regression-runs"
        params = {"version": version}
        build = models.PresetRegressionRun.from_dict
        return (yield from self._fetch("POST", path, build, params=params, repeatable=False))

    # -- work orders (docs/work-orders.md) -------------------------------------------------

    def work_order_create(
        self,
        *,
        name: str | None = None,
        client_reference: str | None = None,
        metadata: dict[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> Plan[models.WorkOrder]:
        """`POST /v1/work-orders`: a new, empty work order. It carries one `Idempotency-Key`
        (yours, or one generated per call) on every attempt, so it is retried like
        `batches.create`: a repeat answers with the work order the first attempt made."""
        body = _given(name=name, client_reference=client_reference, metadata=metadata)
        headers = {"Idempotency-Key": idempotency_key or new_idempotency_key()}
        build = models.WorkOrder.from_dict
        return (yield from self._fetch("POST", "/v1/work-orders", build, json=body, headers=headers))

    def work_order_list(
        self, *, status: str | None = None, client_reference: str | None = None, page_size: int | None = None
    ) -> Stream[models.WorkOrder]:
        """`GET /v1/work-orders`: newest first, across all pages; `status` and
        `client_reference` filter (`page_size` 1-100)."""
        params = {"status": status, "client_reference": client_reference, "limit": page_size}
        return self._pages("/v1/work-orders", params, models.WorkOrder.from_dict)

    def work_order_get(self, work_order_id: str) -> Plan[models.WorkOrder]:
        return (yield from self._fetch("GET", _work_order_path(work_order_id), models.WorkOrder.from_dict))

    def work_order_update(
        self,
        work_order_id: str,
        /,
        *,
        name: str | None = None,
        metadata: dict[str, str] | None = None,
        closed: bool | None = None,
    ) -> Plan[models.WorkOrder]:
        """`PATCH /v1/work-orders/{id}`: only the fields given change (None leaves a field as
        it is); `closed=True` closes it to new members. The same change applied twice is the
        same work order: retried like a PUT."""
        body = _given(name=name, metadata=metadata, closed=closed)
        path = _work_order_path(work_order_id)
        return (yield from self._fetch("PATCH", path, models.WorkOrder.from_dict, json=body))

    def work_order_add_member(
        self, work_order_id: str, *, batch_id: str | None = None, chat_job_id: str | None = None
    ) -> Plan[models.WorkOrderMemberAdded]:
        """`POST /v1/work-orders/{id}/members`: attach an existing batch (`batch_id`) or queued
        chat job (`chat_job_id`) of the org. Not repeated after a network error or 5xx: a
        repeat of an attach that was made answers 409 `already_in_work_order` (its
        `details.work_order_id` this one); list the members to check."""
        body = _given(batch_id=batch_id, chat_job_id=chat_job_id)
        path = f"{_work_order_path(work_order_id)}/members"
        build = models.WorkOrderMemberAdded.from_dict
        return (yield from self._fetch("POST", path, build, json=body, repeatable=False))

    def work_order_members(
        self, work_order_id: str, *, page_size: int | None = None
    ) -> Stream[models.WorkOrderMember]:
        """`GET /v1/work-orders/{id}/members`: oldest batch first, across all pages."""
        path = f"{_work_order_path(work_order_id)}/members"
        return self._pages(path, {"limit": page_size}, models.WorkOrderMember.from_dict)

    # -- feedback (docs/feedback.md) -------------------------------------------------------

    def feedback_send(
        self,
        *,
        rating: int,
        batch_id: str | None = None,
        customer_item_id: str | None = None,
        chat_completion_id: str | None = None,
        rating_scale: str | None = None,
        comment: str | None = None,
        labels: list[str] | None = None,
    ) -> Plan[models.Feedback]:
        """`POST /v1/feedback`: rate a batch item (`batch_id` and `customer_item_id`) or a chat
        completion (`chat_completion_id`), on `rating_scale` `thumbs` (-1 or 1, the default) or
        `stars` (1-5). An author has one feedback per target, so sending again replaces it:
        a repeat is the same feedback, and it is retried like a PUT."""
        target: dict[str, str]
        if chat_completion_id is not None:
            target = {"type": "chat_completion", "id": chat_completion_id}
        else:
            target = {
                "type": "batch_item",
                "batch_id": str(batch_id),
                "customer_item_id": str(customer_item_id),
            }
        body = {
            "target": target,
            "rating": rating,
            **_given(rating_scale=rating_scale, comment=comment, labels=labels),
        }
        return (yield from self._fetch("POST", "/v1/feedback", models.Feedback.from_dict, json=body))

    def feedback_list(
        self, *, page_size: int | None = None, **filters: Unpack[FeedbackFilters]
    ) -> Stream[models.Feedback]:
        """`GET /v1/feedback`: the org's feedback, newest first, across all pages; filtered
        by `target_type`, `batch_id`, `model`, `provider`, `rating_scale`."""
        return self._pages("/v1/feedback", {**filters, "limit": page_size}, models.Feedback.from_dict)

    def feedback_summary(self, *, period: str | None = None) -> Plan[models.FeedbackSummary]:
        """`GET /v1/feedback/summary`: the current UTC month (or `period="daily"`: day)."""
        params = {"period": period}
        return (
            yield from self._fetch(
                "GET", "/v1/feedback/summary", models.FeedbackSummary.from_dict, params=params
            )
        )

    # -- the route policy (docs/routing-policy.md) -----------------------------------------

    def route_policy(self) -> Plan[models.RoutePolicy]:
        """`GET /v1/routing/policy`: the org's policy (the defaults, version 0, until saved)."""
        return (yield from self._fetch("GET", "/v1/routing/policy", _policy_of))

    def route_policy_update(
        self, *, version: int | None = None, **fields: Unpack[PolicyFields]
    ) -> Plan[models.RoutePolicy]:
        """`PUT /v1/routing/policy` (owner, admin): the whole policy, the fields left out at
        their defaults. With `version` (the one read), the save is refused with 409
        `policy_version_mismatch` unless the policy is still at it, and is not repeated after
        a network error or 5xx (the lost attempt may have saved: read the policy to check);
        without, it saves over whatever is stored, and a repeat of the same body changes
        nothing, so it is retried like any PUT."""
        body = dict(fields) if version is None else {**fields, "version": version}
        return (
            yield from self._fetch(
                "PUT", "/v1/routing/policy", _policy_of, json=body, repeatable=version is None
            )
        )

    def route_policy_history(self, *, page_size: int | None = None) -> Stream[models.RoutePolicyChange]:
        """`GET /v1/routing/policy/history`: every save, newest first (`page_size` 1-200)."""
        path = "/v1/routing/policy/history"
        return self._pages(path, {"limit": page_size}, models.RoutePolicyChange.from_dict)

    # -- billing (docs/billing-controls.md, docs/payments.md) ------------------------------

    def billing_audit(self, *, page_size: int | None = None) -> Stream[models.AuditEntry]:
        """`GET /v1/billing/controls/audit`: every change of the billing controls, newest
        first, across all pages (`page_size` 1-200, the service's default 50)."""
        path = "/v1/billing/controls/audit"
        return self._pages(path, {"limit": page_size}, models.AuditEntry.from_dict)

    def billing_events(self, *, page_size: int | None = None) -> Stream[models.BillingEvent]:
        """`GET /v1/billing/events`: the billing alert events, newest first, across all pages
        (docs/billing-alerts.md), each with its webhook delivery."""
        return self._pages("/v1/billing/events", {"limit": page_size}, models.BillingEvent.from_dict)

    def auto_topup_get(self) -> Plan[models.AutoTopup]:
        """`GET /v1/billing/auto-topup`: the settings (the defaults, `configured` False, until
        the first save) and their `status`."""
        return (yield from self._fetch("GET", "/v1/billing/auto-topup", _auto_topup_of))

    def auto_topup_update(
        self,
        *,
        enabled: bool | None = None,
        trigger_balance: Usd | None = None,
        amount: Usd | None = None,
        monthly_cap: Usd | None = None,
    ) -> Plan[models.AutoTopup]:
        """`PUT /v1/billing/auto-topup` (`billing:manage`): only the fields given change. USD
        amounts as a number, a decimal string, a `Decimal` or a `Money`. Enabling needs a saved
        card (400 `payment_method_required`); saving clears the failure back-off."""
        body = _given(
            enabled=enabled,
            trigger_balance=_usd(trigger_balance),
            amount=_usd(amount),
            monthly_cap=_usd(monthly_cap),
        )
        return (yield from self._fetch("PUT", "/v1/billing/auto-topup", _auto_topup_of, json=body))

    def auto_topup_attempts(self, *, page_size: int | None = None) -> Stream[models.TopupAttempt]:
        """`GET /v1/billing/auto-topup/attempts`: every attempt, newest first, across all pages
        (`page_size` 1-100)."""
        path = "/v1/billing/auto-topup/attempts"
        return self._pages(path, {"limit": page_size}, models.TopupAttempt.from_dict)

    # -- catalog (docs/catalog.md; public) -------------------------------------------------

    def catalog_models(
        self,
        *,
        operation: str | None = None,
        provider: str | None = None,
        privacy_tier: str | None = None,
        sla_tier: str | None = None,
        runtime_capability: str | None = None,
        hosted_tool: str | None = None,
        q: str | None = None,
    ) -> Plan[models.CatalogModelList]:
        """`GET /v1/catalog/models`: the models every filter given matches (lane filters on one
        same lane; `q` searches title, summary, id, description and tags)."""
        params = {
            "operation": operation,
            "provider": provider,
            "privacy_tier": privacy_tier,
            "sla_tier": sla_tier,
            "runtime_capability": runtime_capability,
            "hosted_tool": hosted_tool,
            "q": q,
        }
        build = models.CatalogModelList.from_dict
        return (yield from self._fetch("GET", "/v1/catalog/models", build, params=params))

    def catalog_model(self, model_id: str) -> Plan[models.CatalogModel]:
        """`GET /v1/catalog/models/{id}`: one model by its exact id (slashes included)."""
        path = f"/v1/catalog/models/{_segment(model_id, safe='/')}"
        return (yield from self._fetch("GET", path, _in("model", models.CatalogModel.from_dict)))

    def catalog_workflow_products(self) -> Plan[models.WorkflowProductList]:
        path = "/v1/catalog/workflow-products"
        return (yield from self._fetch("GET", path, models.WorkflowProductList.from_dict))

    def catalog_workflow_product(self, slug: str) -> Plan[models.WorkflowProduct]:
        path = f"/v1/catalog/workflow-products/{_segment(slug)}"
        return (yield from self._fetch("GET", path, _in("product", models.WorkflowProduct.from_dict)))

    def catalog_providers(self) -> Plan[list[models.Provider]]:
        """`GET /v1/providers`: the provider directory."""
        providers = _in("providers", models.each(models.Provider.from_dict))
        return (yield from self._fetch("GET", "/v1/providers", providers))

    def catalog_provider(self, slug: str) -> Plan[models.Provider]:
        path = f"/v1/providers/{_segment(slug)}"
        return (yield from self._fetch("GET", path, _in("provider", models.Provider.from_dict)))

    def catalog_fees(self) -> Plan[models.FeeSchedule]:
        """`GET /v1/pricing/fees`: the fee schedule quotes and settlement use."""
        return (yield from self._fetch("GET", "/v1/pricing/fees", models.FeeSchedule.from_dict))

    # -- quotes ----------------------------------------------------------------------------

    def quote_model(self, /, items: list[dict[str, Any]] | None = None, **options: Any) -> Plan[models.Quote]:
        """`POST /v1/quotes/model`: free, reserves nothing; `options` are the routing fields
        (`routing_mode`, `sla_tier`, `privacy_tier`, `required_tools`, ...), or
        `input_file_id` instead of `items`."""
        body = {"items": items, **options} if items is not None else options
        return (yield from self._fetch("POST", "/v1/quotes/model", models.Quote.from_dict, json=body))

    def quote_workflow(self, /, **body: Any) -> Plan[models.Quote]:
        """`POST /v1/quotes/workflow`: the quote of a workflow's steps (free, reserves nothing)."""
        return (yield from self._fetch("POST", "/v1/quotes/workflow", models.Quote.from_dict, json=body))

    # -- batches ---------------------------------------------------------------------------

    def batch_create(self, /, *, idempotency_key: str | None = None, **body: Any) -> Plan[models.Batch]:
        """`POST /v1/batches` with `quote_id`, `items` (or `input_file_id`), `webhook`, ...

        One `Idempotency-Key` (generated here when not given) is sent on every retry with the
        same body, so a retried create returns the original batch and never a second one."""
        headers = {"Idempotency-Key": idempotency_key or new_idempotency_key()}
        return (yield from self._fetch("POST", "/v1/batches", _batch_of, json=body, headers=headers))

    def batch_get(
        self, batch_id: str, *, include_details: bool = False, include_billing_receipt: bool = False
    ) -> Plan[models.Batch]:
        """The batch; `include_details`: its full view (work order, workflow contract, lane
        statuses, webhook and bucket delivery states), in `Batch.raw`;
        `include_billing_receipt`: its lane statuses too, and once settled its receipt in
        `Batch.billing_receipt`, in the same answer (`batch_receipt` reads the receipt alone)."""
        asked = {"include_details": include_details, "include_billing_receipt": include_billing_receipt}
        params = {name: "true" for name, wanted in asked.items() if wanted} or None
        return (
            yield from self._fetch(
                "GET", f"/v1/batches/{_segment(batch_id)}", _batch_with_receipt, params=params
            )
        )

    def batch_redeliver(self, batch_id: str) -> Plan[models.BucketDelivery]:
        """Push the finished batch's artifacts to every delivery target enabled now, in a new
        round (202). Not repeated after a lost answer: call again, and a 409
        `delivery_in_progress` (`ConflictError`) says the first one started it."""
        path = f"/v1/batches/{_segment(batch_id)}/redeliver"
        return (yield from self._fetch("POST", path, _delivery_of, json={}, repeatable=False))

    def batch_webhooks(self, batch_id: str) -> Plan[list[models.WebhookDelivery]]:
        """The batch's webhook deliveries (status, attempts, the receiver's last answer)."""
        path = f"/v1/batches/{_segment(batch_id)}/webhooks"
        return (yield from self._fetch("GET", path, _webhook_deliveries_of))

    def batch_list(self, *, state: str | None = None, page_size: int | None = None) -> Stream[models.Batch]:
        """Every batch (newest first), across all pages."""
        return self._pages("/v1/batches", {"state": state, "limit": page_size}, models.Batch.from_dict)

    def batch_items(
        self, batch_id: str, *, status: str | None = None, page_size: int | None = None
    ) -> Stream[models.Item]:
        params = {"status": status, "limit": page_size}
        return self._pages(f"/v1/batches/{_segment(batch_id)}/items", params, models.Item.from_dict)

    def batch_results(
        self, batch_id: str, *, body_format: str | None = None, page_size: int | None = None
    ) -> Stream[models.ResultRow]:
        params = {"body_format": body_format, "limit": page_size}
        return self._pages(f"/v1/batches/{_segment(batch_id)}/results", params, models.ResultRow.from_dict)

    def batch_cancel(self, batch_id: str, *, reason: str | None = None) -> Plan[models.Batch]:
        """Cancel the batch. When a retry (the first answer lost: a network error or a 5xx)
        is refused with 409 `batch_not_cancellable` as `canceled`, the lost attempt canceled
        it: the batch is read and returned. A 409 to the first attempt raises `ConflictError`."""
        body = {"reason": reason} if reason else None

        def canceled(exc: APIError) -> bool:
            return (
                isinstance(exc, ConflictError)
                and exc.code == "batch_not_cancellable"
                and exc.details.get("state") == "canceled"
            )

        path = f"/v1/batches/{_segment(batch_id)}/cancel"
        batch = yield from self._done_unless_lost("POST", path, _batch_of, canceled, json=body)
        return batch if batch is not None else (yield from self.batch_get(batch_id))

    def batch_retry(self, batch_id: str) -> Plan[models.RetriedBatch]:
        """Create a new batch from the failed and canceled items (beta). Repeated on a network
        error or 5xx like `batch_create`: the service keys a retry by its source batch and items,
        so a repeat answers with the batch the first attempt created (docs/batches.md, "Retry")."""
        path = f"/v1/batches/{_segment(batch_id)}/retry"
        return (yield from self._fetch("POST", path, models.RetriedBatch.from_dict))

    def batch_artifact_url(self, batch_id: str) -> Plan[str]:
        """A short-lived signed URL of the full results JSONL."""
        return (
            yield from self._fetch(
                "GET", f"/v1/batches/{_segment(batch_id)}/artifact-url", lambda body: str(body["url"])
            )
        )

    def batch_receipt(self, batch_id: str) -> Plan[models.BillingReceipt]:
        path = f"/v1/batches/{_segment(batch_id)}/billing-receipt"
        return (yield from self._fetch("GET", path, lambda body: _receipt_of(body, batch_id)))

    def batch_download_artifact(self, batch_id: str, out: BinaryIO) -> Plan[int]:
        """Stream the full results artifact (its signed URL) into `out`; return the byte count.
        Not resumed after a network error: call again (a new URL is signed each time)."""
        url = yield from self.batch_artifact_url(batch_id)
        written = 0
        try:
            response = yield Open(Call("GET", url))
            if response.status_code >= 400:
                yield Read(response, "body")
                raise error_from_response(response, "GET", url)
            while (chunk := (yield Read(response, "chunk"))) is not None:
                out.write(chunk)
                written += len(chunk)
        except UNSENDABLE as exc:
            raise unsendable(Call("GET", url), exc) from None
        except httpx.TransportError as exc:
            raise APIConnectionError(f"GET artifact of {batch_id}: {type(exc).__name__}: {exc}") from exc
        return written

    def batch_wait(
        self,
        batch_id: str,
        *,
        poll_interval: float = 5.0,
        timeout: float | None = None,
        on_progress: Callable[[models.Batch], None] | None = None,
    ) -> Plan[models.Batch]:
        """Poll until the batch is settled (`Batch.is_settled`: terminal, its work in flight
        ended, results and receipt written) and return it; `on_progress` sees every poll.
        Raises `WaitTimeoutError` after `timeout` seconds (None: no limit)."""

        def poll() -> Plan[models.Batch]:
            batch = yield from self.batch_get(batch_id)
            if on_progress is not None:
                on_progress(batch)
            return batch

        def pending(batch: models.Batch) -> str | None:
            if batch.is_settled:
                return None
            if batch.is_terminal:  # canceled, failed or expired: dispatched work still ending
                return f"{batch_id} {batch.state}, not settled yet"
            return f"{batch_id} still {batch.state}"

        return self._poll(poll, pending, poll_interval, timeout)

    # -- chat ------------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any], build: Callable[[Any], T]) -> Plan[T]:
        """A direct completion or a queued job: charged, so only a 429 is retried."""
        return self._fetch("POST", "/v1/chat/completions", build, json=body, repeatable=False)

    def chat_create(
        self, /, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> Plan[models.ChatCompletion]:
        body = {"model": model, "messages": messages, **options, "stream": False}
        return (yield from self._chat(body, models.ChatCompletion.from_dict))

    def chat_stream(
        self, /, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> Stream[models.ChatCompletionChunk]:
        body = {"model": model, "messages": messages, **options, "stream": True}
        return self._events("/v1/chat/completions", body, models.ChatCompletionChunk.from_dict)

    def chat_queue(
        self, /, model: str, messages: list[dict[str, Any]], **options: Any
    ) -> Plan[models.ChatJob]:
        body = {"model": model, "messages": messages, "batch": True, **options}
        return (yield from self._chat(body, models.ChatJob.from_dict))

    def chat_job(self, job_id: str) -> Plan[models.ChatJob]:
        """`GET /v1/chat/completions/{job_id}`: a queued chat job; `result` once completed."""
        return (
            yield from self._fetch(
                "GET", f"/v1/chat/completions/{_segment(job_id)}", models.ChatJob.from_dict
            )
        )

    # -- files -----------------------------------------------------------------------------

    def file_upload(
        self,
        source: Source,
        *,
        filename: str | None = None,
        purpose: str | None = None,
        method: UploadMethod = "auto",
        on_progress: Progress | None = None,
        wait: bool = True,
        poll_interval: float = 2.0,
        timeout: float | None = None,
    ) -> Plan[models.File]:
        """Upload `source` (bytes or a path) and return the checked file (`processed`, or
        `error` with its line errors)."""
        data = upload_source(source, filename)
        if use_direct(method, data.size):
            return (yield from self.file_create(data, purpose=purpose, on_progress=on_progress))
        signed = yield from self.file_start_upload(filename=data.filename, size=data.size, purpose=purpose)
        if signed.multipart is None:
            yield from self.file_put(signed.upload, data, on_progress=on_progress)
            file = yield from self.file_complete(signed.file.id)
        else:
            try:
                etags = yield from self.file_put_parts(
                    signed.file.id, signed.multipart, data, on_progress=on_progress
                )
            except GeneratorExit:
                raise
            except BaseException:
                with contextlib.suppress(Exception):  # S3 drops the parts sent; the error is the answer
                    yield from self.file_cancel(signed.file.id)
                raise
            file = yield from self.file_complete(signed.file.id, etags)
        if not wait or file.status not in PENDING_STATUSES:
            return file
        return (yield from self.file_wait(file.id, poll_interval=poll_interval, timeout=timeout))

    def file_put_parts(
        self,
        file_id: str,
        plan: models.MultipartPlan,
        source: Source | UploadSource,
        *,
        on_progress: Progress | None = None,
    ) -> Plan[dict[int, str]]:
        """PUT every part of a multipart plan in turn (each retried on its own, signed again if
        its URL expired); the ETag of each part by number, for `complete`."""
        data = _local(source)
        etags: dict[int, str] = {}
        for part in plan.parts:
            etags[part.part_number] = yield from self._put_part(file_id, part, data, on_progress)
        return etags

    def _put_part(
        self, file_id: str, part: models.PartTarget, data: UploadSource, on_progress: Progress | None
    ) -> Plan[str]:
        def body() -> Iterator[bytes]:
            return data.part_chunks(part.offset, part.bytes, on_progress)

        headers = part_headers(part.bytes)
        call = Call("PUT", part.url, content=body, headers=headers)
        try:
            response = yield from self.exchange(call)
        except PermissionDeniedError:  # the URL expired: sign this part again, once
            fresh = (yield from self.file_part_urls(file_id, [part.part_number])).parts[0]
            call = Call("PUT", fresh.url, content=body, headers=headers)
            response = yield from self.exchange(call)
        etag = response.headers.get("etag")
        if not etag:
            raise unexpected(call.method, call.url, response, "no ETag header on an uploaded part")
        return str(etag)

    def file_part_urls(
        self, file_id: str, part_numbers: list[int] | None = None
    ) -> Plan[models.MultipartPlan]:
        """`POST /v1/files/{id}/parts`: fresh signed URLs (all parts by default)."""
        body = {"part_numbers": part_numbers} if part_numbers is not None else {}
        return (
            yield from self._fetch(
                "POST",
                f"/v1/files/{_segment(file_id)}/parts",
                lambda answer: models.MultipartPlan.from_dict(answer["multipart"]),
                json=body,
            )
        )

    def file_cancel(self, file_id: str) -> Plan[models.File]:
        """`POST /v1/files/{id}/cancel`: give up an upload in progress (idempotent)."""
        return (yield from self._fetch("POST", f"/v1/files/{_segment(file_id)}/cancel", _file_of))

    def file_wait(
        self, file_id: str, *, poll_interval: float = 2.0, timeout: float | None = None
    ) -> Plan[models.File]:
        """Poll until the file's checks are done (`processed` or `error`) and return it.
        Raises `WaitTimeoutError` after `timeout` seconds (None: no limit)."""

        def pending(file: models.File) -> str | None:
            return f"{file_id} still {file.status}" if file.status in PENDING_STATUSES else None

        return self._poll(lambda: self.file_get(file_id), pending, poll_interval, timeout)

    def file_create(
        self,
        source: Source | UploadSource,
        *,
        purpose: str | None = None,
        on_progress: Progress | None = None,
    ) -> Plan[models.File]:
        """`POST /v1/files`: a direct upload (the raw JSONL body, streamed). The route takes no
        idempotency key, so a network error or 5xx is not retried (a repeat may store the file
        twice); a 429 is, like a 503 the service says did nothing."""
        data = _local(source)
        call = Call(
            "POST",
            self._client.base_url + "/v1/files",
            params={"purpose": purpose} if purpose else None,
            content=lambda: data.chunks(on_progress),
            headers=self._client.headers(direct_headers(data)),
        )
        return read_model(call, (yield from self.exchange(call, repeatable=False)), _file_of)

    def file_start_upload(
        self, *, filename: str, size: int, content_type: str | None = None, purpose: str | None = None
    ) -> Plan[models.SignedUpload]:
        """`POST /v1/files/uploads`: a file in `uploading` and the signed URL to PUT it to. Not
        repeated after a network error or 5xx (no idempotency key: a repeat makes a second file)."""
        body = start_body(filename, size, content_type, purpose)
        return (
            yield from self._fetch(
                "POST", "/v1/files/uploads", models.SignedUpload.from_dict, json=body, repeatable=False
            )
        )

    def file_put(
        self,
        upload: models.UploadTarget,
        source: Source | UploadSource,
        *,
        on_progress: Progress | None = None,
    ) -> Plan[None]:
        """PUT the bytes to the signed URL with exactly its headers (never the API key)."""
        data = _local(source)
        headers = {**upload.headers, "Content-Length": str(data.size)}
        yield from self.exchange(
            Call(upload.method, upload.url, content=lambda: data.chunks(on_progress), headers=headers)
        )

    def file_complete(self, file_id: str, etags: dict[int, str] | None = None) -> Plan[models.File]:
        """`POST /v1/files/{id}/complete` (a multipart upload's parts by number -> ETag):
        small files come back checked, large ones `uploaded` (see `wait`); idempotent."""
        body = complete_body(etags) if etags is not None else None
        return (
            yield from self._fetch("POST", f"/v1/files/{_segment(file_id)}/complete", _file_of, json=body)
        )

    def file_get(self, file_id: str) -> Plan[models.File]:
        return (yield from self._fetch("GET", f"/v1/files/{_segment(file_id)}", _file_of))
