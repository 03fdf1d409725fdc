"""The content store and service: changelog and posts newest first, display dates, 404, 503."""

from __future__ import annotations

from datetime import date

import pytest

from batchroute.content import BuiltinContent
from batchroute.domain.catalog.content import display_date
from batchroute.errors import NotFound, Unavailable
from batchroute.services.catalog.content import ContentService

STORE = BuiltinContent()


def test_display_date_is_month_day_year_without_leading_zero() -> None:
    assert display_date(date(2026, 11, 21)) == "November 21, 2026"
    assert display_date(date(2027, 1, 5)) == "January 5, 2027"


def test_changelog_newest_first_with_display_dates() -> None:
    # Given the built-in content / When the changelog is read
    entries = ContentService(STORE, enabled=True).changelog()["entries"]
    # Then newest first, each with a display date, a tag, a title and items
    newest = max(STORE.changelog(), key=lambda e: e.released_at)
    assert entries[0]["title"] == newest.title
    assert len(entries) == len(STORE.changelog()) >= 4
    for entry in entries:
        assert set(entry) == {"date", "tag", "title", "items"}
        assert entry["date"] == "November 21, 2026"
        assert entry["items"] and all(isinstance(i, str) and i for i in entry["items"])


def test_posts_newest_first_and_one_by_slug() -> None:
    service = ContentService(STORE, enabled=True)
    posts = service.posts()["posts"]
    published = [p["published_at"] for p in posts]
    assert published == sorted(published, reverse=True)
    assert {p["slug"] for p in posts} >= {"how-routing-receipts-work", "why-quotes-are-free-and-price-locked"}
    post = service.post("how-routing-receipts-work")["post"]
    assert post["title"] == "How routing receipts work"
    assert post["body"].startswith("A *lane*") and post["body_format"] == "markdown"
    assert post["author"] and post["tags"] and post["summary"]
    with pytest.raises(NotFound):
        service.post("no-such-post")


def test_posts_are_unique_and_substantial() -> None:
    slugs = [p.slug for p in STORE.posts()]
    assert len(slugs) == len(set(slugs)) >= 3
    assert all(len(p.body.split()) >= 150 for p in STORE.posts())


def test_disabled_store_is_unavailable_everywhere() -> None:
    service = ContentService(STORE, enabled=False)
    for read in (service.changelog, service.posts, lambda: service.post("how-routing-receipts-work")):
        with pytest.raises(Unavailable) as raised:
            read()
        assert raised.value.code == "content_disabled"
