"""`batchroute schedules ...`: recurring schedules (docs/schedules.md, docs/cli.md). Each
command is a thin layer over `client.schedules`, as the batch commands are over
`client.batches`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from batchroute_client.cli import render
from batchroute_client.cli.app import JsonOpt, answer, client_of, listing
from batchroute_client.client import Client
from batchroute_client.models import Schedule

schedules = typer.Typer(
    name="schedules",
    help="Recurring schedules: each fire time creates a batch (docs/schedules.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ScheduleArg = Annotated[str, typer.Argument(help="The schedule id (sched_...).")]
LimitOpt = Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")]


def _shown(ctx: typer.Context, json_mode: bool, act: Callable[[Client], Schedule]) -> None:
    """What `act` answers, as JSON with --json, else as the schedule's view."""
    with client_of(ctx) as client:
        got = act(client)
    answer(ctx, json_mode, got.raw, render.schedule_view(got))


@schedules.command("list")
def list_schedules(ctx: typer.Context, limit: LimitOpt = 20, json_mode: JsonOpt = False) -> None:
    """The org's schedules, oldest first (JSON Lines with --json)."""
    with client_of(ctx) as client:
        rows = client.schedules.list(page_size=min(limit, 100) or 100)
        listing(ctx, json_mode, rows, limit, render.schedules_table)


@schedules.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="1-100 characters.")],
    expression: Annotated[
        str, typer.Option("--expression", help="A 5-field cron (30 2 * * *) or rate(6 hours).")
    ],
    items: Annotated[
        Path | None, typer.Option("--items", help="A native JSONL file to upload as the input.")
    ] = None,
    file_id: Annotated[
        str | None, typer.Option("--file-id", help="An input file uploaded already (file_...).")
    ] = None,
    time_zone: Annotated[str, typer.Option("--time-zone", help="An IANA time zone.")] = "UTC",
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    json_mode: JsonOpt = False,
) -> None:
    """A schedule that submits one input file at each fire time: --items FILE (uploaded now)
    or --file-id of one uploaded before."""
    if (items is None) == (file_id is None):
        raise typer.BadParameter("give one of --items or --file-id", param_hint="--items / --file-id")

    def made(client: Client) -> Schedule:
        source = file_id if items is None else client.files.upload(items, purpose="batch_input").id
        return client.schedules.create(
            name=name,
            expression=expression,
            input_source={"type": "file", "file_id": str(source)},
            time_zone=time_zone,
            state="paused" if paused else "active",
        )

    _shown(ctx, json_mode, made)


@schedules.command()
def show(ctx: typer.Context, schedule_id: ScheduleArg, json_mode: JsonOpt = False) -> None:
    """A schedule: its definition, state, next fire and the lanes its golden set excluded."""
    _shown(ctx, json_mode, lambda client: client.schedules.get(schedule_id))


@schedules.command()
def pause(ctx: typer.Context, schedule_id: ScheduleArg, json_mode: JsonOpt = False) -> None:
    """Stop firing until resumed."""
    _shown(ctx, json_mode, lambda client: client.schedules.pause(schedule_id))


@schedules.command()
def resume(ctx: typer.Context, schedule_id: ScheduleArg, json_mode: JsonOpt = False) -> None:
    """Fire again from the next fire time."""
    _shown(ctx, json_mode, lambda client: client.schedules.resume(schedule_id))


@schedules.command()
def delete(ctx: typer.Context, schedule_id: ScheduleArg, json_mode: JsonOpt = False) -> None:
    """Delete a schedule and its history (the batches it made stay)."""
    with client_of(ctx) as client:
        gone = client.schedules.delete(schedule_id)
    document = {"id": gone.id, "deleted": gone.deleted}
    answer(ctx, json_mode, document, render.fields_table([("deleted", gone.id)]))


@schedules.command()
def runs(
    ctx: typer.Context, schedule_id: ScheduleArg, limit: LimitOpt = 20, json_mode: JsonOpt = False
) -> None:
    """A schedule's runs, newest first: the batch each fire time made, or why it made none."""
    with client_of(ctx) as client:
        rows = client.schedules.runs(schedule_id, page_size=min(limit, 100) or 100)
        listing(ctx, json_mode, rows, limit, render.runs_table)
