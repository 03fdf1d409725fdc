"""The models POST /v1/chat/completions takes, as OpenAI's `GET /v1/models` lists them, so the
official SDK's `client.models.list()` and `client.models.retrieve(id)` work against the
service as against OpenAI (docs/chat.md, "Models"). The catalog's own view, with prices,
lanes and capacity, is `GET /v1/catalog/models`."""

from __future__ import annotations

from fastapi import APIRouter

from batchroute.services.catalog import catalog
from functions.api.deps import CatalogDep
from functions.api.envelope import errors_doc
from functions.api.schemas.chat.models import OpenAIModel, OpenAIModelList

router = APIRouter(tags=["chat"])


@router.get(
    "/v1/models",
    response_model=OpenAIModelList,
    summary="The models a chat completion may name, in OpenAI's model list shape",
)
def list_models(service: CatalogDep) -> catalog.OpenAIModelList:
    return service.chat_models()


@router.get(
    "/v1/models/{model:path}",
    response_model=OpenAIModel,
    responses=errors_doc({404: "No chat model of that id (`model_not_found`)"}),
    summary="One chat model by its exact id (ids may contain slashes), in OpenAI's shape",
)
def get_model(model: str, service: CatalogDep) -> catalog.OpenAIModelView:
    return service.chat_model(model)
