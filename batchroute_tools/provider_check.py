"""`batchroute-admin providers check [--provider P]`: one tiny real call per enabled provider
(docs/operations.md, Checking providers).

For each provider the environment enables, the check builds its adapter exactly as the
service does (endpoint from the environment's data file, key from Secrets Manager, or the
IAM role) and asks it for its model list: the cheapest call every vendor offers, no tokens
spent. It prints the latency, whether the models the catalog routes to are listed, and, on
failure, the reason in the adapter's words (a missing key names its secret; a refused key,
an unreachable host, a time-out). Keys are never printed. It is not run in CI: there is no
network there; against the local stack it checks the vendor emulators.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from batchroute.domain.catalog.catalog import Catalog
from batchroute.errors import PermanentError, TransientError
from batchroute.providers.registry import ProviderRegistry


@dataclass(frozen=True)
class ProviderCheck:
    provider: str
    ok: bool
    latency_ms: float | None = None
    models_listed: int = 0
    missing_models: tuple[str, ...] = ()  # catalog models the vendor did not list
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "ok": self.ok,
            "latency_ms": self.latency_ms,
            "models_listed": self.models_listed,
            "missing_models": list(self.missing_models),
            "reason": self.reason,
        }

    def line(self) -> str:
        if not self.ok:
            return f"FAIL {self.provider}: {self.reason}"
        missing = f"; not listed: {', '.join(self.missing_models)}" if self.missing_models else ""
        return f"ok   {self.provider}: {self.latency_ms:.0f} ms, {self.models_listed} models listed{missing}"


@dataclass
class ProviderChecker:
    registry: ProviderRegistry
    catalog: Catalog
    timer: Callable[[], float] = time.perf_counter
    results: list[ProviderCheck] = field(default_factory=list)

    def run(self, providers: Iterable[str]) -> list[ProviderCheck]:
        return [self.check(slug) for slug in providers]

    def check(self, slug: str) -> ProviderCheck:
        wanted = sorted({lane.provider_model_id for lane in self.catalog.lanes if lane.provider == slug})
        started = self.timer()
        try:
            adapter = self.registry.sync(slug)
            listed = set(adapter.check())  # type: ignore[attr-defined]
        except (PermanentError, TransientError) as exc:
            return ProviderCheck(slug, ok=False, reason=_reason(exc))
        except Exception as exc:  # an adapter's unexpected failure is still the answer
            return ProviderCheck(slug, ok=False, reason=f"{type(exc).__name__}: {exc}"[:300])
        latency = (self.timer() - started) * 1000
        missing = tuple(m for m in wanted if m not in listed)
        return ProviderCheck(
            slug, ok=True, latency_ms=round(latency, 1), models_listed=len(listed), missing_models=missing
        )


def _reason(exc: BaseException) -> str:
    code = getattr(exc, "code", "")
    message = getattr(exc, "message", "") or str(exc)
    return f"{code}: {message}" if code else message
