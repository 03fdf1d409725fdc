"""What every area of the API shares: money as the read models show it, the plain `{ok: true}`
answer, and the base of the request bodies whose rules live in the services.

A body the service validates itself (batch create, quotes, billing controls, retention,
cancel) is a `ServiceValidatedBody`: its fields are `SkipValidation[...]`, so the OpenAPI
document shows their real types, enums and limits while pydantic checks only that the body
is a JSON object (as `dict` did before: the same 400 `invalid_request`). The route hands the
service `body.as_received()`, the very dict the client sent, and the service answers each
problem in its own words (`batch_preflight_failed`, `invalid_controls`, `details.field`, ...).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SkipValidation, model_validator
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticKnownError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

# A key that is left out rather than null: `x: str | Absent = None` documents a string that
# the answer may not carry at all.
Absent = SkipJsonSchema[None]


class MoneyOut(BaseModel):
    """Money in read models: a lowercase currency and a decimal string."""

    currency: str = Field(description="lowercase, e.g. usd")
    amount: str = Field(description="a decimal string, e.g. 12.5")


class Ok(BaseModel):
    ok: bool = True


class ServiceValidatedBody(BaseModel):
    """A JSON object whose fields the service checks (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    _received: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _json_object(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if not isinstance(data, dict):
            raise PydanticKnownError("dict_type")  # what a `dict` body answered: "a valid dictionary"
        body = handler(data)
        body._received = data
        return body

    def as_received(self) -> dict[str, Any]:
        """The body exactly as the client sent it: every key, no value converted."""
        return self._received


def omittable(description: str | None = None, **schema: Any) -> Any:
    """A field of a ServiceValidatedBody that may be left out: absent is not null (a partial
    update leaves it unchanged), so no default is documented; the service reads what is given."""
    return Field(default=None, description=description, json_schema_extra=schema or None)


def read_only() -> Any:
    """A field that GET shows and PUT accepts (so the read object can be sent back) and ignores."""
    return omittable("read-only: accepted and ignored", readOnly=True)


class PartialUpdate(ServiceValidatedBody):
    """The body of a PUT that changes only the fields it gives (null clears a nullable field);
    unknown fields are refused."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    org_id: SkipValidation[str] = read_only()
    updated_at: SkipValidation[str | None] = read_only()
