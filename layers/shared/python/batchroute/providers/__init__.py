"""Providers: one interface for vendor batch APIs and per-item synchronous APIs
(base.py), the local simulators (simulated.py), slug -> adapter (registry.py) and the
retry policy for transient errors (retry.py). docs/providers.md describes them."""

from batchroute.providers.base import (
    BatchApiProvider,
    ItemError,
    JobStatus,
    PermanentProviderError,
    ProviderError,
    ProviderRequest,
    ProviderResult,
    ProviderUnavailable,
    StreamDelta,
    StreamEnd,
    StreamEvent,
    StreamStart,
    SyncProvider,
    TransientProviderError,
    UnknownJob,
    Usage,
)
from batchroute.providers.retry import RetryPolicy

__all__ = [
    "BatchApiProvider",
    "ItemError",
    "JobStatus",
    "PermanentProviderError",
    "ProviderError",
    "ProviderRequest",
    "ProviderResult",
    "ProviderUnavailable",
    "RetryPolicy",
    "StreamDelta",
    "StreamEnd",
    "StreamEvent",
    "StreamStart",
    "SyncProvider",
    "TransientProviderError",
    "UnknownJob",
    "Usage",
]
