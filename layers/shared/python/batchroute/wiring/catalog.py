"""The catalog context: the deployment's providers, the catalog and its guards, provider
health, the public catalog and content services."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.stores import Stores

if TYPE_CHECKING:
    from batchroute.catalog.environments import Deployment
    from batchroute.domain.billing.savings import References
    from batchroute.domain.catalog.catalog import Catalog
    from batchroute.domain.routing.gates import RoutingGuards
    from batchroute.providers.credentials import ProviderKeys
    from batchroute.providers.registry import ProviderRegistry
    from batchroute.services.catalog.catalog import CatalogService
    from batchroute.services.catalog.content import ContentService
    from batchroute.services.catalog.lane_health import (
        ProviderHealth,
    )


class CatalogWiring(Stores):
    @cached_property
    def deployment(self) -> Deployment:
        """The catalog as this environment runs it, and how each provider is reached."""
        from batchroute.catalog import builtin_catalog
        from batchroute.catalog.environments import Placeholders, load_deployment

        settings = self.settings
        values = {f"bucket:{key}": name for key, name in settings.buckets.items()}
        values.update(
            emulators=settings.vendor_emulator_url.rstrip("/"),
            region=settings.aws_region,
            bedrock_batch_role_arn=settings.bedrock_batch_role_arn,
        )
        return load_deployment(builtin_catalog(), settings.environment, Placeholders(values))

    @cached_property
    def catalog(self) -> Catalog:
        return self.deployment.catalog

    @cached_property
    def references(self) -> References:
        """The reference prices of what routing saved: the built-in catalog's, whichever lanes
        this environment deploys."""
        from batchroute.catalog import builtin_catalog
        from batchroute.domain.billing.savings import References

        return References.of(builtin_catalog())

    @cached_property
    def guards(self) -> RoutingGuards:
        from batchroute.services.catalog.catalog import guards_for

        return guards_for(self.settings)

    @cached_property
    def provider_keys(self) -> ProviderKeys:
        from batchroute.adapters.aws import client
        from batchroute.providers.credentials import ProviderKeys

        return ProviderKeys(
            self.settings.prefix,
            secretsmanager=client("secretsmanager"),
            max_age=self.settings.provider_key_max_age_seconds,
        )

    @cached_property
    def providers(self) -> ProviderRegistry:
        from batchroute.providers.registry import ProviderRegistry

        return ProviderRegistry(
            self.settings,
            self.catalog.providers,
            endpoints=self.deployment.endpoints,
            keys=self.provider_keys,
        )

    @cached_property
    def provider_health(self) -> ProviderHealth:
        from batchroute.services.catalog.lane_health import provider_health_for

        return provider_health_for(self.settings, self.providers)

    @cached_property
    def catalog_service(self) -> CatalogService:
        from batchroute.services.catalog.catalog import CatalogService

        return CatalogService(self.catalog, self.lane_states, self.settings, self.clock)

    @cached_property
    def content(self) -> ContentService:
        from batchroute.content import BuiltinContent
        from batchroute.services.catalog.content import ContentService

        return ContentService(BuiltinContent(), enabled=self.settings.content_store_enabled)
