"""Public content: the changelog and the blog posts (503 `content_disabled` while the store is off)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from batchroute.services.catalog import content
from functions.api.deps import ContentDep
from functions.api.envelope import ErrorEnvelope
from functions.api.schemas.catalog.content import ChangelogOut, PostEnvelope, PostsOut

router = APIRouter(tags=["content"])


_DISABLED: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorEnvelope, "description": "The content store is disabled (`content_disabled`)"},
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorEnvelope, "description": "No such post (`post_not_found`)"},
}


@router.get(
    "/v1/content/changelog",
    response_model=ChangelogOut,
    responses=_DISABLED,
    summary="Changelog entries, newest first",
)
def get_changelog(service: ContentDep) -> content.Changelog:
    return service.changelog()


@router.get(
    "/v1/content/posts",
    response_model=PostsOut,
    responses=_DISABLED,
    summary="Blog posts, newest first by publish date",
)
def list_posts(service: ContentDep) -> content.PostList:
    return service.posts()


@router.get(
    "/v1/content/posts/{slug}",
    response_model=PostEnvelope,
    responses={**_NOT_FOUND, **_DISABLED},
    summary="One blog post",
)
def get_post(slug: str, service: ContentDep) -> content.PostEnvelope:
    return service.post(slug)
