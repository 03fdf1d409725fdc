"""The local stack serves the built console at /console/ with an SPA fallback (docs/console.md)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from batchroute_tools.local.console import mount_console
from infra.console_headers import console_headers


def _dist(tmp_path: Path) -> Path:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<div id=root></div>", encoding="utf-8")
    (dist / "assets" / "index-abc.js").write_text("console.log(1)", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    return dist


def test_the_console_is_served_with_its_assets_and_an_spa_fallback(tmp_path: Path) -> None:
    # Given an app with a built console mounted, large files PUT to a local S3 endpoint
    app = FastAPI()
    assert mount_console(app, _dist(tmp_path), upload_origins=("http://127.0.0.1:5999",)) is True
    client = TestClient(app)
    # Then assets are served and cached for good, index.html never
    asset = client.get("/console/assets/index-abc.js")
    assert asset.status_code == 200 and asset.text == "console.log(1)"
    assert "immutable" in asset.headers["cache-control"]
    # And the app's own routes answer index.html, uncached
    for path in ("/console/", "/console/billing", "/console/batches/batch_1"):
        page = client.get(path)
        assert page.status_code == 200 and "id=root" in page.text, path
        assert page.headers["cache-control"] == "no-cache"
        # under the security headers it is deployed with (infra/console_headers.py), which
        # let it connect to its own origin and the uploads endpoint only
        for name, value in console_headers(("http://127.0.0.1:5999",)).items():
            assert page.headers[name] == value, (path, name)
        assert "connect-src 'self' http://127.0.0.1:5999;" in page.headers["content-security-policy"]
    # And /console redirects to /console/
    redirect = client.get("/console", follow_redirects=False)
    assert redirect.status_code == 308 and redirect.headers["location"] == "/console/"
    # And a missing asset is 404, and nothing outside the build is reachable
    assert client.get("/console/assets/missing.js").status_code == 404
    escaped = client.get("/console/..%2Fsecret.txt")
    assert "outside" not in escaped.text


def test_an_unbuilt_console_is_not_mounted(tmp_path: Path) -> None:
    app = FastAPI()
    assert mount_console(app, tmp_path / "missing") is False
    assert TestClient(app).get("/console/").status_code == 404
