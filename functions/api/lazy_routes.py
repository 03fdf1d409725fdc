"""Route modules imported on the first request of their paths (docs/cold-start.md).

The API function's init imports FastAPI, the middleware and the error mapping, not the route
modules: together with their schemas and the services their dependencies name they are most
of the import time. The route modules are found in the folders, one package per context
(`routes/<context>/<module>.py`, as `services/<context>/`), and what paths each serves is
read from its source, not imported: the literal part of its router's prefix and of each
`@router.<method>("...")` path, up to the first `{` (`route_modules()`). A request imports
and includes the modules whose prefixes its path could match, before routing. No two modules
serve the same path (tests/unit/test_lazy_routes.py), so the order they are included in does
not change which route a request reaches; they are kept in one fixed order all the same (by
name), so a 404, 405 or slash redirect is the same as with every module included up front.
The OpenAPI document includes every module first (functions/api/app.py), and so does the
SnapStart before-snapshot hook, through it.
"""

from __future__ import annotations

import importlib
import re
import threading
from functools import cache
from pathlib import Path

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

PACKAGE = "functions.api.routes"
FOLDER = Path(__file__).resolve().parent / "routes"
_ROUTER_PREFIX = re.compile(r"^router = APIRouter\([^\n]*?\bprefix=\"([^\"]*)\"", re.M)
_ROUTE_PATH = re.compile(
    r"^@router\.(?:get|post|put|patch|delete|head|options|api_route)\(\s*\"([^\"]+)\"", re.M
)


def _prefixes(source: str) -> tuple[str, ...]:
    """The literal beginnings of the paths a route module's source declares."""
    found = _ROUTER_PREFIX.search(source)
    router_prefix = found.group(1) if found else ""
    return tuple(sorted({(router_prefix + path).split("{")[0] for path in _ROUTE_PATH.findall(source)}))


@cache
def route_modules() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(`<context>.<module>`, the literal prefixes of its routes' paths), by name."""
    return tuple(
        (f"{path.parent.name}.{path.stem}", _prefixes(path.read_text()))
        for path in sorted(FOLDER.glob("*/*.py"))
        if path.stem != "__init__"
    )


def router_of(module: str) -> APIRouter:
    router: APIRouter = importlib.import_module(f"{PACKAGE}.{module}").router
    return router


def modules_for(path: str) -> list[str]:
    """The modules with a route that `path` could reach, directly or by a slash redirect."""
    candidates = {path, path.rstrip("/"), path + "/"}
    return [
        module
        for module, prefixes in route_modules()
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
            ordered = [route for module, _ in route_modules() for route in self._included.get(module, ())]
            routes[:] = self._base + ordered + extra
            self._app.router._mark_routes_changed()  # what include_router does after a change

    def include_all(self) -> None:
        self.include([module for module, _ in route_modules()])

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
