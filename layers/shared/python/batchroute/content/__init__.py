"""The content store: the changelog and the blog posts, as versioned data in the shared layer.

Like the catalog, content ships with the code: an entry or post is added in a reviewed
change and deployed with the layer; there is no table or bucket to seed. CONTENT_VERSION
changes with every edit. The API serves it through services/content.py, which honours
CONTENT_STORE_ENABLED.
"""

from __future__ import annotations

from batchroute.content.changelog import ENTRIES
from batchroute.content.posts import POSTS
from batchroute.domain.content import ChangelogEntry, Post

CONTENT_VERSION = "2026-11-21.1"


class BuiltinContent:
    """The content store backed by the data modules."""

    version = CONTENT_VERSION

    def changelog(self) -> tuple[ChangelogEntry, ...]:
        return ENTRIES

    def posts(self) -> tuple[Post, ...]:
        return POSTS


__all__ = ["CONTENT_VERSION", "BuiltinContent"]
