"""Where an emulated vendor keeps the files it holds for its batch jobs (a job's input, its
output and error files, a message batch's requests and results): on disk, in a temporary
directory of its own, never in the process's memory (docs/emulators.md, "Batch files on
disk").

A vendor keeps those files (OpenAI until they are deleted, Anthropic a message batch's
results for 29 days), so the emulator keeps them too; in memory they would grow the process
that runs the emulators (the local service process) with every job of every batch. Each file
is written once, line by line as its lines come (never joined in memory), read as lines or
whole (one job's file: one chunk of a lane, bounded), and removed when the vendor would drop
it. The directory goes when the spool is closed (its emulator server stopping: `on_stop`), or
at the latest when the process exits.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

PREFIX = "batchroute-emulator-"  # a spool's directory: $TMPDIR/batchroute-emulator-<name>-*


class Spool:
    """A temporary directory of files named by the emulator, written once."""

    def __init__(self, name: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{name}-"))
        self._serial = itertools.count(1)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.root, ignore_errors=True)

    @staticmethod
    def held(temp_root: Path) -> tuple[int, int]:
        """Files and bytes the spools under `temp_root` (the emulators' TMPDIR) hold on disk,
        read by path from any process: what the emulators keep, reported by the pipeline bench
        apart from their process's memory."""
        files = size = 0
        for root in temp_root.glob(f"{PREFIX}*"):
            with contextlib.suppress(FileNotFoundError):  # a spool closed meanwhile
                for path in root.iterdir():
                    with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                        size += path.stat().st_size
                        files += 1
        return files, size

    def path(self, name: str) -> Path:
        """A new file's path (unique in the spool); the caller writes it once."""
        return self.root / f"{next(self._serial):08d}-{name}"

    def link(self, path: Path, name: str) -> Path:
        """A second name for `path`, so the file outlives the first name's removal (a job
        keeps its input file when the caller deletes the file it uploaded)."""
        copy = self.path(name)
        copy.hardlink_to(path)
        return copy

    @staticmethod
    def read(path: Path) -> bytes:
        return path.read_bytes()

    @staticmethod
    def lines(path: Path) -> Iterator[bytes]:
        with path.open("rb") as source:
            yield from source

    @staticmethod
    def remove(path: Path | None) -> None:
        if path is not None:
            path.unlink(missing_ok=True)

    def files(self) -> list[Path]:
        return sorted(self.root.iterdir()) if self.root.is_dir() else []

    def close(self) -> None:
        self._cleanup()
