"""What a CLI run depends on, injectable for tests: the environment, the HTTP client (a mock
transport in unit tests), the sleeper and clock of `batches.wait`, whether bars are drawn,
and how the key is prompted for."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx
import typer

from batchroute_client.cli.config import Settings, resolve
from batchroute_client.client import Client


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

    def settings(self, base_url: str | None) -> Settings:
        return resolve(self.env, base_url)

    def client(self, api_key: str, base_url: str) -> Client:
        return Client(
            api_key=api_key,
            base_url=base_url,
            timeout=self.timeout,
            http_client=self.http_client() if self.http_client is not None else None,
            sleep=self.sleep,
            monotonic=self.monotonic,
        )

    def show_bars(self, json_mode: bool) -> bool:
        if json_mode:
            return False
        return self.bars if self.bars is not None else sys.stdout.isatty()


CURRENT = Runtime()
