"""The built-in providers: three large vendors with a batch API, four public open-weight hosts
and two edge node pools of our own.

Privacy tiers and retention are what each provider's published terms support for API
traffic, as this catalog version reads them (rationale per provider in docs/catalog.md).
`confidential` is declared only where the terms commit to no training on API data and a
signed data-processing agreement is available; `data_retention_days` is the longest the
provider may keep prompts and outputs by default (0 = zero data retention). No built-in
provider declares `restricted`.
"""

from __future__ import annotations

from batchroute.domain.catalog import Provider

OPENAI = Provider(
    slug="openai",
    display_name="OpenAI",
    kind="vendor_batch",
    execution_mode="batch_api",
    regions=("us", "eu"),
    privacy_tiers=("standard", "confidential"),
    # Abuse-monitoring logs are kept up to 30 days; Batch API input/output files are stored
    # until deleted (the lane deletes them after download), so batch traffic is not ZDR.
    data_retention_days=30,
    website="https://openai.com/api/pricing/",
    max_concurrency=8,
)

ANTHROPIC = Provider(
    slug="anthropic",
    display_name="Anthropic",
    kind="vendor_batch",
    execution_mode="batch_api",
    regions=("us",),
    privacy_tiers=("standard", "confidential"),
    # API inputs and outputs are deleted within 30 days by default; zero retention needs a
    # separate agreement, which this catalog does not assume.
    data_retention_days=30,
    website="https://www.anthropic.com/pricing#api",
    max_concurrency=8,
)

GOOGLE = Provider(
    slug="google",
    display_name="Google (Gemini API)",
    kind="vendor_batch",
    execution_mode="batch_api",
    regions=("us", "eu"),
    # Paid Gemini API traffic is not used for training, but prompts are logged for abuse
    # monitoring for a limited period (55 days), so the lane stays on the standard tier.
    privacy_tiers=("standard",),
    data_retention_days=55,
    website="https://ai.google.dev/gemini-api/docs/pricing",
    max_concurrency=8,
)

TOGETHER = Provider(
    slug="together",
    display_name="Together AI",
    kind="public_host",
    # Together offers a batch endpoint at half the serverless price for these models.
    execution_mode="batch_api",
    regions=("us",),
    # Prompt storage is an account-level opt-out; the lane cannot prove it per request,
    # so the catalog declares the standard tier and assumes the default 30-day window.
    privacy_tiers=("standard",),
    data_retention_days=30,
    website="https://www.together.ai/pricing",
    max_concurrency=32,
)

GROQ = Provider(
    slug="groq",
    display_name="Groq",
    kind="public_host",
    execution_mode="sync",
    regions=("us",),
    # Synchronous inference requests are not retained (zero data retention by default).
    privacy_tiers=("standard", "confidential"),
    data_retention_days=0,
    website="https://groq.com/pricing",
    max_concurrency=32,
)

FIREWORKS = Provider(
    slug="fireworks",
    display_name="Fireworks AI",
    kind="public_host",
    execution_mode="sync",
    regions=("us", "eu"),
    # Serverless open models: prompts and generations are not logged or stored.
    privacy_tiers=("standard", "confidential"),
    data_retention_days=0,
    website="https://fireworks.ai/pricing",
    max_concurrency=32,
)

DEEPINFRA = Provider(
    slug="deepinfra",
    display_name="DeepInfra",
    kind="public_host",
    execution_mode="sync",
    regions=("us",),
    # Requests are processed in memory and not stored, but no signed agreement backs a
    # confidential declaration in this catalog: standard tier with zero retention.
    privacy_tiers=("standard",),
    data_retention_days=0,
    website="https://deepinfra.com/pricing",
    max_concurrency=32,
)

EDGE_EU = Provider(
    slug="edge-eu",
    display_name="Edge EU (self-hosted)",
    kind="edge",
    execution_mode="sync",
    regions=("eu",),
    # Our own open-weight nodes: nothing is written to disk, nothing leaves the node.
    privacy_tiers=("standard", "confidential"),
    data_retention_days=0,
    max_concurrency=4,
)

EDGE_US = Provider(
    slug="edge-us",
    display_name="Edge US (self-hosted)",
    kind="edge",
    execution_mode="sync",
    regions=("us",),
    privacy_tiers=("standard", "confidential"),
    data_retention_days=0,
    # Racked but not launched: the launch-provider guard keeps it out of routing outside
    # local mode until it is.
    launched=False,
    max_concurrency=4,
)

PROVIDERS: tuple[Provider, ...] = (
    OPENAI,
    ANTHROPIC,
    GOOGLE,
    TOGETHER,
    GROQ,
    FIREWORKS,
    DEEPINFRA,
    EDGE_EU,
    EDGE_US,
)
