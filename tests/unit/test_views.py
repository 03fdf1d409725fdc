"""A public view read off a record (domain/views.py): one key list, the view's TypedDict; and
a record made of another the same way (`made_from`)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import ForwardRef, Generic, TypedDict, TypeVar, is_typeddict

import pytest

from batchroute.domain.delivery.webhooks import WebhookAttempt, WebhookDeliveryRecord, WebhookDeliveryView
from batchroute.domain.views import made_from, view_of

Changes = TypeVar("Changes")


class _BaseView(TypedDict):
    id: str
    status: str


class _FullView(_BaseView, total=False):
    size: int
    note: str | None


class _HistoryView(TypedDict, Generic[Changes]):
    id: str
    before: Changes


@dataclass(frozen=True, slots=True)
class _Record:
    record_id: str
    status: str
    size: int
    note: str | None = None
    secret: str = "s3cr3t"


def test_each_declared_key_comes_from_the_same_named_attribute_in_declared_order() -> None:
    record = _Record("r1", "ready", 7)
    shown = view_of(record, _FullView, id=record.record_id)
    assert shown == {"id": "r1", "status": "ready", "size": 7, "note": None}
    assert list(shown) == ["id", "status", "size", "note"]  # a base view's keys first


def test_an_objects_id_and_object_lead_its_view() -> None:
    class Placed(TypedDict):
        bucket: str

    class Target(Placed):
        name: str
        object: str
        id: str

    @dataclass(frozen=True)
    class Record:
        bucket: str
        name: str

    shown = view_of(Record("b", "n"), Target, id="t1", object="delivery_target")
    assert list(shown) == ["id", "object", "bucket", "name"]


def test_a_given_value_wins_and_an_undeclared_attribute_is_never_shown() -> None:
    shown = view_of(_Record("r1", "ready", 7), _BaseView, id="other", status="done")
    assert shown == {"id": "other", "status": "done"}
    assert "secret" not in view_of(_Record("r1", "ready", 7), _FullView, id="r1")


def test_a_key_the_record_lacks_is_an_error_not_a_gap() -> None:
    @dataclass(frozen=True)
    class Bare:
        id: str

    with pytest.raises(AttributeError, match="status"):
        view_of(Bare("x"), _BaseView)


def test_a_given_key_the_view_does_not_declare_is_refused() -> None:
    with pytest.raises(TypeError, match="_BaseView declares no colour"):
        view_of(_Record("r1", "ready", 7), _BaseView, id="r1", colour="red")


def test_a_generic_view_reads_its_keys_from_its_declaration() -> None:
    @dataclass(frozen=True)
    class Entry:
        id: str
        before: int

    assert view_of(Entry("e1", 3), _HistoryView[int]) == {"id": "e1", "before": 3}


def test_a_webhook_delivery_shows_its_public_fields_and_never_its_payload_or_secret() -> None:
    record = WebhookDeliveryRecord(
        delivery_id="wd_1",
        org_id="org_1",
        event_id="evt_1",
        event_type="batch.completed",
        url="https://hooks.example.com/in",
        status="delivered",
        attempt_count=1,
        created_at="2026-12-04T10:00:00Z",
        updated_at="2026-12-04T10:00:01Z",
        payload='{"secret":"payload"}',
        secret_source="batch",
        secret_sealed="ciphertext",
        last_response_status=200,
    )
    shown = record.to_api()
    assert set(shown) == set(WebhookDeliveryView.__annotations__)
    assert shown["id"] == "wd_1" and shown["last_response_status"] == 200
    assert "payload" not in shown and "secret_sealed" not in shown and "org_id" not in shown
    attempt = WebhookAttempt("wd_1", 2, at="2026-12-04T10:00:01Z", status_code=500, error="HTTP 500")
    assert attempt.to_api() == {
        "delivery_id": "wd_1",
        "attempt": 2,
        "at": "2026-12-04T10:00:01Z",
        "status_code": 500,
        "error": "HTTP 500",
        "duration_ms": 0,
    }


def test_a_record_made_of_another_takes_each_field_by_name_and_a_given_value_wins() -> None:
    @dataclass(frozen=True)
    class Summary:
        status: str
        size: int
        label: str = "none"

    made = made_from(_Record("r1", "ready", 7), Summary, label="given")
    assert made == Summary("ready", 7, "given")
    assert made_from(_Record("r1", "ready", 7), Summary, size=9, label="x").size == 9


def test_a_field_the_source_lacks_is_an_error_even_where_it_has_a_default() -> None:
    @dataclass(frozen=True)
    class Summary:
        status: str
        colour: str = "red"

    with pytest.raises(AttributeError, match="colour"):
        made_from(_Record("r1", "ready", 7), Summary)


def test_a_given_field_the_record_does_not_declare_is_refused() -> None:
    @dataclass(frozen=True)
    class Summary:
        status: str

    with pytest.raises(TypeError, match="Summary declares no colour"):
        made_from(_Record("r1", "ready", 7), Summary, colour="red")


# -- every view read off a record keeps the record's types ---------------------------------------
# A literal `to_api` had mypy check each value against its key's type; `view_of` copies by name,
# so this reads every call in the layer and holds each copied attribute's declared type to the
# view's: the same, or members of the view's union (`str` where the view says `str | None`),
# or anything where the view says `object`.
LAYER = Path(__file__).resolve().parents[2] / "layers/shared/python"


def _view_calls(name: str = "view_of") -> Iterator[tuple[str, object, object, set[str]]]:
    """(where, the record's class, the view, the keys given) for each `view_of` call (or
    `made_from`: the record made in place of the view)."""
    for path in sorted((LAYER / "batchroute").rglob("*.py")):
        source = path.read_text()
        if f"{name}(" not in source or path.name == "views.py":
            continue
        module = importlib.import_module(".".join(path.relative_to(LAYER).with_suffix("").parts))
        tree = ast.parse(source)
        owners = {id(f): c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
                if not (isinstance(call.func, ast.Name) and call.func.id == name):
                    continue
                where = f"{path.name}:{call.lineno}"
                record = call.args[0]
                assert isinstance(record, ast.Name), where
                if record.id == "self":
                    kind = getattr(module, owners[id(function)].name)
                else:
                    (annotation,) = (a.annotation for a in function.args.args if a.arg == record.id)
                    assert annotation is not None, where
                    kind = eval(ast.unparse(annotation), vars(module))  # noqa: S307 (our own source)
                made = ast.unparse(call.args[1])
                owner = owners.get(id(function))
                shape = getattr(module, owner.name) if made == "cls" and owner else eval(made, vars(module))  # noqa: S307
                yield (
                    where,
                    kind,
                    getattr(shape, "__origin__", shape),
                    {k.arg for k in call.keywords if k.arg},
                )


# Read as the tests are collected: importing the layer's services (the tracer) opens a socket.
VIEW_CALLS = list(_view_calls())
MADE_CALLS = list(_view_calls("made_from"))


def _declared(kind: type, name: str) -> str:
    """The annotation a record declares for `name`: a field's, or a property's return type."""
    for klass in kind.__mro__:
        if name in vars(klass).get("__annotations__", {}):
            return str(vars(klass)["__annotations__"][name])
    member = getattr(kind, name)
    assert isinstance(member, property), f"{kind.__name__}.{name} is neither field nor property"
    return str(member.fget.__annotations__["return"])


def _members(annotation: object) -> set[str]:
    text = annotation.__forward_arg__ if isinstance(annotation, ForwardRef) else str(annotation)
    return {part.strip() for part in text.split("|")}


def test_every_view_read_off_a_record_keeps_the_records_types() -> None:
    assert len(VIEW_CALLS) >= 30  # every to_api the views module took over
    for where, kind, shape, given in VIEW_CALLS:
        assert isinstance(kind, type) and is_typeddict(shape), where
        for key, annotation in shape.__annotations__.items():
            if key not in given:
                have, want = _members(_declared(kind, key)), _members(annotation)
                assert have <= want or want & {"object", "Any"}, (where, key, have, want)


def test_every_record_made_of_another_keeps_the_sources_types() -> None:
    assert len(MADE_CALLS) >= 3  # the settlement result, a schedule's definition, feedback
    for where, kind, made, given in MADE_CALLS:
        assert isinstance(kind, type) and isinstance(made, type) and is_dataclass(made), where
        for each in fields(made):
            if each.init and each.name not in given:
                have, want = _members(_declared(kind, each.name)), _members(_declared(made, each.name))
                assert have <= want or want & {"object", "Any"}, (where, each.name, have, want)
