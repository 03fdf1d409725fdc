"""The content store: the changelog and the blog posts, as versioned data in the shared layer.

Like the catalog, content ships with the code: the files in batchroute/content/data/
(loader.py reads them). An entry or post is added in a reviewed change and deployed with the
layer; there is no table or bucket to seed. The `version` in data/content.toml changes with
every edit. The API serves it through services/catalog/content.py, which honours
CONTENT_STORE_ENABLED.

Importing this package reads nothing: the data is loaded, checked and cached on the first
read, once per process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from batchroute.catalog.lazy import once

if TYPE_CHECKING:
    from batchroute.content.loader import Content
    from batchroute.domain.catalog.content import ChangelogEntry, Post


@once
def _builtin() -> Content:
    from batchroute.content.loader import load_content  # on first use: keeps cold starts lean

    return load_content()


class BuiltinContent:
    """The content store backed by the data files."""

    @property
    def version(self) -> str:
        return _builtin().version

    def changelog(self) -> tuple[ChangelogEntry, ...]:
        return _builtin().changelog

    def posts(self) -> tuple[Post, ...]:
        return _builtin().posts


def __getattr__(name: str) -> str:
    """CONTENT_VERSION, read from data/content.toml on first use."""
    if name == "CONTENT_VERSION":
        return _builtin().version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CONTENT_VERSION", "BuiltinContent"]  # two names come from __getattr__
