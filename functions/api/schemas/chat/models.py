"""OpenAI's model list (`ListModelsResponse`, `Model`), as GET /v1/models answers it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class OpenAIModel(BaseModel):
    id: str = Field(description="The exact id a chat completion names")
    object: Literal["model"]
    created: int = Field(description="When its maker released it, Unix seconds")
    owned_by: str = Field(description="Its maker: the vendor, or an open-weight model's organization")


class OpenAIModelList(BaseModel):
    object: Literal["list"]
    data: list[OpenAIModel]
