"""Writes the API's OpenAPI document (what `/openapi.json` serves) to a file, without a server.

The console generates its API client types from this file (`console/`, `npm run build`), so a
renamed field breaks the console's type check, not the page (docs/console.md). The document
is built from `functions.api.app.create_app(...)` with local settings; building it reads no
AWS resource.

Usage: `python scripts/export_openapi.py console/openapi.json`
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from batchroute.config import Settings
from functions.api.app import create_app


def openapi_document() -> dict[str, object]:
    settings = Settings.from_environ({**os.environ, "ENVIRONMENT": "local"})
    document: dict[str, object] = create_app(settings).openapi()
    return document


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: export_openapi.py <output.json>", file=sys.stderr)
        return 2
    target = Path(argv[1])
    text = json.dumps(openapi_document(), indent=1, sort_keys=True) + "\n"
    # Unchanged bytes keep the file's mtime, so `make console` does not rebuild for nothing.
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
