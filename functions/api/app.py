"""Assembles the FastAPI app: middleware, error mapping, one router per area.

The routers' modules are imported on the first request of their paths, and all of them for
the OpenAPI document (functions/api/lazy_routes.py, docs/cold-start.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from batchroute.config import Settings, get_settings
from functions.api.envelope import COMMON_ERRORS
from functions.api.errors import install_error_handlers
from functions.api.lazy_routes import LazyRoutes, LazyRoutesMiddleware
from functions.api.middleware import (
    CookieOriginGuard,
    JsonBodyGuard,
    NoSniff,
    ReadOnlyMiddleware,
    RequestContextMiddleware,
    trusted_origins,
)
from functions.api.openapi import document


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app; with `settings`, bound to them (tests), else to the process's settings, read
    on the first request, not at import (a Lambda's init builds the app, nothing more)."""
    current: Callable[[], Settings] = (lambda: settings) if settings is not None else get_settings
    app = FastAPI(
        title="Batch AI Routing Service",
        version="1.0.0",
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        responses=COMMON_ERRORS,
    )
    routes = LazyRoutes(app)
    if settings is not None:
        app.dependency_overrides[get_settings] = current
    install_error_handlers(app)
    app.add_middleware(LazyRoutesMiddleware, routes=routes)
    app.add_middleware(JsonBodyGuard, max_bytes=lambda: current().max_json_body_bytes)
    app.add_middleware(ReadOnlyMiddleware, enabled=lambda: current().read_only)
    app.add_middleware(CookieOriginGuard, trusted=lambda: trusted_origins(current()))
    app.add_middleware(RequestContextMiddleware)
    build_stack = app.build_middleware_stack
    app.build_middleware_stack = lambda: NoSniff(build_stack())  # type: ignore[method-assign]

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            routes.include_all()
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


app = create_app()
