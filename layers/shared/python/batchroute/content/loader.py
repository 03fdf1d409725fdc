"""Builds the built-in content from the data files in batchroute/content/data/.

content.toml    the content version
changelog.toml  one [[entries]] row per changelog entry
posts.toml      one [[posts]] row per post, the body in markdown

Rows are checked as they are read (batchroute/catalog/datafile.py): a bad one raises
DataError naming the file, the row and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING

from batchroute.catalog.datafile import read_toml
from batchroute.domain.catalog.content import ChangelogEntry, Post

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable


@dataclass(frozen=True)
class Content:
    version: str
    changelog: tuple[ChangelogEntry, ...]
    posts: tuple[Post, ...]


def data_folder() -> Traversable:
    return files("batchroute.content") / "data"


def load_content(folder: Traversable | None = None) -> Content:
    folder = folder or data_folder()
    manifest = read_toml(folder, "content.toml")
    version = manifest.text("version")
    manifest.close()
    return Content(version=version, changelog=load_changelog(folder), posts=load_posts(folder))


def load_changelog(folder: Traversable) -> tuple[ChangelogEntry, ...]:
    top = read_toml(folder, "changelog.toml")
    entries = top.each(
        "entries",
        lambda row: ChangelogEntry(
            released_at=row.utc_datetime("released_at"),
            tag=row.text("tag"),
            title=row.text("title"),
            items=row.texts("items", non_empty=True),
        ),
    )
    top.close()
    return entries


def load_posts(folder: Traversable) -> tuple[Post, ...]:
    top = read_toml(folder, "posts.toml")
    author = top.text("author")  # of every post that names none
    slugs: set[str] = set()
    posts = top.each(
        "posts",
        lambda row: Post(
            slug=row.unique("slug", slugs),  # first, so that errors name the post
            title=row.text("title"),
            summary=row.text("summary"),
            body=row.text("body"),
            tags=row.texts("tags"),
            published_at=row.utc_datetime("published_at"),
            author=row.text("author", author),
        ),
    )
    top.close()
    return posts
