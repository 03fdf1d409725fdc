"""DynamoDB answers written from their wire form, not walked through moto's serializer.

moto answers every DynamoDB call through its generic, model-driven serializer, which for
every attribute of every item asks each of an AttributeValue's ten members (`S`, `N`, `M`,
...) by name whether the value holds it. A Query of the catalog's 30 lane rows took ~40 ms
that way, and DynamoDB answers were two thirds of all DynamoDB time in an API test. An
AttributeValue reaches the serializer already in its wire form (`{"S": ...}`; binary as
bytes, numbers as strings), so it is written as such: the same JSON, without the walk.
Binary values are base64-encoded as moto's serializer encodes them; any other shape (and an
AttributeValue that is not one single-member dict) is moto's own way.

Installed in the local stack's moto process (`make_moto_server`) and in the test suites'
in-process moto (tests/integration/conftest.py); tests/integration/test_moto_shortcuts.py
reads an item holding every kind of value both ways and finds the same answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.core.serialize import BaseJSONSerializer

moto_serialize_structure = BaseJSONSerializer._serialize_type_structure


def install() -> None:
    """Patch moto's JSON serializer in this process (idempotent)."""
    BaseJSONSerializer._serialize_type_structure = _serialize_structure  # type: ignore[method-assign]


def _serialize_structure(self: BaseJSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
    if shape.name == "AttributeValue" and isinstance(value, dict) and len(value) == 1:
        self._default_serialize(serialized, _wire(value, self._base64), shape, key)
    else:
        moto_serialize_structure(self, serialized, value, shape, key)


def _wire(value: dict[str, Any], base64: Callable[[bytes], str]) -> dict[str, Any]:
    ((kind, inner),) = value.items()
    if kind == "M":
        return {"M": {name: _wire(member, base64) for name, member in inner.items()}}
    if kind == "L":
        return {"L": [_wire(member, base64) for member in inner]}
    if kind == "B":
        return {"B": base64(inner)}
    if kind == "BS":
        return {"BS": [base64(member) for member in inner]}
    if kind in ("N", "S"):
        return {kind: str(inner)}
    if kind in ("NS", "SS"):
        return {kind: [str(member) for member in inner]}
    return {kind: inner}  # BOOL, NULL
