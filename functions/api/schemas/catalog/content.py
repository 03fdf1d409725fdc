"""Response models: the public content, the changelog and the blog posts."""

from __future__ import annotations

from pydantic import BaseModel


class ChangelogEntryOut(BaseModel):
    date: str
    tag: str
    title: str
    items: list[str]


class ChangelogOut(BaseModel):
    entries: list[ChangelogEntryOut]


class PostOut(BaseModel):
    slug: str
    title: str
    summary: str
    body: str
    body_format: str
    tags: list[str]
    published_at: str
    author: str


class PostsOut(BaseModel):
    posts: list[PostOut]


class PostEnvelope(BaseModel):
    post: PostOut
