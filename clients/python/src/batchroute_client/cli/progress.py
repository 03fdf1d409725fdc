"""Progress for people: a rich bar of upload bytes and one of batch items (done / total, with
the count per status), fed by `files.upload(on_progress=...)` and `batches.wait(on_progress=...)`.
Without a terminal (or with `--json`) there are no bars: state changes go to stderr as lines."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from batchroute_client.models import Batch


class UploadBar:
    def __init__(self, console: Console, label: str, enabled: bool) -> None:
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.task: TaskID | None = None
        self.label = label

    def __enter__(self) -> UploadBar:
        if self.enabled:
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=None)
        return self

    def __call__(self, sent: int, total: int) -> None:
        if self.task is not None:
            self.progress.update(self.task, completed=sent, total=total)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.enabled:
            self.progress.stop()


class BatchBar:
    """`__call__(batch)` after every poll: the bar shows items done of total and the state."""

    def __init__(self, console: Console, enabled: bool) -> None:
        self.enabled = enabled
        self.console = console
        self.progress = Progress(
            TextColumn("[bold]{task.fields[batch]}"),
            TextColumn("{task.fields[state]:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]{task.fields[ok]} ok[/] [red]{task.fields[failed]} failed[/]"
                " {task.fields[running]} running {task.fields[pending]} pending"
            ),
            TimeElapsedColumn(),
            console=console,
        )
        self.task: TaskID | None = None
        self.last: tuple[str, int] | None = None

    def __enter__(self) -> BatchBar:
        if self.enabled:
            self.progress.start()
        return self

    def __call__(self, batch: Batch) -> None:
        c = batch.counts
        fields: dict[str, Any] = {
            "batch": batch.id,
            "state": batch.state,
            "ok": c.completed,
            "failed": c.failed + c.canceled,
            "running": c.running,
            "pending": c.pending,
        }
        if not self.enabled:
            if self.last != (batch.state, c.done):
                self.last = (batch.state, c.done)
                self.console.print(f"{batch.id} {batch.state} {c.done}/{c.total} items done", highlight=False)
            return
        if self.task is None:
            self.task = self.progress.add_task("batch", total=c.total or None, **fields)
        self.progress.update(self.task, completed=c.done, total=c.total or None, **fields)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.enabled:
            self.progress.stop()
