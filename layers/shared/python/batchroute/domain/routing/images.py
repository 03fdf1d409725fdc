"""Images by URL: the media type a URL tells, and the image types Gemini takes.

An item gives its images by URL (domain/routing/items.py): a `data:` URL says its media type;
an http(s) URL may say it by its path's extension (`/cat.png`), or not at all (a rendering
endpoint's `/render?id=3`). OpenAI, Anthropic and the OpenAI-compatible hosts fetch the URL
and read the type from its bytes. Gemini does not: a `fileData` part carries the `mimeType`
(required by the API; google-genai `FileData.mime_type`), and Gemini takes only its own
image types (`GEMINI_IMAGE_TYPES`). So an image whose type its URL does not tell, or tells as
one Gemini does not take (a GIF), cannot be sent to a Gemini lane: `gemini_takes_image`.

A `data:` URL may name another image type than its bytes are (a PNG sent as image/jpeg):
OpenAI and Gemini read the bytes, but Anthropic refuses an image whose bytes are not its
`media_type` ("Image does not match the provided media type"), Bedrock one whose bytes are
not its `format`. So the adapters send the type the bytes are (`data_image_type`, from the
formats' signatures), and only data that is no image type at all (`data_type_mismatch`) is
refused, on every lane.

Pure and deterministic: the extensions are a table here, not the host's `mimetypes`
database (which differs between machines).
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from typing import Final

# Gemini's image types (ai.google.dev, "Image understanding": supported image formats).
GEMINI_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"})
# The image extensions a URL's path may end in, and the type each names.
IMAGE_EXTENSIONS: Final[dict[str, str]] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".jpe": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".heic": "image/heic",
    ".heif": "image/heif",
}
# The first bytes of each image type a data: URL may carry (their formats' signatures).
_SIGNATURES: Final[tuple[tuple[str, bytes, int], ...]] = (  # (type, bytes, at offset)
    ("image/png", b"\x89PNG\r\n\x1a\n", 0),
    ("image/jpeg", b"\xff\xd8\xff", 0),
    ("image/gif", b"GIF8", 0),
    ("image/webp", b"WEBP", 8),  # after "RIFF" and the length
)
_SIGNATURE_BYTES: Final = 12  # what every signature needs to be told apart
# RFC 2397: a data: URL that names no media type is text/plain.
_DATA_DEFAULT: Final = "text/plain"


def image_media_type(url: str) -> str | None:
    """The media type an image URL tells, lower case and without parameters: a `data:` URL's
    own (text/plain when it names none), an http(s) URL's by the extension of its path (the
    query and fragment are not the path); None when the URL tells none."""
    if url.startswith("data:"):
        head = url[5:].split(",", 1)[0]
        return head.split(";", 1)[0].strip().lower() or _DATA_DEFAULT
    path = urllib.parse.urlsplit(url).path.lower()
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return IMAGE_EXTENSIONS.get(name[dot:]) if dot > 0 else None


def sent_image_type(url: str) -> str | None:
    """The type an image goes to a vendor as: a data: URL's, the type its bytes are; else the
    type its URL tells (`image_media_type`)."""
    return data_image_type(url) or image_media_type(url)


def gemini_takes_image(url: str) -> bool:
    """Whether an image given by `url` can be sent to Gemini: the type it is sent as
    (`sent_image_type`) is known and one of Gemini's image types."""
    return sent_image_type(url) in GEMINI_IMAGE_TYPES


def _data_head(url: str) -> bytes | None:
    """The first bytes of a base64 `data:` URL's data (None for any other URL, or data that
    is not base64: the item's own check refuses it)."""
    if not url.startswith("data:") or ";base64," not in url:
        return None
    try:  # 16 base64 characters: the first 12 bytes, enough for every signature
        return base64.b64decode(url.split(";base64,", 1)[1][:16] + "==")
    except (binascii.Error, ValueError):
        return None


def _signed_type(head: bytes) -> str | None:
    return next((kind for kind, sign, at in _SIGNATURES if head[at : at + len(sign)] == sign), None)


def data_image_type(url: str) -> str | None:
    """The image type a base64 `data:` URL's bytes are (by their signature), whatever type the
    URL names; None for another URL or bytes of no image type it may name."""
    head = _data_head(url)
    return None if head is None else _signed_type(head)


def data_type_mismatch(url: str) -> str | None:
    """Why a base64 `data:` image URL's data is no image: 12 bytes or more that begin as none of
    the four image types it may name. None for an image of any of them (an adapter sends the
    type the bytes are: `data_image_type`), data too short to tell, or any other URL."""
    head = _data_head(url)
    if head is None or _signed_type(head) is not None or len(head) < _SIGNATURE_BYTES:
        return None
    named = image_media_type(url)
    return (
        f"The image's data is not a JPEG, PNG, GIF or WebP image, but its data: URL says {named}: "
        "give the image's own bytes."
    )


def data_image_bytes(url: str) -> int:
    """The decoded size of a base64 `data:` URL's bytes (0 for any other URL: its size is
    the host's to tell)."""
    if not url.startswith("data:") or ";base64," not in url:
        return 0
    data = url.split(";base64,", 1)[1]
    return len(data) * 3 // 4 - len(data) + len(data.rstrip("="))
