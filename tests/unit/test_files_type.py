"""The preflight `file_type` check: declared content type, filename, and the first bytes."""

from __future__ import annotations

import pytest

from batchroute.domain.batches.files import SNIFF_BYTES, extension, file_type_issue, media_type, sniff


@pytest.mark.parametrize(
    ("head", "says"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "a PDF document"),
        (b"PK\x03\x04\x14\x00\x00\x00", "a zip archive"),
        (b"\x1f\x8b\x08\x00", "a gzip archive"),
        (b"\x89PNG\r\n\x1a\n", "a PNG image"),
        (b'{"a": 1}\x00\x00\x00', "NUL bytes"),
        (b"caf\xe9 au lait\n", "not UTF-8"),
        (b"id,model,input\n1,gpt,hello\n", "does not start with JSON"),
    ],
)
def test_binary_and_non_json_heads_are_refused_with_a_reason(head: bytes, says: str) -> None:
    problem = sniff(head)
    assert problem is not None and says in problem


@pytest.mark.parametrize(
    "head",
    [
        b'{"customer_item_id": "a"}\n',
        b'\xef\xbb\xbf{"a": 1}\r\n',
        b'\n\n  {"a": 1}\n',
        b'[1, 2]\n{"a": 1}\n',  # JSON, but not objects: a line-level (jsonl_shape) problem
        b"",
        b"\n \n",
        # A multi-byte character cut by the end of the head is still text
        b'{"t": "' + b"a" * (SNIFF_BYTES - 9) + "☃".encode()[:2],
    ],
)
def test_text_that_starts_like_json_passes(head: bytes) -> None:
    assert sniff(head) is None


def test_the_issue_has_the_preflight_shape() -> None:
    # Given a PDF uploaded under a .jsonl name
    issue = file_type_issue(content_type="application/jsonl", filename="items.jsonl", head=b"%PDF-1.4")
    # Then one file_type issue with the stable code and an action
    assert issue is not None
    assert issue["category"] == "file_type"
    assert issue["code"] == "unsupported_file_type"
    assert "PDF" in issue["message"]
    assert issue["action"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/jsonl",
        "application/x-ndjson",
        "application/jsonl; charset=utf-8",
        "Text/Plain",
        "application/octet-stream",
        None,
    ],
)
def test_jsonl_content_types_pass(content_type: str | None) -> None:
    assert file_type_issue(content_type=content_type, filename="a.jsonl", head=b'{"a": 1}') is None


@pytest.mark.parametrize(
    "content_type", ["application/pdf", "application/zip", "image/png", "application/x-www-form-urlencoded"]
)
def test_other_content_types_are_refused_before_any_byte(content_type: str) -> None:
    issue = file_type_issue(content_type=content_type, filename=None, head=None)
    assert issue is not None and content_type in issue["message"]


@pytest.mark.parametrize(
    ("filename", "ok"),
    [
        ("items.jsonl", True),
        ("items.NDJSON", True),
        ("items.txt", True),
        ("items", True),
        (".hidden", True),
        ("report.pdf", False),
        ("items.jsonl.zip", False),
        ("C:\\data\\sheet.xlsx", False),
    ],
)
def test_filenames_are_judged_by_extension(filename: str, ok: bool) -> None:
    issue = file_type_issue(content_type=None, filename=filename, head=None)
    assert (issue is None) is ok


def test_media_type_and_extension_helpers() -> None:
    assert media_type(" Application/JSONL ; charset=utf-8") == "application/jsonl"
    assert media_type(None) == ""
    assert extension("dir/a.b/c.JSONL") == ".jsonl"
    assert extension("noext") == ""
