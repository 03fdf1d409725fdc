"""Image parts on Gemini (docs/emulators.md, docs/providers.md): the Gemini emulator refuses an
inlineData or fileData part without its mimeType, or with an image type Gemini does not take,
as the Gemini API refuses a bad request (400 INVALID_ARGUMENT in Google's error envelope), in
process; and the media type an image URL tells (domain/routing/images.py), which decides what
the Gemini transform can send."""

from __future__ import annotations

import json
from typing import Any

import pytest

from batchroute.domain.routing.images import (
    GEMINI_IMAGE_TYPES,
    data_image_type,
    gemini_takes_image,
    image_media_type,
)
from batchroute_tools.contracts import gemini as contract
from batchroute_tools.emulators.behaviour import Behaviour, EmulatorConfig
from batchroute_tools.emulators.gemini import GeminiEmulator
from batchroute_tools.emulators.server import Reply, Request

MODEL = "gemini-2.0-flash-001"
KEY = {"x-goog-api-key": "local"}


def post(path: str, body: Any, query: dict[str, str] | None = None) -> Reply:
    emulator = GeminiEmulator(Behaviour(EmulatorConfig()))
    return emulator.vendor.dispatch(Request("POST", path, query or {}, KEY, json.dumps(body).encode()))


def asking(part: dict[str, Any]) -> dict[str, Any]:
    return {"contents": [{"role": "user", "parts": [{"text": "What is this?"}, part]}]}


UNTYPED = {"fileData": {"fileUri": "https://example.com/render?id=3"}}


@pytest.mark.parametrize(
    ("part", "field"),
    [
        (UNTYPED, "contents[0].parts[1].fileData.mimeType"),
        ({"inlineData": {"data": "iVBORw0KGgo="}}, "contents[0].parts[1].inlineData.mimeType"),
        (
            {"fileData": {"fileUri": "https://example.com/a.gif", "mimeType": "image/gif"}},
            "contents[0].parts[1].fileData.mimeType",
        ),
    ],
)
def test_a_part_without_a_type_gemini_takes_is_googles_400(part: dict[str, Any], field: str) -> None:
    for path, query in (
        (f"/v1beta/models/{MODEL}:generateContent", {}),
        (f"/v1beta/models/{MODEL}:streamGenerateContent", {"alt": "sse"}),
    ):
        reply = post(path, asking(part), query)
        assert reply.status == 400 and reply.headers["content-type"] == "application/json; charset=UTF-8"
        error = json.loads(reply.body)["error"]
        assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
        [details] = error["details"]
        assert details["@type"] == "type.googleapis.com/google.rpc.BadRequest"
        assert [v["field"] for v in details["fieldViolations"]] == [field]


def test_a_batch_holding_such_a_part_is_refused_whole() -> None:
    inlined = {"requests": [{"request": asking(UNTYPED), "metadata": {"key": "seq-0"}}]}
    batch = {"batch": {"displayName": "b", "inputConfig": {"requests": inlined}}}
    reply = post(f"/v1beta/models/{MODEL}:batchGenerateContent", batch)
    assert reply.status == 400 and json.loads(reply.body)["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    "part",
    [
        {"fileData": {"fileUri": "https://example.com/render?id=3", "mimeType": "image/png"}},
        {"inlineData": {"mimeType": "image/webp", "data": "UklGRg=="}},
        {"fileData": {"fileUri": "https://example.com/talk.pdf", "mimeType": "application/pdf"}},
    ],
)
def test_a_typed_part_is_answered(part: dict[str, Any]) -> None:
    assert post(f"/v1beta/models/{MODEL}:generateContent", asking(part)).status == 200


# -- what an image URL tells -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "media_type"),
    [
        ("https://example.com/cat.png", "image/png"),
        ("https://example.com/a/b.JPG?size=large", "image/jpeg"),
        ("https://example.com/p.jpeg#frag", "image/jpeg"),
        ("https://example.com/x.webp", "image/webp"),
        ("https://example.com/x.heic", "image/heic"),
        ("https://example.com/x.heif", "image/heif"),
        ("https://example.com/x.gif", "image/gif"),
        ("https://example.com/render?id=3&f=.png", None),  # the query is not the path
        ("https://example.com/images/", None),
        ("https://example.com/.png", None),
        ("https://example.com/cat.png.php", None),
        ("data:image/png;base64,iVBORw0KGgo=", "image/png"),
        ("data:IMAGE/JPEG;base64,/9j/", "image/jpeg"),
        ("data:image/png;name=a.png,%89PNG", "image/png"),
        ("data:;base64,iVBORw0KGgo=", "text/plain"),  # RFC 2397's default
    ],
)
def test_the_media_type_an_image_url_tells(url: str, media_type: str | None) -> None:
    assert image_media_type(url) == media_type
    # Gemini is sent a data: image as the type its bytes are, when they tell one
    assert gemini_takes_image(url) == ((data_image_type(url) or media_type) in GEMINI_IMAGE_TYPES)


def test_the_transform_and_the_contract_take_the_same_image_types() -> None:
    assert contract.GEMINI_IMAGE_TYPES == GEMINI_IMAGE_TYPES
