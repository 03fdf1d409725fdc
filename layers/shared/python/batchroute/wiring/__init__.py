"""The one place that builds the service: every store, service and workflow step, from the
settings and a clock (the composition root).

`wiring_for(settings, clock)` returns the `Wiring` of that pair, built once per process and
reused (a warm Lambda keeps its clients, caches and the chat hot path's state between
invocations; a test that builds an app with its own settings or clock gets its own). Every
caller goes through it: the API's dependencies (functions/api/deps.py), every Lambda handler
(`lambda_handler`), the local runner and the benches. Nothing else reads
`settings.table_name(...)` or `settings.buckets`.

One module per services context builds that context's parts, each a cached attribute
(`stores.py` the stores and clients beneath them all); each layer builds on the ones beneath
it, and `Wiring` is the top. The account seams tests replace (a mailer, password hashing
parameters, a URL check) are arguments of the methods that need them. The wiring decides
nothing: which queue is configured is the settings' (`queue(name)`, None where none is),
what a service does without one is the service's. docs/architecture.md (Layout) names the
parts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from batchroute.clock import SystemClock
from batchroute.config import get_settings
from batchroute.resources import RECONCILIATION_EVENT

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from batchroute.clock import Clock
    from batchroute.config import Settings
    from batchroute.worker import LambdaHandler
    from batchroute.workflow.tasks import Step, StepOutput, WorkflowTask

from batchroute.wiring.workflow import WorkflowWiring

_MAX_WIRINGS = 8  # test suites build many apps; a deployed process has one


class Wiring(WorkflowWiring):
    """Every context's wiring, one layer each (stores, catalog, routing, accounts, delivery,
    billing, presets, work_orders, feedback, batches, chat, compat, schedules, workflow)."""


_lock = threading.Lock()
_wirings: dict[tuple[int, int], Wiring] = {}
_system_clock = SystemClock()


def wiring_for(settings: Settings | None = None, clock: Clock | None = None) -> Wiring:
    """The process's Wiring of these settings and clock (the current settings and the system
    clock by default), built on first use."""
    settings = settings or get_settings()
    clock = clock or _system_clock
    key = (id(settings), id(clock))
    with _lock:
        found = _wirings.get(key)
        if found is None or found.settings is not settings or found.clock is not clock:
            if len(_wirings) >= _MAX_WIRINGS:
                _wirings.clear()
            found = _wirings[key] = Wiring(settings, clock)
        return found


def workflow_steps(names: Iterable[str]) -> Mapping[str, Step]:
    """The named workflow steps, resolved at each call against the current settings, so a
    handler module reads no settings at import (tests change them between runs)."""

    def step(name: str) -> Step:
        def run(task: WorkflowTask) -> StepOutput | None:
            method: Step = getattr(wiring_for().workflow, name)
            return method(task)

        return run

    return {name: step(name) for name in names}


# -- Lambda handlers: each function's module is one line that names its handler here -------
def workflow_handler(*steps: str) -> LambdaHandler:
    """An SQS worker running the named workflow steps (router, settle, webhook)."""
    from batchroute.worker import workflow_task_handler

    return workflow_task_handler(workflow_steps(steps))


def sweeper_handler() -> LambdaHandler:
    """The scheduled sweeper (EventBridge)."""
    from batchroute.observability import lambda_logging, metrics, tracer

    @lambda_logging()
    @metrics.log_metrics
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        fire = event.get("schedule_fire")
        if isinstance(fire, dict):  # an EventBridge Scheduler schedule (docs/schedules.md)
            from batchroute.adapters.event_scheduler import fire_request

            org_id, schedule_id, fire_at = fire_request(fire)
            return asdict(wiring_for().schedules.fire(org_id, schedule_id, fire_at))
        if all(event.get(k) == v for k, v in RECONCILIATION_EVENT.items()):  # docs/payments.md
            return dict(wiring_for().payments_reconciliation.run())
        return dict(wiring_for().sweeper.sweep())

    return handler
