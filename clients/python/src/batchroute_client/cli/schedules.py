"""`batchroute schedules ...`: recurring schedules (docs/schedules.md, docs/cli.md). Each
command is a thin layer over `client.schedules`, as the batch commands are over
`client.batches`. A golden set is given as a JSON file, as the API takes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from batchroute_client.cli import render
from batchroute_client.cli.app import JsonOpt, answer, benchmark_runs, client_of, json_object, listing
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
GoldenSetOpt = Annotated[
    Path | None,
    typer.Option(
        "--golden-set",
        help="A JSON file of the golden set: {model, items, scorer, threshold} (docs/schedules.md).",
    ),
]
TimeZoneOpt = Annotated[str | None, typer.Option("--time-zone", help="An IANA time zone.")]


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
    prefix: Annotated[
        str | None,
        typer.Option("--prefix", help="Each object under this prefix of --target's bucket, at each fire."),
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="The delivery target (dt_...) whose bucket --prefix is in.")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option("--preset", help="With --prefix: the preset (name@version) of items naming none."),
    ] = None,
    golden_set: GoldenSetOpt = None,
    time_zone: TimeZoneOpt = "UTC",
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    json_mode: JsonOpt = False,
) -> None:
    """A schedule that submits its input at each fire time: --items FILE (uploaded now),
    --file-id of one uploaded before, or --prefix P --target T (every object under P in the
    delivery target's bucket); --golden-set FILE adds a golden set to run on each version."""
    if sum(given is not None for given in (items, file_id, prefix)) != 1:
        raise typer.BadParameter("give one of --items, --file-id or --prefix", param_hint="--items")
    if (prefix is None) != (target is None) or (preset is not None and prefix is None):
        raise typer.BadParameter("--prefix goes with --target, and --preset with them", param_hint="--prefix")
    options: dict[str, Any] = {"time_zone": time_zone, "state": "paused" if paused else "active"}
    if golden_set is not None:
        options["golden_set"] = json_object(golden_set, "--golden-set")

    def made(client: Client) -> Schedule:
        source: dict[str, Any]
        if prefix is not None:
            source = {"type": "bucket_prefix", "delivery_target_id": target, "prefix": prefix}
            source |= {"preset": preset} if preset is not None else {}
        else:
            uploaded = file_id if items is None else client.files.upload(items, purpose="batch_input").id
            source = {"type": "file", "file_id": str(uploaded)}
        return client.schedules.create(name=name, expression=expression, input_source=source, **options)

    _shown(ctx, json_mode, made)


@schedules.command()
def update(
    ctx: typer.Context,
    schedule_id: ScheduleArg,
    name: Annotated[str | None, typer.Option("--name", help="1-100 characters.")] = None,
    expression: Annotated[
        str | None, typer.Option("--expression", help="A 5-field cron (30 2 * * *) or rate(6 hours).")
    ] = None,
    time_zone: TimeZoneOpt = None,
    golden_set: GoldenSetOpt = None,
    no_golden_set: Annotated[
        bool, typer.Option("--no-golden-set", help="Remove the golden set (its exclusions go with it).")
    ] = False,
    json_mode: JsonOpt = False,
) -> None:
    """Change a schedule: only the fields given, as a new version (a version with a golden set
    runs it, paid). The same change made twice makes no second version."""
    if golden_set is not None and no_golden_set:
        raise typer.BadParameter("give --golden-set or --no-golden-set, not both", param_hint="--golden-set")
    changes: dict[str, Any] = {
        key: value
        for key, value in (("name", name), ("expression", expression), ("time_zone", time_zone))
        if value is not None
    }
    if golden_set is not None or no_golden_set:
        changes["golden_set"] = json_object(golden_set, "--golden-set") if golden_set is not None else None
    if not changes:
        raise typer.BadParameter("nothing to change: give at least one option", param_hint="--name")
    _shown(ctx, json_mode, lambda client: client.schedules.update(schedule_id, **changes))


@schedules.command()
def regress(ctx: typer.Context, schedule_id: ScheduleArg, json_mode: JsonOpt = False) -> None:
    """Run the schedule's golden set now on every candidate lane (paid at direct prices): a
    score per lane. Not repeated after a lost answer (it would charge again): see benchmarks."""
    with client_of(ctx) as client:
        run = client.schedules.regress(schedule_id)
    answer(ctx, json_mode, render.as_dict(run), render.benchmark_table(run))


@schedules.command()
def benchmarks(
    ctx: typer.Context,
    schedule_id: ScheduleArg,
    version: Annotated[int, typer.Option("--version", min=1, help="The schedule version.")],
    json_mode: JsonOpt = False,
) -> None:
    """A version's golden-set runs, newest first, a score per lane each."""
    with client_of(ctx) as client:
        runs = client.schedules.benchmarks(schedule_id, version)
    benchmark_runs(ctx, json_mode, runs, version)


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
