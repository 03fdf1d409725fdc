"""Request and response models: API keys, listed, created in a user session (the value shown
once) and revoked there."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from batchroute.domain.accounts.access import Role
from batchroute.domain.accounts.accounts import ApiKey


def _printable(label: str) -> str:
    """The label trimmed; blank or holding control characters is refused."""
    trimmed = label.strip()
    if not trimmed or not trimmed.isprintable():
        raise ValueError("label must be 1-120 printable characters, not only spaces")
    return trimmed


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: Annotated[str, AfterValidator(_printable)] = Field(
        min_length=1, max_length=120, description="Shown in key lists: printable text, trimmed"
    )
    role: Role = "member"


class ApiKeyPublic(BaseModel):
    id: str
    label: str
    role: Role
    prefix: str
    created_at: str
    revoked_at: str | None = None

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyPublic:
        return cls(
            id=key.key_id,
            label=key.label,
            role=key.role,
            prefix=key.display_prefix,
            created_at=key.created_at,
            revoked_at=key.revoked_at,
        )


class ApiKeyCreated(BaseModel):
    key: ApiKeyPublic
    api_key: str = Field(description="The key value. Shown once: store it now; it cannot be recovered.")


class ApiKeyList(BaseModel):
    data: list[ApiKeyPublic] = Field(description="The org's keys, newest first; values never shown again.")
    grantable_roles: list[Role] = Field(
        description=(
            "The key roles the caller may create and revoke: those with no permission the caller's "
            "role lacks (docs/roles.md, Granting roles)"
        )
    )
