"""The org's route policy: read, update with its history, and the cached read the routing
paths use (docs/routing-policy.md)."""
