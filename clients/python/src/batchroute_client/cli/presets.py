"""`batchroute presets ...`: presets, versioned templates of work an item names (docs/presets.md,
docs/cli.md). Each command is a thin layer over `client.presets`. A template is given as a JSON
file of the fields the API takes (`model` or `workflow_product`, `operation`, `system_prompt`,
`parameters`, `routing`, `metadata`, `golden_set`, `description`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from batchroute_client.cli import render
from batchroute_client.cli.app import JsonOpt, answer, benchmark_runs, client_of, json_object, listing

presets = typer.Typer(
    name="presets",
    help="Presets: versioned templates of work an item names (docs/presets.md).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

NameArg = Annotated[str, typer.Argument(help="The preset's name.")]
TemplateOpt = Annotated[
    Path, typer.Option("--file", help="A JSON file of the template: {model, operation, system_prompt, ...}.")
]
VersionOpt = Annotated[int | None, typer.Option("--version", min=1, help="A version (default: the latest).")]


@presets.command("list")
def list_presets(
    ctx: typer.Context,
    archived: Annotated[bool, typer.Option("--archived", help="Archived ones too.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")] = 50,
    json_mode: JsonOpt = False,
) -> None:
    """The org's presets by name (JSON Lines with --json)."""
    with client_of(ctx) as client:
        rows = client.presets.list(include_archived=archived or None, page_size=min(limit, 100) or 100)
        listing(ctx, json_mode, rows, limit, render.presets_table)


@presets.command()
def show(ctx: typer.Context, name: NameArg, version: VersionOpt = None, json_mode: JsonOpt = False) -> None:
    """A preset at its latest version, or one version of it (--version)."""
    with client_of(ctx) as client:
        got = client.presets.get(name) if version is None else client.presets.version(name, version)
    answer(ctx, json_mode, render.as_dict(got), render.preset_view(got))


@presets.command()
def create(ctx: typer.Context, name: NameArg, template: TemplateOpt, json_mode: JsonOpt = False) -> None:
    """A new preset at version 1 (409 preset_exists when the name is taken: use replace)."""
    fields: Any = json_object(template, "--file")
    with client_of(ctx) as client:
        made = client.presets.create(name=name, **fields)
    answer(ctx, json_mode, render.as_dict(made), render.preset_view(made))


@presets.command()
def replace(ctx: typer.Context, name: NameArg, template: TemplateOpt, json_mode: JsonOpt = False) -> None:
    """Save the whole template again as the next version (fields left out are dropped; one
    with a golden set runs it, paid)."""
    fields: Any = json_object(template, "--file")
    with client_of(ctx) as client:
        saved = client.presets.replace(name, **fields)
    answer(ctx, json_mode, render.as_dict(saved), render.preset_view(saved))


@presets.command()
def versions(
    ctx: typer.Context,
    name: NameArg,
    limit: Annotated[int, typer.Option("--limit", min=0, help="At most this many (0: all).")] = 20,
    json_mode: JsonOpt = False,
) -> None:
    """The preset's versions, newest first (JSON Lines with --json)."""
    with client_of(ctx) as client:
        rows = client.presets.versions(name, page_size=min(limit, 100) or 100)
        listing(ctx, json_mode, rows, limit, render.preset_versions_table)


@presets.command()
def archive(ctx: typer.Context, name: NameArg, json_mode: JsonOpt = False) -> None:
    """Archive the preset: items can no longer name it; its versions and benchmarks stay readable."""
    with client_of(ctx) as client:
        archived = client.presets.archive(name)
    answer(ctx, json_mode, render.as_dict(archived), render.preset_view(archived))


@presets.command()
def regress(
    ctx: typer.Context, name: NameArg, version: VersionOpt = None, json_mode: JsonOpt = False
) -> None:
    """Run a version's golden set now on every candidate lane (paid at direct prices): a score
    per lane. Not repeated after a lost answer (it would charge again): see benchmarks."""
    with client_of(ctx) as client:
        run = client.presets.regress(name, version=version)
    answer(ctx, json_mode, render.as_dict(run), render.benchmark_table(run))


@presets.command()
def benchmarks(
    ctx: typer.Context,
    name: NameArg,
    version: Annotated[int, typer.Option("--version", min=1, help="The preset version.")],
    json_mode: JsonOpt = False,
) -> None:
    """A version's golden-set runs, newest first, a score per lane each."""
    with client_of(ctx) as client:
        runs = client.presets.benchmarks(name, version)
    benchmark_runs(ctx, json_mode, runs, version)
