"""Request and response models: presets, an org's named and versioned request templates
(docs/presets.md).

Each body is read once, at the edge, by the domain's reader against the deployment's catalog
(batchroute.domain.presets.presets.parse_preset: every problem at once with its field path,
`invalid_preset`, `details.field` and `details.errors`) into the service's command
(services/presets/commands.py); a PATCH's fields are judged merged over the latest version.
A body copied from a GET answer may be sent back to PUT or PATCH: its read-only fields are
ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from batchroute.domain.catalog.catalog import Catalog, HostedTool, Operation, PrivacyTier
from batchroute.domain.presets.golden_sets import MAX_GOLDEN_MODEL
from batchroute.domain.presets.presets import (
    DESCRIPTION_MAX,
    NAME_PATTERN,
    STOP_CHARS_MAX,
    STOP_MAX,
    SYSTEM_PROMPT_MAX,
    check_same_name,
    parse_preset,
)
from batchroute.domain.routing.gates import RoutingMode
from batchroute.domain.routing.items import MAX_OUTPUT_REQUEST
from batchroute.services.presets.commands import CreatePreset, PatchPreset, ReplacePreset
from functions.api.schemas.batches.batches import Metadata
from functions.api.schemas.batches.quotes import MaxPrice
from functions.api.schemas.common import SOME_TEXT, ContractBody, as_sent, omittable, read_only
from functions.api.schemas.schedules.schedules import GOLDEN_SET_DOC, GoldenSetBody, RegressionRunFields


class _PlainFormat(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text", "json_object"]


class _JsonSchemaSpec(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str | None = None
    schema_: dict[str, Any] = Field(alias="schema", description="The JSON schema the answer follows")


class _JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["json_schema"]
    json_schema: _JsonSchemaSpec


StopText = Annotated[str, Field(min_length=1, max_length=STOP_CHARS_MAX)]
OutputLimit = Annotated[int, Field(ge=1, le=MAX_OUTPUT_REQUEST)]


class PresetGoldenSet(GoldenSetBody):
    model: str | None = Field(  # type: ignore[assignment]
        default=None, min_length=1, max_length=MAX_GOLDEN_MODEL, description="The preset's model"
    )


class PresetParameters(BaseModel):
    """Generation parameters; each fills the request only where it gives none."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"not": {"required": ["max_output_tokens", "max_tokens"]}}
    )

    max_output_tokens: OutputLimit | None = Field(
        default=None, description="A chat body gets it as max_tokens"
    )
    max_tokens: OutputLimit | None = Field(
        default=None, description="The chat-completions name of max_output_tokens (not both)"
    )
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    response_format: Annotated[_PlainFormat | _JsonSchemaFormat, Field(discriminator="type")] | None = Field(
        default=None,
        description="{type: text}, {type: json_object} or {type: json_schema, json_schema: {name, schema}}",
    )
    required_tools: list[HostedTool] | None = Field(
        default=None, description="Hosted tools the lane must offer (items and batches)"
    )
    stop: StopText | Annotated[list[StopText], Field(min_length=1, max_length=STOP_MAX)] | None = None


class PresetRouting(BaseModel):
    """Routing and privacy settings: request-level, they fill a batch or quote body naming the
    preset at its top level, and a chat body (`privacy_tier`)."""

    model_config = ConfigDict(extra="forbid")

    routing_mode: RoutingMode | None = None
    privacy_tier: PrivacyTier | None = None
    region: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    max_price: MaxPrice | None = None


class _PresetFields(ContractBody):
    """The template's fields, documented here and read as sent (in the client's order, which a
    PATCH naming both model and workflow_product keeps) by the domain's reader."""

    model_config = ConfigDict(extra="allow")

    description: Annotated[
        Any, as_sent(Annotated[str, Field(max_length=DESCRIPTION_MAX, pattern=SOME_TEXT)] | None)
    ] = omittable()
    model: Annotated[Any, as_sent(str | None)] = omittable(
        "An exact catalog model id (or workflow_product, not both)"
    )
    workflow_product: Annotated[Any, as_sent(str | None)] = omittable(
        "A workflow product slug: its operation, instructions and output schema fill the request; "
        "the model comes from the request"
    )
    operation: Annotated[Any, as_sent(Operation | None)] = omittable("responses, embeddings or vision")
    system_prompt: Annotated[
        Any, as_sent(Annotated[str, Field(max_length=SYSTEM_PROMPT_MAX, pattern=SOME_TEXT)] | None)
    ] = omittable("Prepended as a system message unless the request has one")
    parameters: Annotated[Any, as_sent(PresetParameters | None)] = omittable()
    routing: Annotated[Any, as_sent(PresetRouting | None)] = omittable()
    metadata: Annotated[Any, as_sent(Metadata | None)] = omittable()
    golden_set: Annotated[Any, as_sent(PresetGoldenSet | None)] = omittable(
        GOLDEN_SET_DOC + "; model defaults to the preset's (and must be it). "
        "POST /v1/presets/{name}/regression-runs runs it with the preset applied"
    )

    _sent: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _as_sent(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        body = handler(data)  # a JSON object, or the plain invalid_request
        body._sent = data
        return body


class PresetCreate(_PresetFields):
    """A new preset (version 1), or an archived name back in use at its next version.
    Unknown fields are refused."""

    model_config = ConfigDict(
        json_schema_extra={
            "additionalProperties": False,
            "required": ["name"],
            "examples": [
                {
                    "name": "support-triage",
                    "model": "gpt-4o-mini",
                    "operation": "responses",
                    "system_prompt": "You triage support tickets. Answer in one line.",
                    "parameters": {"max_output_tokens": 200, "temperature": 0.2},
                    "routing": {"privacy_tier": "confidential"},
                }
            ],
        }
    )

    name: Annotated[Any, as_sent(Annotated[str, Field(pattern=NAME_PATTERN)])] = omittable(
        "1-64 lowercase letters, digits, '-' or '_'; unique in the organization"
    )

    def command(self, catalog: Catalog) -> CreatePreset:
        content = parse_preset(self._sent, catalog, with_name=True)
        return CreatePreset(name=self._sent["name"], content=content)


class PresetReplace(_PresetFields):
    """PUT: the whole template again, as the next version (fields left out are dropped).
    PATCH: the fields given over the latest version (`parameters` and `routing` merge key by
    key; null removes). Unknown fields are refused; the read-only fields of a GET are ignored."""

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})

    name: Annotated[Any, as_sent(str)] = omittable("If given, the preset's own name: it cannot change")
    object: Annotated[Any, as_sent(str)] = read_only()
    version: Annotated[Any, as_sent(int)] = read_only()
    latest_version: Annotated[Any, as_sent(int)] = read_only()
    ref: Annotated[Any, as_sent(str)] = read_only()
    archived_at: Annotated[Any, as_sent(str | None)] = read_only()
    created_at: Annotated[Any, as_sent(str)] = read_only()
    updated_at: Annotated[Any, as_sent(str)] = read_only()
    created_by: Annotated[Any, as_sent(str | None)] = read_only()

    def replacement(self, name: str, catalog: Catalog) -> ReplacePreset:
        """PUT's command: the preset `name`'s whole template."""
        check_same_name(name, self._sent.get("name", name))
        return ReplacePreset(parse_preset(self._sent, catalog, with_name=False))

    def patch(self, name: str) -> PatchPreset:
        """PATCH's command: the fields given, judged once merged over the latest version."""
        check_same_name(name, self._sent.get("name", name))
        return PatchPreset(dict(self._sent))


class PresetParametersOut(BaseModel):
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    response_format: dict[str, Any] | None = None
    required_tools: list[str] | None = None
    stop: str | list[str] | None = None


class PresetRoutingOut(BaseModel):
    routing_mode: str | None = None
    privacy_tier: str | None = None
    region: str | None = None
    max_price: dict[str, Any] | None = None


class _PresetContent(BaseModel):
    name: str
    version: int
    ref: str = Field(description="name@version: what a request may name to pin this version")
    description: str | None
    model: str | None
    workflow_product: str | None
    operation: str | None
    system_prompt: str | None
    parameters: PresetParametersOut
    routing: PresetRoutingOut
    metadata: dict[str, str] | None
    golden_set: dict[str, Any] | None = Field(description="The version's golden set, or null")
    created_by: str | None = Field(description="The user or API key that wrote this version")


class PresetOut(_PresetContent):
    """A preset: its latest version's content."""

    object: Literal["preset"]
    latest_version: int
    archived_at: str | None = Field(description="Set once deleted: the name takes no new requests")
    created_at: str
    updated_at: str


class PresetVersionOut(_PresetContent):
    """One immutable version."""

    object: Literal["preset.version"]
    created_at: str


class PresetList(BaseModel):
    object: Literal["list"]
    data: list[PresetOut]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null at the end")
    limit: int = Field(description="How many presets an organization may keep")


class PresetVersionList(BaseModel):
    object: Literal["list"]
    name: str
    data: list[PresetVersionOut] = Field(description="Newest first")
    next_cursor: str | None


class PresetRegressionRun(RegressionRunFields):
    object: Literal["preset.regression_run"]
    preset: str = Field(description="The preset's name; version is the preset version run")


class PresetRegressionRunList(BaseModel):
    object: Literal["list"]
    data: list[PresetRegressionRun]
