"""What every area of the API shares: money as the read models show it, the plain `{ok: true}`
answer, and the bases of the request bodies.

A request body's model is its contract (issue 28): a `ContractBody` (below) is validated here,
at the edge, and is the only list of its fields; the route hands the service the typed command
the model builds (`body.command()`), never the dict the client sent. Each problem is answered in
the spec's terms (`refusal`: `{code, message, details}`, functions/api/errors.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import CoreSchema, PydanticCustomError, PydanticKnownError, core_schema
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from batchroute.domain.request_fields import unknown_fields_error
from batchroute.errors import InvalidRequest
from functions.api.envelope import REFUSAL

# A key that is left out rather than null: `x: str | Absent = None` documents a string that
# the answer may not carry at all.
Absent = SkipJsonSchema[None]
# A text field's pattern where the rule refuses a text of whitespace only.
SOME_TEXT = r"\S"


class MoneyOut(BaseModel):
    """Money in read models: a lowercase currency and a decimal string."""

    currency: str = Field(description="lowercase, e.g. usd")
    amount: str = Field(description="a decimal string, e.g. 12.5")


class Ok(BaseModel):
    ok: bool = True


def omittable(description: str | None = None, **schema: Any) -> Any:
    """A field that may be left out: absent is not null (a partial update leaves it unchanged),
    so no default is documented; the command carries which fields were given."""
    return Field(default=None, description=description, json_schema_extra=schema or None)


def read_only() -> Any:
    """A field that GET shows and PUT accepts (so the read object can be sent back) and ignores."""
    return omittable("read-only: accepted and ignored", readOnly=True)


# -- bodies validated here, at the edge (issue 28) -----------------------------------------
def refusal(code: str, message: str, details: dict[str, Any] | None) -> PydanticCustomError:
    """A validation error in the spec's terms: functions/api/errors.py answers it as
    `{code, message, details}` (the message is no template: no context key appears in it)."""
    return PydanticCustomError(code, message, {REFUSAL: True, "details": details})


def field_path(loc: Sequence[int | str]) -> str:
    """`("alert_thresholds", 0, "value")` -> `alert_thresholds[0].value`, as the spec names fields."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


class ContractBody(BaseModel):
    """A request body whose model is the contract: pydantic checks every field here, once, and
    every problem becomes one `refusal` in the body's own code (`error_code`) with
    `details.field` (the first problem, as the services answered before). Rules the domain owns
    (money bounds, time zones) run as the fields' validators (`domain_rule`) and answer in their
    own words. With `extra="forbid"` an unknown field is refused first, naming all of them.
    A body that is not a JSON object is the plain `invalid_request` it always was."""

    model_config = ConfigDict(extra="ignore")
    error_code: ClassVar[str] = "invalid_request"

    @model_validator(mode="wrap")
    @classmethod
    def _in_spec_terms(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if not isinstance(data, dict):
            raise PydanticKnownError("dict_type")
        if cls.model_config.get("extra") == "forbid":
            known = {field.alias or name for name, field in cls.model_fields.items()}
            unknown = sorted(str(key) for key in data if key not in known)
            if unknown:
                raise cls.unknown_fields(unknown)
        try:
            return handler(data)
        except InvalidRequest as exc:
            raise refusal(exc.code, exc.message, exc.details) from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            field = field_path(first["loc"])
            message = f"{field}: {first['msg']}" if field else first["msg"]
            if first["type"] == "missing":
                message = f"{field} is required."
            raise refusal(cls.error_code, message, {"field": field or None}) from exc

    @classmethod
    def unknown_fields(cls, unknown: list[str]) -> PydanticCustomError:
        """The refusal of unknown fields (sorted), naming the first."""
        details = {"field": unknown[0], "unknown": unknown}
        return refusal(cls.error_code, f"Unknown field {unknown[0]!r}.", details)

    def given(self) -> dict[str, Any]:
        """The fields the client sent, validated, but not the read-only ones it sent back."""
        return {
            name: getattr(self, name)
            for name in self.model_fields_set
            if not _is_read_only(type(self).model_fields[name].json_schema_extra)
        }


def _is_read_only(extra: Any) -> bool:
    return isinstance(extra, dict) and extra.get("readOnly") is True


class domain_rule:
    """A field checked by the domain's own parser (`parse(value, field_name)`, raising
    InvalidRequest in the spec's words), which gives the domain value (Money, a Threshold, ...);
    the OpenAPI document shows `documented`, the shape the client sends."""

    def __init__(self, parse: Callable[[Any, str], Any], documented: Any) -> None:
        self.parse = parse
        self.documented = documented

    def __get_pydantic_core_schema__(self, _source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        def check(value: Any, info: ValidationInfo) -> Any:
            return self.parse(value, info.field_name or "")

        return core_schema.with_info_plain_validator_function(
            check, json_schema_input_schema=handler.generate_schema(self.documented)
        )


def ignored(documented: Any) -> Any:
    """A read-only field sent back: documented as `documented`, taken whatever it holds."""
    return domain_rule(lambda _value, _name: None, documented)


class ContractUpdate(ContractBody):
    """The body of a PUT that changes only the fields it gives (null clears a nullable field);
    unknown fields are refused. GET's read-only fields may be sent back and are ignored."""

    model_config = ConfigDict(extra="forbid")

    org_id: Annotated[Any, ignored(str)] = read_only()
    updated_at: Annotated[Any, ignored(str | None)] = read_only()


class ResourceBody(ContractBody):
    """A body of the service's own resources (feedback, ...): problems are `invalid_request`
    naming the field; unknown fields answer as `batchroute.domain.request_fields` words them."""

    @classmethod
    def unknown_fields(cls, unknown: list[str]) -> PydanticCustomError:
        error = unknown_fields_error(unknown)
        return refusal(error.code, error.message, error.details)


def as_sent(documented: Any) -> Any:
    """A field taken as the client sent it, for the reader that judges the whole body at once
    (a quote or batch body's command parser; a preset's or route policy's domain reader,
    against the deployment's catalog: `command(catalog)`); the OpenAPI document shows
    `documented`."""
    return domain_rule(lambda value, _name: value, documented)
