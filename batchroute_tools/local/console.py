"""Serves the built web console at `/console/` on the local API's own origin (docs/console.md).

Local mode only: the deployed API never serves it (CloudFront serves the bucket and routes
`/v1/*` to the API on the same distribution). Same origin keeps the session cookie first-party.
Unknown `/console/...` paths answer `index.html`, so the app's own routes survive a reload;
hashed assets are cached for good, `index.html` never. Every answer carries the security
headers CloudFront sends deployed (`infra/console_headers.py`: CSP, frame deny, nosniff...), so
the console is used and tested locally under the policy it is deployed with; the uploads
bucket's origin in its connect-src is the moto server here.
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse, Response

from infra.console_headers import console_headers

log = logging.getLogger("local.console")

CONSOLE_DIST = Path(__file__).resolve().parents[2] / "console" / "dist"
PREFIX = "/console"


def mount_console(app: FastAPI, dist: Path = CONSOLE_DIST, *, upload_origins: tuple[str, ...] = ()) -> bool:
    """Add the console's routes to `app`; False (and a log line) when it has not been built.
    `upload_origins`: where the console may PUT a large file (the uploads bucket's host)."""
    index = dist / "index.html"
    if not index.is_file():
        log.warning("the console is not built (%s missing): run `make console`", index)
        return False
    root = dist.resolve()
    headers = console_headers(upload_origins)

    def redirect() -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=308)

    def serve(path: str) -> Response:
        wanted = (root / path).resolve()
        if path and wanted.is_file() and wanted.is_relative_to(root):
            immutable = wanted.parent.name == "assets"
            cache = "public, max-age=31536000, immutable" if immutable else "no-cache"
            return FileResponse(wanted, headers={**headers, "Cache-Control": cache})
        if path.startswith("assets/"):
            return Response(status_code=404, headers=headers)
        return FileResponse(index, headers={**headers, "Cache-Control": "no-cache"})

    app.add_api_route(PREFIX, redirect, methods=["GET"], include_in_schema=False)
    app.add_api_route(f"{PREFIX}/{{path:path}}", serve, methods=["GET", "HEAD"], include_in_schema=False)
    return True
