"""The shapes of the public content: changelog entries and blog posts. Pure data."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime


@dataclass(frozen=True)
class ChangelogEntry:
    released_at: datetime  # orders entries of the same day; the API shows the date only
    tag: str
    title: str
    items: tuple[str, ...]

    @property
    def display_date(self) -> str:
        return display_date(self.released_at.date())


@dataclass(frozen=True)
class Post:
    slug: str
    title: str
    summary: str
    body: str  # markdown
    tags: tuple[str, ...]
    published_at: datetime
    author: str


def display_date(day: date) -> str:
    """`November 21, 2026`: the month in English, the day without a leading zero."""
    return f"{day:%B} {day.day}, {day.year}"
