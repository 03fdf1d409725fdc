"""The changelog: what each release of the service shipped. Newest entries are added at the
end; the API sorts newest first."""

from __future__ import annotations

from datetime import UTC, datetime

from batchroute.domain.content import ChangelogEntry

ENTRIES: tuple[ChangelogEntry, ...] = (
    ChangelogEntry(
        released_at=datetime(2026, 11, 21, 10, 37, tzinfo=UTC),
        tag="platform",
        title="Foundation: one codebase for AWS and your laptop",
        items=(
            "Serverless on AWS: the API on Lambda behind API Gateway, DynamoDB tables, SQS "
            "queues with dead-letter queues, and the batch workflow on Step Functions.",
            "Every batch step is a task-token hand-off through SQS, idempotent and "
            "conditional: a batch never moves backward and never leaves a terminal state.",
            "One error envelope for every non-2xx answer, a request id on every response, "
            "OpenAPI 3.1 at /openapi.json, and a read-only maintenance mode that keeps "
            "reads and health up.",
            "`make run` starts the whole service locally on moto with the same handlers; "
            "`make test` runs lint, type checks and four test suites.",
            "Infrastructure as code for production and test, checked by cdk-nag.",
        ),
    ),
    ChangelogEntry(
        released_at=datetime(2026, 11, 21, 10, 40, tzinfo=UTC),
        tag="accounts",
        title="Accounts, roles and API keys",
        items=(
            "Four roles (owner, admin, member, billing) with one permission table, "
            "enforced the same way on every route.",
            "API keys are shown once at creation, stored only as a keyed hash, bound to "
            "their environment, and revocable.",
            "Creating a key needs a signed-in user session, so a leaked key cannot mint more keys.",
        ),
    ),
    ChangelogEntry(
        released_at=datetime(2026, 11, 21, 11, 1, tzinfo=UTC),
        tag="billing",
        title="Spending controls, retention settings and rate limits",
        items=(
            "Billing controls: a daily or monthly spend limit in your time zone, soft or "
            "hard mode, low-balance and threshold alerts, with an audit entry for every change.",
            "Result retention: grace_only (free, the default), extended_fixed or "
            "until_deleted, and a never_charge switch that guarantees zero storage spend.",
            "Rate limits per API key and per account over a rolling window, tighter on "
            "the anonymous sign-up and login endpoints; 429 answers carry Retry-After.",
            "Every URL you give us, such as a webhook, passes an SSRF guard: internal, loopback "
            "and cloud-metadata addresses are refused.",
        ),
    ),
    ChangelogEntry(
        released_at=datetime(2026, 11, 21, 11, 9, tzinfo=UTC),
        tag="accounts",
        title="Sign-up, login and sessions",
        items=(
            "Registration with email verification, and agent registration that returns an "
            "org id and an API key in one call.",
            "Login sets a session cookie; sessions can be revoked, and a password reset "
            "revokes every session of the user.",
            "Profile and organization delivery-webhook settings.",
        ),
    ),
    ChangelogEntry(
        released_at=datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
        tag="catalog",
        title="Model catalog, provider directory and fee schedule",
        items=(
            "Public catalog of 12 models served by 28 lanes across 9 providers: OpenAI, "
            "Anthropic and Google batch APIs, Together, Groq, Fireworks and DeepInfra, and "
            "two self-hosted edge pools.",
            "Llama 3.3 70B Instruct is served by six lanes at different prices, so routing has real choices.",
            "Every model shows per-provider direct and batch prices, context window, "
            "regions, retention, hosted tools, live capacity and routing eligibility.",
            "Lanes report heartbeats; a lane whose heartbeat is older than five minutes is "
            "marked stale_heartbeat and is not routed to.",
            "Workflow products (ticket classification, document summary, structured "
            "extraction, PII redaction) with input and output JSON Schemas.",
            "One published fee schedule: 5.90% on model batches, 11.80% on workflow "
            "products, plus a per-lane control-plane fee.",
        ),
    ),
)
