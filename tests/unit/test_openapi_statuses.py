"""Every status a route can answer is in the OpenAPI document the app serves (issue 27 point 3:
the compat upload `parts`/`complete` answered 409 `upload_not_pending`, which it did not list).

What a route can answer is read from the code, not from a list kept beside it:
- what its dependencies imply: credentials (`current_principal`) can fail, 401; a permission
  or a signed-in user (`require`, `session_principal`) can be refused, 403; and every write
  can be refused by the middleware before routing (403 `forbidden_origin`, 413);
- the domain errors its handler can raise, mapped to their status by functions/api/errors.py:
  the `raise`s in the endpoint itself and in the methods of the services it is given (by the
  parameter's type), following `self.<method>` calls within each service. Errors raised
  deeper (a store, another service) are not followed: this is a floor, and schemathesis
  (tests/integration/test_schemathesis.py) checks the answers of generated requests on top.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from batchroute.errors import ServiceError
from functions.api import auth
from functions.api.app import create_app
from functions.api.errors import STATUS_BY_KIND
from functions.api.lazy_routes import route_modules, router_of
from functions.api.openapi import WRITE_METHODS, WRITE_REFUSALS


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@cache
def _error_statuses() -> dict[str, int]:
    """Each domain error class's name -> its HTTP status (every route module imported first)."""
    routes()
    errors = [ServiceError, *_subclasses(ServiceError)]
    return {cls.__name__: STATUS_BY_KIND[cls.kind] for cls in errors}  # type: ignore[attr-defined]


def _raised(node: ast.AST, namespace: dict[str, Any]) -> set[int]:
    """The statuses of the errors `node` raises: `raise Conflict(...)`, or `raise make(...)`
    where `make` (looked up in the code's module) is annotated to return an error."""
    statuses = _error_statuses()
    found = set()
    for raise_ in (n for n in ast.walk(node) if isinstance(n, ast.Raise) and n.exc is not None):
        target = raise_.exc.func if isinstance(raise_.exc, ast.Call) else raise_.exc
        name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", None)
        if name not in statuses and inspect.isfunction(namespace.get(name)):
            returned = typing.get_type_hints(namespace[name]).get("return")
            name = returned.__name__ if inspect.isclass(returned) else name
        if name in statuses:
            found.add(statuses[name])
    return found


def _tree(obj: Any) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError):  # built in, or generated
        return None


@cache
def _method_statuses(cls: type) -> dict[str, frozenset[int]]:
    """Each method of a service class -> what it and the methods it calls on `self` raise."""
    tree = _tree(cls)
    if tree is None:
        return {}
    methods = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    calls = {
        name: {
            a.attr
            for a in ast.walk(node)
            if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"
        }
        & set(methods)
        for name, node in methods.items()
    }
    closed: dict[str, frozenset[int]] = {}
    for name in methods:
        seen, todo, statuses = {name}, [name], set()
        while todo:
            current = todo.pop()
            statuses |= _raised(methods[current], vars(sys.modules[cls.__module__]))
            for callee in calls[current] - seen:
                seen.add(callee)
                todo.append(callee)
        closed[name] = frozenset(statuses)
    return closed


def _parameter_classes(endpoint: Callable[..., Any]) -> dict[str, type]:
    classes = {}
    for name, hint in typing.get_type_hints(endpoint, include_extras=True).items():
        base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
        if inspect.isclass(base):
            classes[name] = base
    return classes


def raised_by(route: APIRoute) -> set[int]:
    tree = _tree(route.endpoint)
    assert tree is not None, route.path
    statuses = _raised(tree, route.endpoint.__globals__)
    services = _parameter_classes(route.endpoint)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in services:
            statuses |= _method_statuses(services[node.value.id]).get(node.attr, frozenset())
    return statuses


def _calls(dependant: Dependant) -> Iterator[Any]:
    yield dependant.call
    for sub in dependant.dependencies:
        yield from _calls(sub)


def implied_by_dependencies(route: APIRoute, method: str) -> set[int]:
    calls = list(_calls(route.dependant))
    statuses = set()
    if auth.current_principal in calls:
        statuses.add(401)
    if auth.session_principal in calls or any(hasattr(call, "permission") for call in calls):
        statuses.add(403)
    if method.lower() in WRITE_METHODS:
        statuses |= {int(status) for status in WRITE_REFUSALS}
    return statuses


@cache
def routes() -> tuple[tuple[str, APIRoute], ...]:
    return tuple(
        (method, route)
        for module, _ in route_modules()
        for route in router_of(module).routes
        if isinstance(route, APIRoute)
        for method in sorted(route.methods)
    )


@cache
def _document() -> dict[str, Any]:
    return create_app().openapi()


def documented(method: str, path: str) -> set[int]:
    operation = _document()["paths"][path.replace(":path}", "}")][method.lower()]
    return {int(status) for status in operation["responses"] if status.isdigit()}


def _id(value: Any) -> str:
    return value.path if isinstance(value, APIRoute) else str(value)


@pytest.mark.parametrize(("method", "route"), routes(), ids=_id)
def test_every_status_a_route_can_answer_is_documented(method: str, route: APIRoute) -> None:
    can_answer = implied_by_dependencies(route, method) | raised_by(route)
    missing = can_answer - documented(method, route.path)
    assert not missing, f"{method} {route.path} can answer {sorted(missing)}, undocumented"


def test_the_reading_finds_what_it_should() -> None:
    # The known gap of the issue: adding a part to, or completing, a finished upload is 409
    by_path = {(m, r.path): r for m, r in routes()}
    for action in ("parts", "complete"):
        route = by_path[("POST", f"/v1/compat/v1/uploads/{{upload_id}}/{action}")]
        assert 409 in raised_by(route)
    # Through a service's own helper methods (self.<method>), and in the endpoint itself
    assert 404 in raised_by(by_path[("GET", "/v1/schedules/{schedule_id}")])
    assert 413 in raised_by(by_path[("POST", "/v1/compat/v1/uploads/{upload_id}/parts")])
    login = implied_by_dependencies(by_path[("POST", "/v1/auth/login")], "POST")
    assert login == {403, 413}
    assert implied_by_dependencies(by_path[("GET", "/v1/auth/account")], "GET") == {401, 403}
