"""docs/roles.md's route table is what the routes enforce (issue 27 point 3: it said
receipts need `billing:read` while members read them): every route that takes credentials
is listed, with exactly the permission its `require(...)` dependency names and whether it
needs a signed-in user; every listed route exists. Read from the routers, nothing served."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from batchroute.domain.accounts.access import PERMISSIONS
from functions.api import auth
from functions.api.lazy_routes import route_modules, router_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "roles.md"
ROW = re.compile(r"^\| (GET|HEAD|POST|PUT|PATCH|DELETE) \| `([^`]+)` \| ([^|]*) \| ([^|]*) \|")


@dataclass(frozen=True)
class Guard:
    permissions: frozenset[str]
    session_only: bool


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _dependants(sub)


def route_guards() -> dict[tuple[str, str], Guard]:
    """(method, path) -> its guard, for every route whose dependencies take credentials."""
    guards: dict[tuple[str, str], Guard] = {}
    for module, _ in route_modules():
        for route in router_of(module).routes:
            if not isinstance(route, APIRoute):
                continue
            calls = [d.call for d in _dependants(route.dependant)]
            if not {auth.current_principal, auth.optional_principal} & set(calls):
                continue
            permissions = frozenset(c.permission for c in calls if hasattr(c, "permission"))
            session = auth.session_principal in calls or any(getattr(c, "session_only", False) for c in calls)
            for method in route.methods:
                guards[(method, route.path)] = Guard(permissions, session)
    return guards


def all_routes() -> set[tuple[str, str]]:
    return {
        (method, route.path)
        for module, _ in route_modules()
        for route in router_of(module).routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }


def documented() -> dict[tuple[str, str], Guard]:
    rows: dict[tuple[str, str], Guard] = {}
    for line in DOC.read_text().splitlines():
        found = ROW.match(line)
        if not found:
            continue
        method, path, permission_cell, session_cell = found.groups()
        key = (method, path)
        assert key not in rows, f"{method} {path} is listed twice"
        permissions = frozenset(re.findall(r"`([a-z]+:[a-z]+)`", permission_cell))
        assert permissions <= set(PERMISSIONS), permission_cell
        rows[key] = Guard(permissions, session_cell.strip() == "yes")
    return rows


def test_every_guarded_route_is_listed_with_its_permission_and_session_rule() -> None:
    table, code = documented(), route_guards()
    assert len(code) > 80  # the walk found the routes (a broken walk would pass vacuously)
    missing = sorted(set(code) - set(table))
    assert not missing, f"routes missing from docs/roles.md: {missing}"
    wrong = {key: (table[key], guard) for key, guard in code.items() if table[key] != guard}
    assert not wrong, f"docs/roles.md (first) disagrees with the code (second): {wrong}"


def test_every_listed_route_exists() -> None:
    stale = sorted(set(documented()) - all_routes())
    assert not stale, f"docs/roles.md lists routes the API does not have: {stale}"


def test_receipts_are_read_with_batches_read() -> None:
    # The drift the issue found, pinned: a member (no billing:read) reads a batch's receipt.
    receipt = ("GET", "/v1/batches/{batch_id}/billing-receipt")
    assert route_guards()[receipt] == Guard(frozenset({"batches:read"}), False)
    assert documented()[receipt] == Guard(frozenset({"batches:read"}), False)
