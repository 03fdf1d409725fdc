"""The catalog as one environment runs it: which providers and lanes are enabled, how each
provider is reached (its `ProviderEndpoint`), and what differs from the catalog there
(regions, privacy tiers, concurrency, capacity). Read from
catalog/data/environments/<environment>.toml, by the functions and the CDK app alike
(docs/providers.md, Enabling a provider).

A provider not listed in the environment's file, or listed with `enabled = false`, is
disabled there: the routing gates refuse its lanes (`provider_disabled`). Placeholders in
URLs and options (`{emulators}`, `{bucket:<key>}`, `{region}`, `{bedrock_batch_role_arn}`)
are filled from `Placeholders` at load time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import get_args

from batchroute.catalog.datafile import DataError, Row, read_toml
from batchroute.catalog.loader import EXECUTION_MODES, PRIVACY_TIERS, data_folder
from batchroute.domain.catalog.catalog import Catalog, Lane, Provider
from batchroute.providers.endpoints import AdapterKind, Credentials, ProviderEndpoint
from batchroute.providers.hosted_tools import runnable
from batchroute.providers.http import Timeouts

ENVIRONMENTS = ("production", "test", "local")
ADAPTERS: tuple[AdapterKind, ...] = get_args(AdapterKind)
CREDENTIALS: tuple[Credentials, ...] = get_args(Credentials)
_PLACEHOLDER = re.compile(r"\{([a-z_]+(?::[a-z_-]+)?)\}")


@dataclass(frozen=True)
class Placeholders:
    """What an environment file may refer to, known only at run time."""

    values: Mapping[str, str] = field(default_factory=dict)
    strict: bool = True  # False: a placeholder without a value stays as written (operator tools)

    def fill(self, text: str, where: str) -> str:
        def value(found: re.Match[str]) -> str:
            name = found.group(1)
            if name not in self.values:
                if not self.strict:
                    return found.group(0)
                raise DataError(f"{where}: {{{name}}} has no value in this process")
            return self.values[name]

        return _PLACEHOLDER.sub(value, text)

    def names(self, text: str) -> list[str]:
        return _PLACEHOLDER.findall(text)


@dataclass(frozen=True)
class Deployment:
    environment: str
    endpoints: Mapping[str, ProviderEndpoint]  # the enabled providers, by slug
    catalog: Catalog  # the catalog with this environment's overrides applied

    def endpoint(self, slug: str) -> ProviderEndpoint | None:
        return self.endpoints.get(slug)


def load_deployment(
    catalog: Catalog, environment: str, placeholders: Placeholders | None = None
) -> Deployment:
    """The environment's endpoints and catalog. With `placeholders=None` the placeholders
    are left in place (the CDK app reads which providers need a secret, not their URLs)."""
    if environment not in ENVIRONMENTS:
        raise DataError(f"no environment file for {environment!r} (one of {', '.join(ENVIRONMENTS)})")
    name = f"{environment}.toml"
    document = read_toml(data_folder() / "environments", name)
    known = {p.slug: p for p in catalog.providers}
    endpoints: dict[str, ProviderEndpoint] = {}
    providers: list[Provider] = []
    tables = document.tables("providers") if document.has("providers") else {}
    for slug, provider in known.items():
        row = tables.get(slug)
        if row is None:
            providers.append(replace(provider, enabled=False))
            continue
        provider, endpoint = _provider(row, provider, placeholders, lane_output_limits(catalog.lanes, slug))
        providers.append(provider)
        if provider.enabled:
            endpoints[slug] = endpoint
    strangers = sorted(set(tables) - set(known))
    if strangers:
        raise DataError(f"{name}: unknown provider(s) {', '.join(strangers)} (not in providers.toml)")
    lanes = _lanes(document, catalog.lanes, name) if document.has("lanes") else catalog.lanes
    lanes = tuple(_runnable_tools(lane, endpoints.get(lane.provider)) for lane in lanes)
    document.close()
    changed = replace(catalog, providers=tuple(providers), lanes=lanes, _by_model={})
    return Deployment(environment, endpoints, changed)


def keyed_providers(catalog: Catalog, environment: str) -> list[str]:
    """The providers of an environment that authenticate with an API key: one secret each."""
    deployment = load_deployment(catalog, environment)
    return [slug for slug, endpoint in deployment.endpoints.items() if endpoint.credentials == "api_key"]


def lane_output_limits(lanes: tuple[Lane, ...], slug: str) -> dict[str, int]:
    """Catalog model id -> the output limit of its lane on provider `slug` (0: none)."""
    return {lane.model: lane.max_output_tokens for lane in lanes if lane.provider == slug}


def _provider(
    row: Row, provider: Provider, placeholders: Placeholders | None, output_limits: dict[str, int]
) -> tuple[Provider, ProviderEndpoint]:
    adapter = row.choice("adapter", ADAPTERS)
    enabled = row.flag("enabled", True)
    credentials = row.choice("credentials", CREDENTIALS, "api_key")
    base_url = row.text("base_url", "") or None
    region = row.text("region", "") or None
    options = row.raw("options") if row.has("options") else {}
    api_version = row.text("api_version", provider.api_version)
    timeouts = _timeouts(row)
    changed = replace(
        provider,
        enabled=enabled and provider.enabled,
        regions=row.texts("regions", default=provider.regions) if row.has("regions") else provider.regions,
        privacy_tiers=row.choices("privacy_tiers", PRIVACY_TIERS)
        if row.has("privacy_tiers")
        else provider.privacy_tiers,
        max_concurrency=row.integer("max_concurrency", minimum=1, default=provider.max_concurrency),
        execution_mode=row.choice("execution_mode", EXECUTION_MODES, provider.execution_mode),
    )
    row.close()

    def fill(text: str | None, key: str) -> str | None:
        if text is None or placeholders is None:
            return text
        return placeholders.fill(text, f"providers.{provider.slug}.{key}")

    endpoint = ProviderEndpoint(
        slug=provider.slug,
        adapter=adapter,
        base_url=fill(base_url, "base_url"),
        region=fill(region, "region"),
        batch_api=changed.execution_mode == "batch_api",
        credentials=credentials,
        options={str(k): str(fill(str(v), f"options.{k}")) for k, v in options.items()},
        timeouts=timeouts,
        api_version=api_version,
        control_api_version=provider.control_api_version,
        output_limits=output_limits,
    )
    return changed, endpoint


_TIMEOUT_KEYS = ("connect", "read", "first_byte", "idle")


def _timeouts(row: Row) -> Timeouts:
    """`timeouts = { connect, read, first_byte, idle }` in whole seconds, each optional (the
    defaults of `Timeouts` otherwise)."""
    if not row.has("timeouts"):
        return Timeouts()
    table = row.table("timeouts")
    defaults = Timeouts()
    values = {
        key: float(table.integer(key, minimum=1, default=int(getattr(defaults, key))))
        for key in _TIMEOUT_KEYS
    }
    table.close()
    return Timeouts(**values)


def _runnable_tools(lane: Lane, endpoint: ProviderEndpoint | None) -> Lane:
    """The lane offering only the hosted tools its provider's adapter here can run (an
    operator may point a provider at another adapter): a lane is never offered for a tool
    that nothing would run."""
    if not lane.hosted_tools or endpoint is None:
        return lane
    can = runnable(endpoint.adapter)
    kept = tuple(tool for tool in lane.hosted_tools if tool in can)
    return lane if kept == lane.hosted_tools else replace(lane, hosted_tools=kept)


def _lanes(document: Row, lanes: tuple[Lane, ...], name: str) -> tuple[Lane, ...]:
    rows = document.tables("lanes")
    by_id = {lane.lane_id: lane for lane in lanes}
    strangers = sorted(set(rows) - set(by_id))
    if strangers:
        raise DataError(f"{name}: unknown lane(s) {', '.join(strangers)} (not in lanes.toml)")
    kept: list[Lane] = []
    for lane in lanes:
        row = rows.get(lane.lane_id)
        if row is None:
            kept.append(lane)
            continue
        enabled = row.flag("enabled", True)
        capacity = row.integer("daily_capacity_items", minimum=0, default=lane.daily_capacity_items)
        row.close()
        if enabled:
            kept.append(replace(lane, daily_capacity_items=capacity))
    return tuple(kept)
