"""Providers: one interface for vendor batch APIs and per-item synchronous APIs
(base.py), the local simulators (simulated.py), slug -> adapter (registry.py) and the
retry policy for transient errors (retry.py). docs/providers.md describes them.

Callers import from those modules (`from batchroute.providers import base`,
`batchroute.providers.retry`): the package itself re-exports nothing."""
