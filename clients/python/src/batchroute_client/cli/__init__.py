"""The `batchroute` command line (docs/cli.md): `main(argv)` runs one command and returns its
exit code. 0 ok, 1 API error (or an answer that is not the API's JSON), 2 usage error, 3
network error or time-out, 4 a batch followed with `--wait` ended failed, expired or
canceled, 130 interrupted. API errors print
`error: <code>: <message>` on stderr, never a traceback; with `--json` the error document also
goes to stdout."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer

from batchroute_client.cli import render
from batchroute_client.cli import runtime as rt
from batchroute_client.cli.app import CREATED, BatchEnded, app
from batchroute_client.cli.config import ConfigError
from batchroute_client.cli.inputs import InputError
from batchroute_client.cli.presets import presets
from batchroute_client.cli.schedules import schedules
from batchroute_client.errors import (
    APIConnectionError,
    APIError,
    BatchrouteError,
    InvalidRequestError,
    UnexpectedResponse,
    WaitTimeoutError,
)

EXIT_OK, EXIT_API, EXIT_USAGE, EXIT_NETWORK, EXIT_BATCH_ENDED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

app.add_typer(schedules)  # `batchroute schedules ...`
app.add_typer(presets)  # `batchroute presets ...`


def main(argv: Sequence[str] | None = None, runtime: rt.Runtime | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in args
    previous = rt.CURRENT
    rt.CURRENT = runtime or rt.Runtime()
    rt.CURRENT.locate = None  # no input file read yet in this run
    try:
        command = typer.main.get_command(app)
        result = command.main(args=args, prog_name="batchroute", standalone_mode=False)
        return result if isinstance(result, int) else EXIT_OK
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: bad option, missing argument, ...
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"error: {exc}\n")
        if json_mode:  # the usage text stays on stderr; stdout has the error document
            _emit({"error": {"code": "usage_error", "message": _usage_message(exc)}}, exc)
        return EXIT_USAGE
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("\ninterrupted\n")
        return EXIT_INTERRUPTED
    except (ConfigError, InputError, InvalidRequestError) as exc:
        _fail(json_mode, "usage_error", str(exc), exc)
        return EXIT_USAGE
    except APIError as exc:
        sys.stderr.write(render.error_line(exc, rt.CURRENT.locate) + "\n")
        if json_mode:
            _emit(render.error_document(exc), exc)
        return EXIT_API
    except UnexpectedResponse as exc:  # e.g. a base URL that is the console's: exit 1, as an API error
        sys.stderr.write(f"error: unexpected_response: {exc}\n")
        if json_mode:
            _emit(render.unexpected_document(exc), exc)
        return EXIT_API
    except (APIConnectionError, WaitTimeoutError) as exc:
        code = "timeout" if isinstance(exc, WaitTimeoutError) else "network_error"
        _fail(json_mode, code, str(exc), exc)
        return EXIT_NETWORK
    except BatchEnded as exc:
        _fail(False, "batch_ended", str(exc), exc)  # --json: the batch document is already on stdout
        return EXIT_BATCH_ENDED
    except BatchrouteError as exc:
        _fail(json_mode, "client_error", str(exc), exc)
        return EXIT_API
    except OSError as exc:  # an --out path that cannot be written: the command line's to fix
        _fail(json_mode, "file_error", f"cannot write {exc.filename or ''}: {exc.strerror or exc}", exc)
        return EXIT_USAGE
    finally:
        rt.CURRENT = previous


def _emit(document: dict[str, Any], exc: BaseException) -> None:
    """The --json error document, with what the command made before it failed beside the
    error (`submit`: the batch and its Idempotency-Key, `app.CREATED`)."""
    created = getattr(exc, CREATED, None)
    render.emit_json({**(created if isinstance(created, dict) else {}), **document})


def _usage_message(exc: Exception) -> str:
    """What a usage error says (`Invalid value for '--limit': ...`), without the usage text."""
    format_message = getattr(exc, "format_message", None)
    return str(format_message()) if callable(format_message) else str(exc)


def _fail(json_mode: bool, code: str, message: str, exc: BaseException) -> None:
    sys.stderr.write(f"error: {code}: {message}\n")
    if json_mode:
        _emit({"error": {"code": code, "message": message}}, exc)


__all__ = ["main"]
