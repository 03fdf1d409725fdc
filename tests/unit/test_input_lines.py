"""Input chunk lines (`{"seq":n,"item":{...}}`): the seq read off a line's head without parsing
the item (what Finalize reads of a chunk whose items all have an answer); and the artifact
lines Finalize writes, the same bytes as the json module's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from batchroute.adapters.batch_artifacts import BatchArtifacts
from batchroute.domain.batches.artifact_keys import (
    input_chunk_key,
    input_line,
    input_line_head,
    input_line_seq,
    jsonl_line,
    plain_json,
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(
    seq=st.integers(min_value=0, max_value=10**12),
    item=st.dictionaries(st.text(), _JSON, max_size=6),
    model=st.none() | st.integers() | st.text(),
)
def test_the_seq_and_model_read_off_the_head_are_the_lines(
    seq: int, item: dict[str, Any], model: Any
) -> None:
    if model is not None:
        item = {**item, "model": model}
    line = input_line(seq, item)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    head = {"seq": seq, "model": model} if isinstance(model, str) else {"seq": seq}
    assert json.loads(line) == {**head, "item": item}
    assert input_line_seq(line.rstrip(b"\n")) == seq
    read = input_line_head(line.rstrip(b"\n"))
    plain = isinstance(model, str) and '"' not in model and "\\" not in model and model.isprintable()
    # (the json module, which writes what orjson refuses, spells a non-ASCII model with escapes)
    if plain and (model.isascii() or b"\\u" not in line):
        assert read == (seq, model)
    else:  # no model, or one the head spells with an escape: the line must be parsed
        assert read in (None, (seq, model))


def test_a_model_the_head_spells_with_an_escape_is_not_read_off_it() -> None:
    for model in ('a"b', "a\\b", "a\nb", "a\ud800b"):
        assert input_line_head(input_line(7, {"model": model}).rstrip(b"\n")) is None, model
    assert input_line_head(b'{"seq":7,"item":{"model":"m"}}') is None  # written before the head
    assert input_line_head(b'{"seq":7,"model":"mod\\u00e8le","item":{}}') is None  # an older line
    # A model in plain UTF-8 is read off the head as it is
    assert input_line_head(input_line(7, {"model": "modèle"}).rstrip(b"\n")) == (7, "modèle")


def test_what_orjson_refuses_is_written_by_the_json_module_and_reads_back_the_same() -> None:
    for item in ({"model": "m", "n": 2**70}, {"model": "m", "text": "a\ud800b"}, {"model": "m\ud800"}):
        line = input_line(3, item)
        assert json.loads(line) == {"seq": 3, "model": item["model"], "item": item}
        assert input_line_seq(line) == 3


def test_a_line_written_otherwise_has_no_seq_on_its_head() -> None:
    for line in (
        b'{"item":{},"seq":3}',
        b'{"seq":"3","item":{}}',
        b'{"seq":-3,"item":{}}',
        b'{"seq":3}',
        b'{"seq": 3, "item": {}}',
        b'{"seq":,"item":{}}',
        b"",
    ):
        assert input_line_seq(line) is None, line


class _Objects:
    """The bytes of one object, served in pieces that cut lines anywhere."""

    def __init__(self, key: str, body: bytes, piece: int) -> None:
        self.key, self.body, self.piece = key, body, piece

    def size(self, key: str) -> int | None:
        return len(self.body) if key == self.key else None

    def chunks(self, key: str, *, missing_ok: bool = False) -> Iterator[bytes]:
        assert key == self.key
        for start in range(0, len(self.body), self.piece):
            yield self.body[start : start + self.piece]


@given(piece=st.integers(min_value=1, max_value=64))
def test_an_input_chunks_seqs_stream_in_order_whatever_the_pieces(piece: int) -> None:
    body = (
        input_line(0, {"customer_item_id": "a,b", "input": {"seq": 9}})
        + input_line(1, {"x": "y"})
        + b'{"item":{"x":1},"seq":2}\r\n'  # written otherwise: parsed whole
        + input_line(3, {})
    )
    artifacts = BatchArtifacts(_Objects(input_chunk_key("b1", 0), body, piece))  # type: ignore[arg-type]
    assert list(artifacts.input_seqs("b1", 0)) == [0, 1, 2, 3]


@given(piece=st.integers(min_value=1, max_value=64))
def test_a_lanes_input_lines_are_its_models_the_others_unparsed(piece: int) -> None:
    body = (
        input_line(0, {"model": "a", "n": 0})
        + input_line(1, {"model": "b", "n": 1})
        + b'{"seq":2,"item":{"model":"b","n":2}}\n'  # written before the head named the model
        + b'{"seq":3,"item":{"model":"a","n":3}}\n'
        + input_line(4, {"model": "a", "n": 4})
    )
    artifacts = BatchArtifacts(_Objects(input_chunk_key("b1", 0), body, piece))  # type: ignore[arg-type]
    every = list(artifacts.input_lines("b1", 0))
    assert [line["seq"] for line in every] == [0, 1, 2, 3, 4]
    a = list(artifacts.input_lines("b1", 0, model="a"))
    # The old lines are parsed whole (the lane's own filter drops line 2); line 1 is dropped unparsed
    assert [(line["seq"], line["item"]["n"]) for line in a] == [(0, 0), (2, 2), (3, 3), (4, 4)]
    assert [line["item"]["model"] for line in a] == ["a", "b", "a", "a"]


def _json_module_line(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=plain_json).encode() + b"\n"


_ROW_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text()
    | st.decimals(allow_nan=False, allow_infinity=False, places=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text() | st.integers(), inner, max_size=4),
    max_leaves=25,
)


@given(row=st.dictionaries(st.text(), _ROW_VALUES, max_size=6))
def test_an_artifact_line_is_byte_for_byte_the_json_modules(row: dict[str, Any]) -> None:
    # orjson, or the json module where orjson refuses (big integers, non-string keys): the same bytes
    assert jsonl_line(row) == _json_module_line(row)


@given(number=st.floats(allow_nan=False, allow_infinity=False))
def test_an_artifact_lines_floats_read_back_to_the_same_number(number: float) -> None:
    # The one difference: orjson spells some floats otherwise (1e16, not 1e+16); same number
    assert json.loads(jsonl_line({"x": number})) == {"x": number}
