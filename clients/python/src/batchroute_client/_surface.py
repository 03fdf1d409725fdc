"""The public surface of both clients, declared once over the core's plans.

`Client` and `AsyncClient` differ only in how they run a plan: `Blocking` clients return its
value (`Iterator` for a listing), `Awaiting` clients a coroutine (`AsyncIterator`). The API
methods and resources (`quotes`, `batches`, `chat`, `files`, `settings`, `delivery_targets`,
`billing`, `catalog`) are written here once, as
descriptors over `Operations`: `Call(Operations.batch_get)` is `Client.batches.get`, with the
plan's own signature and documentation, typed per mode for the caller.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, NamedTuple, ParamSpec, TypeVar, overload

from batchroute_client._core import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    ClientBase,
    Operations,
    Plan,
    Stream,
)
from batchroute_client._retry import Backoff

P = ParamSpec("P")
T = TypeVar("T")
M = TypeVar("M")
H = TypeVar("H")
S = TypeVar("S")


class Blocking:
    """The mode of `Client`: a call returns its value."""


class Awaiting:
    """The mode of `AsyncClient`: a call returns a coroutine of its value."""


class Moded(Generic[M]):
    """Something whose API calls run on a client of mode `M` (the client or one of its resources)."""

    _client: Any


def _public_signature(op: Callable[..., Any]) -> inspect.Signature:
    """The plan's signature as the caller sees it: without `self`, no return annotation."""
    signature = inspect.signature(op)
    parameters = list(signature.parameters.values())[1:]
    return signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)


def _bound(
    obj: Moded[Any], op: Callable[..., Any], signature: inspect.Signature, loop: str
) -> Callable[..., Any]:
    client = obj._client

    @functools.wraps(op)
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(client, loop)(op(client.ops, *args, **kwargs))

    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


class Call(Generic[P, T]):
    """An API call: the plan `op` run by the client's loop to its value."""

    def __init__(self, op: Callable[Concatenate[Operations, P], Plan[T]]) -> None:
        self._op = op
        self._signature = _public_signature(op)

    @overload
    def __get__(self, obj: None, owner: type) -> Call[P, T]: ...
    @overload
    def __get__(self, obj: Moded[Blocking], owner: type) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: Moded[Awaiting], owner: type) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, obj: Moded[Any] | None, owner: type) -> Any:
        return self if obj is None else _bound(obj, self._op, self._signature, "run")


class Listing(Generic[P, T]):
    """A listing or stream: the plan `op`'s emitted values, produced as they are consumed."""

    def __init__(self, op: Callable[Concatenate[Operations, P], Stream[T]]) -> None:
        self._op = op
        self._signature = _public_signature(op)

    @overload
    def __get__(self, obj: None, owner: type) -> Listing[P, T]: ...
    @overload
    def __get__(self, obj: Moded[Blocking], owner: type) -> Callable[P, Iterator[T]]: ...
    @overload
    def __get__(self, obj: Moded[Awaiting], owner: type) -> Callable[P, AsyncIterator[T]]: ...
    def __get__(self, obj: Moded[Any] | None, owner: type) -> Any:
        return self if obj is None else _bound(obj, self._op, self._signature, "drive")


class Resource(Moded[M]):
    def __init__(self, client: Moded[M]) -> None:
        self._client = client


class Quotes(Resource[M]):
    model = Call(Operations.quote_model)
    workflow = Call(Operations.quote_workflow)


class Batches(Resource[M]):
    create = Call(Operations.batch_create)
    get = Call(Operations.batch_get)
    list = Listing(Operations.batch_list)
    items = Listing(Operations.batch_items)
    results = Listing(Operations.batch_results)
    cancel = Call(Operations.batch_cancel)
    retry = Call(Operations.batch_retry)
    artifact_url = Call(Operations.batch_artifact_url)
    receipt = Call(Operations.batch_receipt)
    redeliver = Call(Operations.batch_redeliver)
    webhooks = Call(Operations.batch_webhooks)
    download_artifact = Call(Operations.batch_download_artifact)
    wait = Call(Operations.batch_wait)


class Chat(Resource[M]):
    """Chat completions: direct (`create`, `stream`) or queued as a chat job (`queue`).

    A direct request is charged, so it is not repeated after a network error or a 5xx (only
    a 429 is retried); a queued one is a batch of one item, read with `client.chat_job(id)`."""

    create = Call(Operations.chat_create)
    stream = Listing(Operations.chat_stream)
    queue = Call(Operations.chat_queue)


class Files(Resource[M]):
    """Model-input JSONL files (docs/files.md). `upload` picks the way by size: a direct
    upload up to 4 MiB, else the signed URL (up to 2 GiB; in parts above 64 MiB, then waits
    for `processed`), reporting bytes sent to `on_progress(sent, total)`; a retried attempt
    reports again from 0."""

    upload = Call(Operations.file_upload)
    put_parts = Call(Operations.file_put_parts)
    part_urls = Call(Operations.file_part_urls)
    cancel = Call(Operations.file_cancel)
    wait = Call(Operations.file_wait)
    create = Call(Operations.file_create)
    start_upload = Call(Operations.file_start_upload)
    put = Call(Operations.file_put)
    complete = Call(Operations.file_complete)
    get = Call(Operations.file_get)


class Settings(Resource[M]):
    """The account's profile and default delivery webhook (docs/auth.md), and result retention
    (docs/billing-controls.md). The webhook's secret is sent, never shown or returned."""

    update_profile = Call(Operations.settings_update_profile)
    set_delivery_webhook = Call(Operations.settings_set_delivery_webhook)
    retention = Call(Operations.retention_get)
    update_retention = Call(Operations.retention_update)


class DeliveryTargets(Resource[M]):
    """The org's buckets that finished batches are pushed to (docs/delivery-targets.md); the
    secret access key is write-only."""

    list = Call(Operations.delivery_target_list)
    create = Call(Operations.delivery_target_create)
    get = Call(Operations.delivery_target_get)
    update = Call(Operations.delivery_target_update)
    delete = Call(Operations.delivery_target_delete)
    test = Call(Operations.delivery_target_test)


class Schedules(Resource[M]):
    """Recurring schedules (docs/schedules.md): each fire time creates a batch; their runs,
    versions and golden-set regression runs."""

    list = Listing(Operations.schedule_list)
    create = Call(Operations.schedule_create)
    get = Call(Operations.schedule_get)
    update = Call(Operations.schedule_update)
    pause = Call(Operations.schedule_pause)
    resume = Call(Operations.schedule_resume)
    delete = Call(Operations.schedule_delete)
    runs = Listing(Operations.schedule_runs)
    versions = Listing(Operations.schedule_versions)
    benchmarks = Call(Operations.schedule_benchmarks)
    regress = Call(Operations.schedule_regress)


class Presets(Resource[M]):
    """Presets (docs/presets.md): versioned templates of work an item names (`preset`), with
    their golden-set regression runs."""

    create = Call(Operations.preset_create)
    list = Listing(Operations.preset_list)
    get = Call(Operations.preset_get)
    replace = Call(Operations.preset_replace)
    update = Call(Operations.preset_update)
    archive = Call(Operations.preset_archive)
    versions = Listing(Operations.preset_versions)
    version = Call(Operations.preset_version)
    benchmarks = Call(Operations.preset_benchmarks)
    regress = Call(Operations.preset_regress)


class WorkOrders(Resource[M]):
    """Work orders (beta, docs/work-orders.md): batches and queued chat jobs grouped and
    counted together; a batch joins at creation (`batches.create(work_order_id=...)`) or by
    `add_member`."""

    create = Call(Operations.work_order_create)
    list = Listing(Operations.work_order_list)
    get = Call(Operations.work_order_get)
    update = Call(Operations.work_order_update)
    add_member = Call(Operations.work_order_add_member)
    members = Listing(Operations.work_order_members)


class Routing(Resource[M]):
    """The org's route policy (docs/routing-policy.md): read by every role, saved by owners
    and admins, with its history."""

    policy = Call(Operations.route_policy)
    update_policy = Call(Operations.route_policy_update)
    policy_history = Listing(Operations.route_policy_history)


class FeedbackResource(Resource[M]):
    """Feedback on answers (docs/feedback.md): one rating per author and target, listed and
    summed per model and provider."""

    send = Call(Operations.feedback_send)
    list = Listing(Operations.feedback_list)
    summary = Call(Operations.feedback_summary)


class Billing(Resource[M]):
    """Billing controls and their audit trail (docs/billing-controls.md), auto top-up and its
    attempts (docs/payments.md). Changing the controls needs a user session (the console)."""

    controls = Call(Operations.billing_controls)
    audit = Listing(Operations.billing_audit)
    events = Listing(Operations.billing_events)
    auto_topup = Call(Operations.auto_topup_get)
    update_auto_topup = Call(Operations.auto_topup_update)
    auto_topup_attempts = Listing(Operations.auto_topup_attempts)


class Catalog(Resource[M]):
    """The public catalog (docs/catalog.md): models and their lanes, workflow products, the
    provider directory and the fee schedule."""

    models = Call(Operations.catalog_models)
    model = Call(Operations.catalog_model)
    workflow_products = Call(Operations.catalog_workflow_products)
    workflow_product = Call(Operations.catalog_workflow_product)
    providers = Call(Operations.catalog_providers)
    provider = Call(Operations.catalog_provider)
    fees = Call(Operations.catalog_fees)


class Resources(NamedTuple):
    """The resource classes of one mode, one per attribute of the client."""

    quotes: type[Quotes[Any]]
    batches: type[Batches[Any]]
    chat: type[Chat[Any]]
    files: type[Files[Any]]
    settings: type[Settings[Any]]
    delivery_targets: type[DeliveryTargets[Any]]
    schedules: type[Schedules[Any]]
    presets: type[Presets[Any]]
    work_orders: type[WorkOrders[Any]]
    routing: type[Routing[Any]]
    feedback: type[FeedbackResource[Any]]
    billing: type[Billing[Any]]
    catalog: type[Catalog[Any]]


class Surface(ClientBase, Moded[M], Generic[M, H, S]):
    """A client of mode `M` on an HTTP client `H`, sleeping with `S`. `api_key` defaults to
    `BATCHROUTE_API_KEY`, `base_url` to `BATCHROUTE_BASE_URL` (or the given `http_client`'s
    base URL). `sleep`, `clock` (Unix seconds, for `Retry-After` dates) and `monotonic` (for
    `wait` time-outs) are injectable for tests."""

    _resources: Resources

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: H | None = None,
        backoff: Backoff | None = None,
        sleep: S | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        http_url = str(getattr(http_client, "base_url", "")) or None
        super().__init__(
            api_key,
            base_url,
            http_url,
            max_retries=max_retries,
            backoff=backoff,
            clock=clock,
            monotonic=monotonic,
        )
        self._client = self
        self._owns_http = http_client is None
        self._http: H = http_client if http_client is not None else self._new_http(timeout)
        self._sleep: S = sleep if sleep is not None else self._default_sleep()
        resources = self._resources
        self.quotes: Quotes[M] = resources.quotes(self)
        self.batches: Batches[M] = resources.batches(self)
        self.chat: Chat[M] = resources.chat(self)
        self.files: Files[M] = resources.files(self)
        self.settings: Settings[M] = resources.settings(self)
        self.delivery_targets: DeliveryTargets[M] = resources.delivery_targets(self)
        self.schedules: Schedules[M] = resources.schedules(self)
        self.presets: Presets[M] = resources.presets(self)
        self.work_orders: WorkOrders[M] = resources.work_orders(self)
        self.routing: Routing[M] = resources.routing(self)
        self.feedback: FeedbackResource[M] = resources.feedback(self)
        self.billing: Billing[M] = resources.billing(self)
        self.catalog: Catalog[M] = resources.catalog(self)

    def _new_http(self, timeout: float) -> H:
        raise NotImplementedError

    def _default_sleep(self) -> S:
        raise NotImplementedError

    @property
    def http(self) -> H:
        return self._http

    account = Call(Operations.account)
    usage = Call(Operations.usage)
    billing_controls = Call(Operations.billing_controls)
    chat_job = Call(Operations.chat_job)
    request = Call(Operations.request)
    send = Call(Operations.send)
    stream_events = Listing(Operations.stream_events)
    paginate = Listing(Operations.paginate)
