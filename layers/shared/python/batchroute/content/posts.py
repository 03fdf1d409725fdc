"""Blog posts about the service: how it works and why it works that way. Bodies are
markdown. The API lists them newest first by `published_at`."""

from __future__ import annotations

from datetime import UTC, datetime

from batchroute.domain.content import Post

AUTHOR = "BatchRoute engineering"

WHY_QUOTES_ARE_FREE = Post(
    slug="why-quotes-are-free-and-price-locked",
    title="Why quotes are free and price-locked",
    summary=(
        "A quote costs nothing and reserves nothing; the batch you create from it is priced "
        "exactly as quoted and settled from the tokens the providers actually used."
    ),
    tags=("quotes", "pricing", "billing"),
    published_at=datetime(2026, 11, 21, 10, 45, tzinfo=UTC),
    author=AUTHOR,
    body="""\
Every batch starts with a quote. You send the items (or describe them), and we answer
with a `quote_id` (`qlock_...`), an expiry, the lanes we would use and a price estimate:
`provider_subtotal`, `service_fee`, `customer_discount` and `total`.

## Free, because asking is not buying

A quote reserves nothing. It does not touch your credit balance, it does not hold
provider capacity, and it does not fail because the estimate is close to (or over) your
spending limit. You can quote the same work ten times with different routing modes or
privacy tiers and compare. Limits and funding are checked when you *create* a batch, not
when you ask what it would cost.

## Price-locked, because prices move

Provider prices change, and live capacity changes by the minute. A quote is therefore a
versioned snapshot: the lanes, their per-token prices and the fee schedule as they were
when we answered. When you create a batch with that `quote_id`, the batch is priced from
the snapshot, not from whatever the catalog says a minute later. The price you approved
is the price you pay for.

## What is reserved, and what is charged

Creating the batch reserves the quote's total from your prepaid credits, in the same
database transaction that records the batch, so two concurrent batches can never spend
the same dollar. When the batch finishes it is settled from the tokens the providers
actually reported, at the locked prices plus the fee; the rest of the reservation is
released. Your billing receipt shows `credit_reserved`, `credit_charged` and
`credit_released`, and `credit_reserved = credit_charged + credit_released` always
holds.

## The fee is public

The fee in a quote comes from one schedule, published at `GET /v1/pricing/fees`: 5.90%
of the provider subtotal for model batches, 11.80% for workflow products, never below a
5.90% margin floor, plus a small control-plane fee per lane a batch runs on. The
schedule a quote used is part of its snapshot.
""",
)

HOW_ROUTING_RECEIPTS_WORK = Post(
    slug="how-routing-receipts-work",
    title="How routing receipts work",
    summary=(
        "Every routing decision lists the lanes chosen and every lane not chosen, each with "
        "a stable rejection code, so you can see why your work went where it went."
    ),
    tags=("routing", "receipts", "transparency"),
    published_at=datetime(2026, 11, 21, 11, 30, tzinfo=UTC),
    author=AUTHOR,
    body="""\
A *lane* is one provider serving one model: `together/meta-llama/Llama-3.3-70B-Instruct`
is a lane, `groq/meta-llama/Llama-3.3-70B-Instruct` is another. When you quote a batch we
look at every lane that serves the models your items name, and pick the cheapest one that
meets your SLA, privacy tier, capacity and tool requirements. A batch with items for
several models stays one batch; it just uses several lanes.

## What a receipt contains

The quote's `quote_lanes` lists the selected lanes, and the lanes we did not select,
each with a rejection reason. After settlement the billing receipt repeats both:
`provider_lanes` are the lanes that ran, each with the data and privacy facts we checked
at quote time, and `rejected_lanes` are the ones that did not, each with its rejection
receipt.

## The rejection codes

| Code | Meaning |
|---|---|
| `capacity_full` | the lane has no capacity left today for this many items |
| `context_window_exceeded` | an item is longer than the lane's context window |
| `tool_support` | the lane lacks a tool the items require; the receipt lists required and offered tools |
| `stale_heartbeat` | the lane has not reported within the heartbeat window, so it gets no work |
| `privacy_tier_mismatch` | the provider does not declare the privacy tier you asked for |
| `region_unavailable` | the provider does not serve the region you asked for |

Codes are stable; clients may branch on them. Messages are for people and may change.

## Why bother

Routing across providers is only trustworthy if it can be audited. A receipt lets you
answer the questions that matter after the fact: *why did this run on that provider,
what else was possible, and what would I have paid elsewhere?* It also makes failures
explicit: when no lane qualifies, the quote fails with a 400 `routing` preflight error
instead of quietly relaxing your constraints.

## Privacy in receipts

`privacy_tier=confidential` admits only providers that declare that tier. Confidential is
a contractual tier, not a promise that nothing is stored. If you also need zero data
retention, use `routing_mode=privacy_constrained`: it adds the zero-retention check, and
each selected lane in the receipt carries the data and privacy facts checked at quote
time.
""",
)

READING_THE_CATALOG = Post(
    slug="reading-the-model-catalog",
    title="Reading the model catalog: lanes, live capacity and heartbeats",
    summary=(
        "What the public catalog tells you about each model: who serves it, at what batch "
        "price, with how much capacity left today, and whether it can be routed to right now."
    ),
    tags=("catalog", "providers", "routing"),
    published_at=datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
    author=AUTHOR,
    body="""\
`GET /v1/catalog/models` is public: no key needed. Each model carries an `id` (the exact
string your items use; some contain slashes, like `meta-llama/Llama-3.3-70B-Instruct`,
and the detail route `/v1/catalog/models/{id}` accepts them as they are), its operations
(`responses`, `embeddings`, `vision`), and one entry per provider that serves it.

## Three kinds of provider

- **Vendor batch APIs** (OpenAI, Anthropic, Google): we submit a batch file and collect
  the results. Their batch price is half their interactive price.
- **Open-weight hosts** (Together, Groq, Fireworks, DeepInfra): Groq, Fireworks and
  DeepInfra are called item by item under a concurrency limit, and their batch price
  equals their direct price; Together runs batch work through its batch endpoint at half
  price.
- **Edge pools** (`edge-eu`, `edge-us`): our own open-weight nodes. Cheap, small, zero
  data retention, shorter context.

## Prices

Every provider entry shows `input`, `output`, `batch_input` and `batch_output` in USD per
million tokens, as decimal strings. The list answer's `pricing_updated_at` says when the
catalog's prices were last checked against the providers' public pages. Batches are paid
at batch prices; a direct chat request at direct prices.

## Live capacity and heartbeats

Lanes report a heartbeat and their remaining capacity for the day. A lane whose last
heartbeat is older than the heartbeat window (five minutes by default) is
`stale_heartbeat`: we cannot vouch for it, so routing skips it and the model's
`routing_eligibility` lists it under `reasons`. A lane with no capacity left is
`capacity_full`. `routing_eligibility.eligible` is true when at least one lane can take
work now.

## Filters

Filter with `operation`, `provider`, `privacy_tier`, `sla_tier`, `runtime_capability`,
`hosted_tool` and `q` (a case-insensitive search over title, summary, id, description and
tags). Filters combine with AND, and the lane-level ones must hold on the same lane:
`provider=groq&runtime_capability=json_schema` finds nothing, because Groq's lanes do
not offer strict JSON Schema output. An unknown value is a 400, never a silent empty list.
""",
)

SPENDING_LIMITS = Post(
    slug="soft-and-hard-spending-limits",
    title="Soft and hard spending limits",
    summary=(
        "A daily or monthly limit in your own time zone, in soft mode (alert) or hard mode "
        "(block at submit), with an audit trail of every change."
    ),
    tags=("billing", "controls", "alerts"),
    published_at=datetime(2026, 11, 21, 11, 5, tzinfo=UTC),
    author=AUTHOR,
    body="""\
Prepaid credits already cap what you can spend. Billing controls let you cap it more
tightly, per day or per month, with period boundaries in your own IANA time zone.

## Soft or hard

- **Soft** (the default for new limits) never blocks. Reaching the limit emits
  `billing.limit_reached` and, if you enabled them, an email and a signed webhook.
- **Hard** blocks at submit: when this period's spend, plus what in-flight batches have
  reserved, plus the new batch's estimate would pass the limit, the batch is refused
  with 402 `insufficient_credits` and details `limit`, `period`, `spent` and `projected`.

Completed work is never clawed back by a limit, and a quote never fails because of one:
quotes are free and reserve nothing.

## Alerts

Thresholds are `balance_below` and `spend_above` (USD) or `pct_of_limit` (whole
percent). Alerts are debounced per period. The low-balance alert fires once and re-arms
only after the balance recovers by about 10%, so a balance hovering around the line does
not flood your inbox.

## Who may change them

Reading the controls needs the billing permission. Changing them needs a signed-in user
with the owner or billing role: an API key alone, even an owner's, gets 403
`user_session_required`. Every change writes an audit entry with the before and after
values, the actor and the address, in the same transaction as the change itself.
""",
)

RUNNING_LOCALLY = Post(
    slug="the-whole-service-on-one-machine",
    title="The whole service on one machine",
    summary=(
        "`make run` starts the API, the workers, the batch workflow and the scheduled "
        "sweeper on an embedded AWS, with no account and no Docker: the same code as in production."
    ),
    tags=("engineering", "local-development", "aws"),
    published_at=datetime(2026, 11, 21, 10, 50, tzinfo=UTC),
    author=AUTHOR,
    body="""\
The service is serverless on AWS: API Gateway and Lambda for the API, DynamoDB, SQS,
S3 and a Step Functions workflow for batches. Serverless code is often hard to run
anywhere but the cloud. We wanted the opposite: the whole service on a laptop, from the
same handlers, in a few seconds.

## How

`make run` starts moto, an AWS emulator, in server mode inside one process, and
provisions every table, queue, bucket and the workflow from the same definitions the
infrastructure code deploys; a test proves the two agree. Then it serves the same
FastAPI app that runs behind API Gateway, feeds the worker handlers Lambda-shaped SQS
events from a local poller, and fires the sweeper from a timer the way the EventBridge
schedule does. moto even executes the workflow's state machine, task tokens included.

## What is simulated

AWS itself, and the AI providers: locally, no request leaves the machine. The simulated
providers answer health checks, so lanes keep a fresh heartbeat; to see what a provider
outage looks like, start the stack with `SIMULATED_PROVIDERS_DOWN='["groq"]'`: Groq's
lanes never report a heartbeat, so the catalog shows them `stale_heartbeat` and routing
leaves them out.

## Why it matters

Every integration test runs against the same embedded AWS, so the suites exercise real
conditional writes, transactions, queues and the real workflow definition instead of
mocks of them. And anyone can try the API end to end without an account: register,
create a key, read the catalog.
""",
)

POSTS: tuple[Post, ...] = (
    WHY_QUOTES_ARE_FREE,
    RUNNING_LOCALLY,
    SPENDING_LIMITS,
    HOW_ROUTING_RECEIPTS_WORK,
    READING_THE_CATALOG,
)
