"""batchroute_tools/emulators/spool.py: what the emulators' spools hold, read by path from
another process (the pipeline bench reads the emulators' process's spools this way)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from batchroute_tools.emulators.spool import Spool


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what TMPDIR does for a process
    return tmp_path


def test_held_counts_the_files_of_every_spool_under_the_temp_root(temp_root: Path) -> None:
    openai, anthropic = Spool("openai"), Spool("anthropic")
    openai.path("input.jsonl").write_bytes(b"x" * 10)
    openai.path("output.jsonl").write_bytes(b"y" * 5)
    anthropic.path("requests.jsonl").write_bytes(b"z" * 7)
    (temp_root / "unrelated").mkdir()
    (temp_root / "unrelated" / "file").write_bytes(b"not a spool's" * 100)

    assert Spool.held(temp_root) == (3, 22)


def test_held_leaves_out_removed_files_and_closed_spools(temp_root: Path) -> None:
    kept, closed = Spool("openai"), Spool("together")
    removed = kept.path("input.jsonl")
    removed.write_bytes(b"x" * 10)
    kept.path("output.jsonl").write_bytes(b"y" * 4)
    closed.path("input.jsonl").write_bytes(b"z" * 100)
    Spool.remove(removed)
    closed.close()

    assert Spool.held(temp_root) == (1, 4)


def test_held_of_a_temp_root_without_spools_is_nothing(tmp_path: Path) -> None:
    assert Spool.held(tmp_path / "absent") == (0, 0)
