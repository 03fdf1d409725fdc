"""The public content: changelog and blog posts, newest first; unavailable (503
`content_disabled`) while the content store is switched off (CONTENT_STORE_ENABLED=0)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Literal, Protocol, TypedDict

from batchroute.domain.catalog.content import ChangelogEntry, Post
from batchroute.domain.views import view_of
from batchroute.errors import NotFound, Unavailable


class ChangelogEntryView(TypedDict):
    date: str
    tag: str
    title: str
    items: list[str]


class Changelog(TypedDict):
    entries: list[ChangelogEntryView]


class PostView(TypedDict):
    slug: str
    title: str
    summary: str
    body: str
    body_format: Literal["markdown"]
    tags: list[str]
    published_at: str
    author: str


class PostList(TypedDict):
    posts: list[PostView]


class PostEnvelope(TypedDict):
    post: PostView


class ContentStore(Protocol):
    def changelog(self) -> Sequence[ChangelogEntry]: ...

    def posts(self) -> Sequence[Post]: ...


@dataclass(eq=False)
class ContentService:
    store: ContentStore
    _: KW_ONLY
    enabled: bool

    def changelog(self) -> Changelog:
        self._require_enabled()
        entries = sorted(self.store.changelog(), key=lambda e: e.released_at, reverse=True)
        return {
            "entries": [
                {"date": e.display_date, "tag": e.tag, "title": e.title, "items": list(e.items)}
                for e in entries
            ]
        }

    def posts(self) -> PostList:
        self._require_enabled()
        posts = sorted(self.store.posts(), key=lambda p: p.published_at, reverse=True)
        return {"posts": [_post_view(p) for p in posts]}

    def post(self, slug: str) -> PostEnvelope:
        self._require_enabled()
        post = next((p for p in self.store.posts() if p.slug == slug), None)
        if post is None:
            raise NotFound(f"No post {slug!r}.", code="post_not_found")
        return {"post": _post_view(post)}

    def _require_enabled(self) -> None:
        if not self.enabled:
            raise Unavailable("The content store is disabled.", code="content_disabled")


def _post_view(post: Post) -> PostView:
    return view_of(
        post,
        PostView,
        body_format="markdown",
        tags=list(post.tags),
        published_at=post.published_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
