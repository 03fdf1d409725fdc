"""The routing context: the org's route policy (docs/routing-policy.md)."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.catalog import CatalogWiring

if TYPE_CHECKING:
    from batchroute.services.routing.policy import PolicyReader, RoutePolicyService


class RoutingWiring(CatalogWiring):
    @cached_property
    def route_policies(self) -> PolicyReader:
        """Per process: its cache is what keeps direct chat off DynamoDB for the policy."""
        from batchroute.services.routing.policy import PolicyReader

        return PolicyReader(self.route_policy_store, self.clock)

    @cached_property
    def route_policy(self) -> RoutePolicyService:
        from batchroute.services.routing.policy import RoutePolicyService

        return RoutePolicyService(self.route_policy_store, self.clock, self.route_policies)
