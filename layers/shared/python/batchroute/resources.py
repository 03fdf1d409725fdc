"""The one source of truth for every AWS resource the service declares.

The CDK stacks (infra/) and the local provisioner (batchroute_tools.local) both read
these definitions; tests/infra/test_resource_parity.py proves they agree.
Pure data: no boto3, no CDK imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources as importlib_resources

SERVICE = "batchroute"


@dataclass(frozen=True)
class Index:
    name: str
    partition_key: str
    sort_key: str
    # "ALL" or "KEYS_ONLY": an index that projects ALL is written again on every update of
    # an item it holds, billed by the whole item's size.
    projection: str = "ALL"


@dataclass(frozen=True)
class Table:
    key: str
    partition_key: str = "pk"
    sort_key: str = "sk"
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str = "ttl"
    purpose: str = ""

    def physical_name(self, prefix: str) -> str:
        return f"{prefix}-{self.key}"


@dataclass(frozen=True)
class Queue:
    key: str
    consumer: str  # the function (functions/<consumer>/) that the event source feeds
    visibility_timeout_seconds: int
    max_receive_count: int = 5
    batch_size: int = 10
    max_batching_window_seconds: int = 0
    retention_seconds: int = 4 * 24 * 3600
    dlq_retention_seconds: int = 14 * 24 * 3600
    purpose: str = ""

    def physical_name(self, prefix: str) -> str:
        return f"{prefix}-{self.key}"

    def dlq_physical_name(self, prefix: str) -> str:
        return f"{prefix}-{self.key}-dlq"


@dataclass(frozen=True)
class LifecycleRule:
    id: str
    prefix: str
    expiration_days: int | None = None
    abort_incomplete_multipart_days: int | None = 1


@dataclass(frozen=True)
class Bucket:
    key: str
    lifecycle: tuple[LifecycleRule, ...] = ()
    purpose: str = ""
    cors: bool = False

    def physical_name(self, prefix: str, account: str) -> str:
        # Bucket names are global: the account id keeps them unique per deployment.
        return f"{prefix}-{self.key}-{account}"


@dataclass(frozen=True)
class Function:
    key: str  # folder under functions/; the handler is functions.<key>.handler.handler
    timeout_seconds: int
    memory_mb: int
    purpose: str = ""
    reserved_concurrency: int | None = None

    @property
    def handler(self) -> str:
        return f"functions.{self.key}.handler.handler"


_GSI1 = Index(name="gsi1", partition_key="gsi1pk", sort_key="gsi1sk")

TABLES: tuple[Table, ...] = (
    Table(
        key="identity",
        indexes=(_GSI1,),
        purpose="orgs, users, memberships, sessions, API keys, single-use tokens",
    ),
    Table(
        key="batches",
        # gsi2: the sweeper's deadline index of active batches; ids only (see batch_records).
        indexes=(
            _GSI1,
            Index(name="gsi2", partition_key="gsi2pk", sort_key="gsi2sk", projection="KEYS_ONLY"),
        ),
        purpose="quotes, batches, lanes, item chunks, idempotency records, chat jobs",
    ),
    Table(
        key="ledger",
        indexes=(_GSI1,),
        purpose="wallets, append-only ledger entries, reservations and holds",
    ),
    Table(
        key="controls",
        indexes=(_GSI1,),
        purpose="billing controls and audit, retention, delivery targets, rate limits, lane live state",
    ),
)

QUEUES: tuple[Queue, ...] = (
    Queue(
        key="route",
        consumer="router",
        visibility_timeout_seconds=360,
        purpose="workflow Route step: plan lanes for a batch",
    ),
    Queue(
        key="lanes",
        consumer="router",
        visibility_timeout_seconds=1800,
        batch_size=1,
        purpose="workflow RunLanes step: execute one lane's items against a provider",
    ),
    Queue(
        key="settle",
        consumer="settle",
        visibility_timeout_seconds=360,
        purpose="workflow Finalize and Settle steps: artifacts, billing receipt, ledger",
    ),
    # A delivery attempt may take its full 10 s time-out: small batches keep one invocation
    # well inside the webhook function's time-out (visibility >= 6x the function time-out).
    Queue(
        key="deliver",
        consumer="webhook",
        visibility_timeout_seconds=720,
        batch_size=4,
        purpose="workflow Deliver step and retries: signed webhooks, bucket delivery",
    ),
)

# Multipart uploads left incomplete are dropped after a day; access logs (S3's and
# CloudFront's) are kept 90 days.
_ABORT_MULTIPART = LifecycleRule(id="abort-multipart", prefix="", abort_incomplete_multipart_days=1)
_EXPIRE_LOGS = LifecycleRule(
    id="expire-logs", prefix="", expiration_days=90, abort_incomplete_multipart_days=None
)

BUCKETS: tuple[Bucket, ...] = (
    Bucket(
        key="artifacts",
        lifecycle=(
            _ABORT_MULTIPART,
            LifecycleRule(
                id="expire-tmp", prefix="tmp/", expiration_days=2, abort_incomplete_multipart_days=None
            ),
        ),
        purpose="batch inputs (chunked), results, errors and receipt artifacts",
    ),
    Bucket(
        key="uploads",
        cors=True,
        lifecycle=(
            _ABORT_MULTIPART,
            LifecycleRule(
                id="expire-staging",
                prefix="staging/",
                expiration_days=2,
                abort_incomplete_multipart_days=None,
            ),
        ),
        purpose="customer input files (direct and signed-URL uploads)",
    ),
    Bucket(
        key="access-logs",
        lifecycle=(_EXPIRE_LOGS,),
        purpose="S3 server access logs of the other buckets",
    ),
)

# Deployed only: the web console's built files and the CDN's access logs (docs/console.md,
# Deployment). The functions never touch them, so they are not in BUCKETS (nor in the
# functions' BUCKETS variable); locally the API process serves console/dist at /console/.
CONSOLE_BUCKETS: tuple[Bucket, ...] = (
    Bucket(key="console", purpose="the web console's built files, served through CloudFront only"),
    Bucket(
        key="cdn-logs",
        lifecycle=(_EXPIRE_LOGS,),
        purpose="CloudFront standard access logs of the console distribution",
    ),
)

FUNCTIONS: tuple[Function, ...] = (
    Function(key="api", timeout_seconds=29, memory_mb=1024, purpose="HTTP API (FastAPI via Mangum)"),
    Function(key="router", timeout_seconds=300, memory_mb=1024, purpose="route and lane execution"),
    Function(key="settle", timeout_seconds=60, memory_mb=1024, purpose="finalize and settle"),
    Function(key="webhook", timeout_seconds=120, memory_mb=512, purpose="webhooks and bucket delivery"),
    Function(key="sweeper", timeout_seconds=120, memory_mb=512, purpose="SLA expiry, stale holds, GC"),
)

# The API's streamed routes (chat completions, the vendor-compatible surface) run on a function
# of their own (infra/compute.py, `api-stream`) behind a STREAM integration, which API Gateway
# lets last up to 15 minutes (idle up to 5 on a regional API): a long streamed completion, a
# large compat upload's assembly and a large output's first rendering are not cut at the
# buffered API's 29 s. What must outlive a call is sized from this: a chat hold's staleness
# (config.py, `chat_hold_stale_seconds`), an upload's assembly claim (services/compat/uploads.py).
STREAM_TIMEOUT_SECONDS = 240

STATE_MACHINE_KEY = "batch-workflow"
SWEEPER_RATE_MINUTES = 1
# The daily payments reconciliation (docs/payments.md): a second rule on the sweeper function,
# whose event is this input (a local timer plays it the same way).
RECONCILIATION_RULE = "payment-reconciliation"  # the rule's name after the stack prefix
RECONCILIATION_RATE_HOURS = 24
RECONCILIATION_EVENT: dict[str, bool] = {"reconcile_payments": True}

# Names the ASL file uses as ${...} placeholders; CDK passes them as definition
# substitutions, the local provisioner substitutes the same values.
WORKFLOW_SUBSTITUTIONS = (
    "RouteQueueUrl",
    "LanesQueueUrl",
    "SettleQueueUrl",
    "DeliverQueueUrl",
    "BatchesTableName",
)


def table(key: str) -> Table:
    return next(t for t in TABLES if t.key == key)


def queue(key: str) -> Queue:
    return next(q for q in QUEUES if q.key == key)


def bucket(key: str) -> Bucket:
    return next(b for b in (*BUCKETS, *CONSOLE_BUCKETS) if b.key == key)


def provider_secret_name(prefix: str, slug: str) -> str:
    """The Secrets Manager secret holding a provider's API key (docs/providers.md)."""
    return f"{prefix}-provider-{slug}"


def resource_prefix(environment: str) -> str:
    return f"{SERVICE}-{environment}"


def state_machine_name(prefix: str) -> str:
    return f"{prefix}-{STATE_MACHINE_KEY}"


def workflow_definition_template() -> str:
    """The batch workflow's ASL text with ${...} placeholders (see WORKFLOW_SUBSTITUTIONS)."""
    return (importlib_resources.files("batchroute.workflow") / "batch.asl.json").read_text("utf-8")


def render_workflow_definition(substitutions: dict[str, str]) -> str:
    missing = set(WORKFLOW_SUBSTITUTIONS) - set(substitutions)
    if missing:
        raise ValueError(f"missing workflow substitutions: {sorted(missing)}")
    text = workflow_definition_template()
    for name in WORKFLOW_SUBSTITUTIONS:
        text = text.replace("${" + name + "}", substitutions[name])
    return text


def workflow_substitutions(*, queue_urls: dict[str, str], batches_table_name: str) -> dict[str, str]:
    return {
        "RouteQueueUrl": queue_urls["route"],
        "LanesQueueUrl": queue_urls["lanes"],
        "SettleQueueUrl": queue_urls["settle"],
        "DeliverQueueUrl": queue_urls["deliver"],
        "BatchesTableName": batches_table_name,
    }


def payment_secret_name(prefix: str) -> str:
    """The Secrets Manager secret holding the payment processor's keys, a JSON object
    `{"secret_key": "sk_...", "webhook_secret": "whsec_..."}` (docs/payments.md)."""
    return f"{prefix}-payments-stripe"
