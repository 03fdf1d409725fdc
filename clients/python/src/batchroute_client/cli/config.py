"""Where the CLI finds its API key and base URL.

The environment wins (`BATCHROUTE_API_KEY`, `BATCHROUTE_BASE_URL`), then the config file:
`$BATCHROUTE_CONFIG`, else `$XDG_CONFIG_HOME/batchroute/config.toml`, else
`~/.config/batchroute/config.toml`. The file is written 0600 (its folder 0700), and a key is
not read from a file that others may read. The key is never printed whole: `mask`."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_KEY = "BATCHROUTE_API_KEY"
ENV_URL = "BATCHROUTE_BASE_URL"
ENV_CONFIG = "BATCHROUTE_CONFIG"
KEYS = ("api_key", "base_url")


class ConfigError(Exception):
    """The CLI cannot run as configured (a usage error, exit 2)."""


def config_path(env: Mapping[str, str]) -> Path:
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "batchroute" / "config.toml"


def load(path: Path) -> dict[str, str]:
    """The file's `api_key` and `base_url` ({} when there is no file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    values = {key: str(document[key]) for key in KEYS if isinstance(document.get(key), str)}
    if "api_key" in values and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"{path} holds an API key and others may read it: run `chmod 600 {path}`")
    return values


def save(path: Path, values: Mapping[str, str]) -> None:
    """Write the file atomically, 0600, in a 0700 folder."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = [f"{key} = {json.dumps(values[key])}\n" for key in KEYS if values.get(key)]
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".toml")
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write("# batchroute CLI configuration (keep it private: mode 0600)\n")
            out.writelines(lines)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def mask(key: str | None) -> str:
    if not key:
        return "(none)"
    if len(key) < 12:
        return "****"
    return f"{key[:4]}…{key[-4:]}"


@dataclass(frozen=True)
class Settings:
    path: Path
    api_key: str | None
    base_url: str | None
    key_source: str | None  # "environment", "config file" or None

    def require(self) -> tuple[str, str]:
        if not self.api_key:
            raise ConfigError(
                f"no API key: run `batchroute login`, or set {ENV_KEY} (config file: {self.path})"
            )
        if not self.base_url:
            raise ConfigError(f"no base URL: run `batchroute configure --base-url URL`, or set {ENV_URL}")
        return self.api_key, self.base_url


def resolve(env: Mapping[str, str], base_url: str | None = None) -> Settings:
    """The settings in force. A key's surrounding whitespace is dropped: a secret mounted from
    a file, or a CRLF `.env`, ends in a newline that HTTP cannot carry."""
    path = config_path(env)
    stored = load(path)
    env_key, file_key = (env.get(ENV_KEY) or "").strip(), (stored.get("api_key") or "").strip()
    key_source = "environment" if env_key else ("config file" if file_key else None)
    return Settings(
        path=path,
        api_key=env_key or file_key or None,
        base_url=(base_url or env.get(ENV_URL) or stored.get("base_url") or "").rstrip("/") or None,
        key_source=key_source,
    )
