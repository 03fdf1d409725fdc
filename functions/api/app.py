"""Assembles the FastAPI app: middleware, error mapping, one router per area."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from batchroute.config import Settings, get_settings
from functions.api.envelope import COMMON_ERRORS
from functions.api.errors import install_error_handlers
from functions.api.middleware import JsonBodyGuard, ReadOnlyMiddleware, RequestContextMiddleware
from functions.api.openapi import document
from functions.api.routes import (
    account,
    api_keys,
    auth,
    batch_delivery,
    batch_webhooks,
    batches,
    billing,
    billing_events,
    billing_payments,
    catalog,
    chat,
    compat_batches,
    compat_files,
    content,
    delivery_targets,
    feedback,
    files,
    health,
    presets,
    quotes,
    retention,
    routing_policy,
    schedules,
    sessions,
    usage,
    work_orders,
)

ROUTERS = (
    health.router,
    auth.router,
    sessions.router,
    account.router,
    api_keys.router,
    billing.router,
    billing_payments.router,
    billing_events.router,
    retention.router,
    usage.router,
    batch_webhooks.router,
    batch_delivery.router,
    delivery_targets.router,
    presets.router,
    catalog.router,
    content.router,
    files.router,
    quotes.router,
    batches.router,
    chat.router,
    compat_files.router,
    compat_batches.router,
    routing_policy.router,
    work_orders.router,
    feedback.router,
    schedules.router,
)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app; with `settings`, bound to them (tests), else to the process's settings, read
    on the first request, not at import (a Lambda's init builds the routes, nothing more)."""
    current: Callable[[], Settings] = (lambda: settings) if settings is not None else get_settings
    app = FastAPI(
        title="Batch AI Routing Service",
        version="1.0.0",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        responses=COMMON_ERRORS,
    )
    for router in ROUTERS:
        app.include_router(router)
    if settings is not None:
        app.dependency_overrides[get_settings] = current
    install_error_handlers(app)
    app.add_middleware(JsonBodyGuard, max_bytes=lambda: current().max_json_body_bytes)
    app.add_middleware(ReadOnlyMiddleware, enabled=lambda: current().read_only)
    app.add_middleware(RequestContextMiddleware)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


app = create_app()
