"""Route modules imported on the first request of their paths (docs/cold-start.md).

The API function's init imports FastAPI, the middleware and the error mapping, not the 26
route modules: together with their schemas and the services their dependencies name they are
most of the import time. `LazyRoutes` knows, for each module, the literal path prefixes its
routes start with (`ROUTE_MODULES`); a request imports and includes the modules whose
prefixes its path could match, before routing. The routes already included are kept in the
order of `ROUTE_MODULES` (the order the app always included them in), and every route that
could match a path is included before that path is routed, so the route a request reaches,
and a 404, 405 or slash redirect, are the same as with every module included up front.
The OpenAPI document includes every module first (functions/api/app.py), and so does the
SnapStart before-snapshot hook, through it.
"""

from __future__ import annotations

import importlib
import threading

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

PACKAGE = "functions.api.routes"

# (module, the literal prefixes of its routes' paths), in the order the app includes them.
# tests/unit/test_lazy_routes.py checks every route's path against its module's prefixes.
ROUTE_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("health", ("/v1/health", "/v1/runtime")),
    ("auth", ("/v1/auth/",)),
    ("sessions", ("/v1/sessions/",)),
    ("account", ("/v1/auth/account",)),
    ("api_keys", ("/v1/auth/account/api-keys",)),
    ("billing", ("/v1/billing/controls",)),
    ("billing_payments", ("/v1/billing/auto-topup", "/v1/billing/checkout", "/v1/billing/stripe/")),
    ("billing_events", ("/v1/billing/events",)),
    ("retention", ("/v1/retention-settings",)),
    ("usage", ("/v1/usage",)),
    ("batch_webhooks", ("/v1/batches/",)),
    ("batch_delivery", ("/v1/batches/",)),
    ("delivery_targets", ("/v1/delivery-targets",)),
    ("presets", ("/v1/presets",)),
    ("catalog", ("/v1/catalog/", "/v1/pricing/", "/v1/providers")),
    ("content", ("/v1/content/",)),
    ("files", ("/v1/files",)),
    ("quotes", ("/v1/quotes/",)),
    ("batches", ("/v1/batches",)),
    ("chat", ("/v1/chat/completions",)),
    ("compat_files", ("/v1/compat/v1/files", "/v1/compat/v1/uploads")),
    ("compat_batches", ("/v1/compat/v1/batches",)),
    ("routing_policy", ("/v1/routing/policy",)),
    ("work_orders", ("/v1/work-orders",)),
    ("feedback", ("/v1/feedback",)),
    ("schedules", ("/v1/schedules",)),
)


def router_of(module: str) -> APIRouter:
    router: APIRouter = importlib.import_module(f"{PACKAGE}.{module}").router
    return router


def modules_for(path: str) -> list[str]:
    """The modules with a route that `path` could reach, directly or by a slash redirect."""
    candidates = {path, path.rstrip("/"), path + "/"}
    return [
        module
        for module, prefixes in ROUTE_MODULES
        if any(candidate.startswith(prefix) for candidate in candidates for prefix in prefixes)
    ]


class LazyRoutes:
    """The app's route modules, included on demand in their fixed order."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._base: list[BaseRoute] = list(app.router.routes)  # the document and docs routes
        self._included: dict[str, list[BaseRoute]] = {}
        self._lock = threading.Lock()

    def include(self, modules: list[str]) -> None:
        if all(module in self._included for module in modules):
            return
        with self._lock:
            missing = [module for module in modules if module not in self._included]
            if not missing:
                return
            routes = self._app.router.routes
            known = {id(route) for route in self._base}
            known.update(id(route) for included in self._included.values() for route in included)
            extra = [route for route in routes if id(route) not in known]  # added to the app later
            for module in missing:
                before = len(routes)
                self._app.include_router(router_of(module))
                self._included[module] = routes[before:]
            ordered = [route for module, _ in ROUTE_MODULES for route in self._included.get(module, ())]
            routes[:] = self._base + ordered + extra
            self._app.router._mark_routes_changed()  # what include_router does after a change

    def include_all(self) -> None:
        self.include([module for module, _ in ROUTE_MODULES])

    def include_for(self, scope: Scope) -> None:
        path = scope["path"]
        root_path = scope.get("root_path", "")
        modules = modules_for(path)
        if root_path and path.startswith(root_path):
            modules += modules_for(path[len(root_path) :])
        if modules:
            self.include(modules)


class LazyRoutesMiddleware:
    """Includes the route modules a request's path needs before the app routes it."""

    def __init__(self, app: ASGIApp, routes: LazyRoutes) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            self.routes.include_for(scope)
        await self.app(scope, receive, send)
