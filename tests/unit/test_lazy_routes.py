"""Route modules included on the first request of their paths (functions/api/lazy_routes.py):
the route modules are found in the folders (one package per context), every route is reachable
through the prefixes read from its module's source, no two modules serve the same path, the
app's routes keep one order whatever order they are included in, a request includes only the
modules its path could reach, and the document includes them all."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from functions.api import routes as routes_package
from functions.api.app import create_app
from functions.api.lazy_routes import modules_for, route_modules, router_of


def _api_routes(app_routes: list[Any]) -> list[APIRoute]:
    """The app's API routes in routing order (an included router stands for its routes)."""
    flat: list[APIRoute] = []
    for route in app_routes:
        if isinstance(route, APIRoute):
            flat.append(route)
        elif hasattr(route, "original_router"):
            flat.extend(_api_routes(route.original_router.routes))
    return flat


def _route_keys(app_routes: list[Any]) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.path, tuple(sorted(r.methods))) for r in _api_routes(app_routes)]


def test_the_route_modules_are_the_folders_modules() -> None:
    folder = Path(routes_package.__path__[0])
    on_disk = {f"{path.parent.name}.{path.stem}" for path in folder.glob("*/*.py") if path.stem != "__init__"}
    listed = [module for module, _ in route_modules()]
    assert listed == sorted(on_disk)
    assert [path.name for path in folder.glob("*.py")] == ["__init__.py"]  # no module outside a context
    services = Path(__file__).resolve().parents[2] / "layers/shared/python/batchroute/services"
    contexts = {path.name for path in services.iterdir() if (path / "__init__.py").exists()}
    assert {module.split(".")[0] for module in listed} <= contexts  # grouped as services/ is


def test_no_two_modules_serve_one_path() -> None:
    """So the order the modules are included in never changes which route answers."""
    routes = [(module, route) for module, _ in route_modules() for route in router_of(module).routes]
    for module, route in routes:
        assert isinstance(route, APIRoute)
        concrete = re.sub(r"\{[^}]+\}", "x1", route.path)
        clashes = [
            (other, other_route.path)
            for other, other_route in routes
            if other != module
            and isinstance(other_route, APIRoute)
            and other_route.path_regex.match(concrete)
            and route.methods & other_route.methods
        ]
        assert clashes == [], (module, route.path)


def test_every_route_starts_with_a_declared_prefix_of_its_module() -> None:
    for module, prefixes in route_modules():
        router = router_of(module)
        assert router.routes, module
        for route in router.routes:
            assert isinstance(route, APIRoute)
            literal = route.path.split("{")[0]  # the router's prefix included
            assert any(literal.startswith(prefix) for prefix in prefixes), (module, route.path)
            # and a request to the route's path includes the module
            assert module in modules_for(route.path)


def test_routes_keep_one_order_whatever_order_requests_come_in() -> None:
    complete = create_app()
    complete.openapi()  # includes every module
    expected = _route_keys(complete.routes)
    assert len(expected) == sum(len(router_of(m).routes) for m, _ in route_modules())

    app = create_app()
    client = TestClient(app, raise_server_exceptions=False)
    # the reverse of the declared order, and a path shared by three modules
    paths = [
        "/v1/schedules",
        "/v1/compat/v1/files",
        "/v1/batches/b1/delivery",
        "/v1/auth/login",
        "/v1/health",
    ]
    for path in paths:
        client.get(path)
    included = _route_keys(app.routes)
    assert included == [key for key in expected if key in set(included)]
    assert any(path == "/v1/health" for path, _ in included)
    assert client.get("/docs").status_code == 200  # FastAPI's own routes stay first
    document = client.get("/openapi.json")
    assert document.status_code == 200
    assert _route_keys(app.routes) == expected
    documented = {
        (path, method.upper()) for path, item in document.json()["paths"].items() for method in item
    }
    served = {
        (re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path), method)  # the document drops converters
        for route in _api_routes(app.routes)
        if route.include_in_schema
        for method in route.methods
    }
    assert len(served) > 100
    assert served <= documented


def test_a_request_includes_only_the_modules_its_path_can_reach() -> None:
    app = create_app()
    client = TestClient(app, raise_server_exceptions=False)
    assert client.get("/v1/health").status_code == 200
    paths = {r.path for r in _api_routes(app.routes)}
    assert paths == {r.path for r in router_of("catalog.health").routes}
    assert client.get("/v1/no-such-area").status_code == 404
    assert {r.path for r in _api_routes(app.routes)} == paths


def test_modules_for_a_path_shared_by_several_modules() -> None:
    assert modules_for("/v1/batches/b1/webhook") == [
        "batches.batches",
        "delivery.buckets",
        "delivery.webhooks",
    ]
    assert modules_for("/v1/batches") == ["batches.batches", "delivery.buckets", "delivery.webhooks"]
    assert modules_for("/v1/auth/account/api-keys") == ["accounts.account", "accounts.api_keys"]
    assert modules_for("/openapi.json") == []


def test_a_route_added_to_the_app_later_survives_lazy_includes() -> None:
    # Given an app with a route added after it was built (the local runner mounts the console so)
    app = create_app()

    def page() -> dict[str, str]:
        return {"page": "console"}

    app.add_api_route("/console/{path:path}", page, methods=["GET"], include_in_schema=False)
    client = TestClient(app, raise_server_exceptions=False)

    # When requests include route modules on demand
    assert client.get("/v1/health").status_code == 200
    client.get("/v1/batches")

    # Then the later route is still served
    assert client.get("/console/batches/b1").json() == {"page": "console"}
