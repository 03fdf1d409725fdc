"""What a CLI run depends on, injectable for tests: the environment, the HTTP client (a mock
transport in unit tests), the sleeper and clock of `batches.wait`, whether bars are drawn,
the width tables fit and how the key is prompted for."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx
import typer

from batchroute_client.cli.config import ConfigError, Settings, resolve
from batchroute_client.client import Client

PIPED_WIDTH = 80


def _prompt_key() -> str:
    return str(typer.prompt("API key", hide_input=True))


@dataclass
class Runtime:
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    http_client: Callable[[], httpx.Client] | None = None
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    bars: bool | None = None  # None: when stdout is a terminal
    prompt_key: Callable[[], str] = _prompt_key
    timeout: float = 60.0
    width: int | None = None  # tables' width; None: `columns()`
    is_terminal: Callable[[], bool] = field(default=lambda: sys.stdout.isatty())
    # Where an issue's path (`items[2].model`) points in the input file this run sends: set
    # once the file is read (`inputs.Converted.where`), so an error names its `file:line`
    locate: Callable[[str], str | None] | None = None

    def settings(self, base_url: str | None) -> Settings:
        return resolve(self.env, base_url)

    def client(self, api_key: str, base_url: str) -> Client:
        """The client; a key or base URL it refuses is a usage error (its text never shows the key)."""
        try:
            return Client(
                api_key=api_key,
                base_url=base_url,
                timeout=self.timeout,
                http_client=self.http_client() if self.http_client is not None else None,
                sleep=self.sleep,
                monotonic=self.monotonic,
            )
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def columns(self) -> int | None:
        """The width tables fit: `width` when set; a terminal's own (None); when stdout is not a
        terminal (a pipe, a file), `COLUMNS` when it is a positive number, else 80."""
        if self.width is not None:
            return self.width
        if self.is_terminal():
            return None
        columns = self.env.get("COLUMNS", "")
        return int(columns) if columns.isdecimal() and int(columns) > 0 else PIPED_WIDTH

    def show_bars(self, json_mode: bool) -> bool:
        if json_mode:
            return False
        return self.bars if self.bars is not None else sys.stdout.isatty()


CURRENT = Runtime()
