"""API keys: list, create (value shown once) and revoke. Session only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from batchroute.domain.accounts.access import grantable_roles
from batchroute.services.accounts.api_keys import ApiKeys
from functions.api.auth import SessionPrincipal
from functions.api.deps import WiringDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.accounts.api_keys import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyPublic
from functions.api.schemas.common import Ok

router = APIRouter(tags=["account"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorEnvelope, "description": "Not signed in"},
    403: {"model": ErrorEnvelope, "description": "API keys cannot manage keys, or the role may not"},
}


def _api_keys(wiring: WiringDep) -> ApiKeys:
    return wiring.api_keys


ApiKeysDep = Annotated[ApiKeys, Depends(_api_keys)]


@router.get(
    "/v1/auth/account/api-keys",
    response_model=ApiKeyList,
    responses=_ERRORS,
    summary="List the org's API keys (session only); values are never shown again",
)
def list_api_keys(principal: SessionPrincipal, keys: ApiKeysDep) -> ApiKeyList:
    listed = keys.list(principal)
    return ApiKeyList(
        data=[ApiKeyPublic.of(key) for key in listed], grantable_roles=grantable_roles(principal)
    )


@router.post(
    "/v1/auth/account/api-keys",
    status_code=201,
    response_model=ApiKeyCreated,
    responses=_ERRORS,
    summary="Create an API key (session only); the value is returned once",
)
def create_api_key(body: ApiKeyCreate, principal: SessionPrincipal, keys: ApiKeysDep) -> ApiKeyCreated:
    created = keys.create(principal, label=body.label, role=body.role)
    return ApiKeyCreated(key=ApiKeyPublic.of(created.key), api_key=created.value)


@router.post(
    "/v1/auth/account/api-keys/{key_id}/revoke",
    response_model=Ok,
    responses={**_ERRORS, 404: {"model": ErrorEnvelope, "description": "No such key in this org"}},
    summary="Revoke an API key (session only); it stops working at once",
)
def revoke_api_key(key_id: str, principal: SessionPrincipal, keys: ApiKeysDep) -> Ok:
    keys.revoke(principal, key_id)
    return Ok()
