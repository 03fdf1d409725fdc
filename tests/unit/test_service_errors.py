"""The service errors (batchroute/errors.py): each kind's class names its kind and default code
in its class line, and an instance answers them."""

from __future__ import annotations

from batchroute.errors import Conflict, NotFound, PaymentRequired, ServiceError


def test_a_kind_s_class_carries_the_kind_and_the_default_code_its_class_line_names() -> None:
    class Teapot(ServiceError, kind="conflict", code="teapot"): ...

    refused = Teapot("short and stout")
    assert (refused.kind, refused.code, refused.message) == ("conflict", "teapot", "short and stout")
    assert Teapot("x", code="other").code == "other"
    assert isinstance(refused, ServiceError)


def test_the_kinds_keep_their_codes() -> None:
    assert (NotFound.kind, NotFound("x").code) == ("not_found", "not_found")
    assert (Conflict.kind, Conflict("x").code) == ("conflict", "conflict")
    assert (PaymentRequired.kind, PaymentRequired("x").code) == ("payment_required", "insufficient_credits")
    assert (ServiceError.kind, ServiceError("x").code) == ("invalid", "invalid_request")
