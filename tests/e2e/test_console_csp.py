"""The built console runs under the security headers CloudFront serves it with (Debian's
chromium driven by Playwright): console/dist is served as the distribution serves it (files
under /console/, app routes answered with index.html, CONSOLE_HEADERS on every answer), and
the pages render with no Content-Security-Policy violation (docs/console.md, Deployment)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from infra.assets import CONSOLE_DIST
from infra.console_headers import CONSOLE_HEADERS

pytestmark = pytest.mark.e2e

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
CONTENT_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
# Records every violation the page reports, before any of its scripts runs.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


class _Distribution(BaseHTTPRequestHandler):
    """The console's behaviour of the distribution, and an anonymous API behind /v1/."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith("/v1/"):
            # As the API answers a browser without a session.
            body = {"session": None} if path == "/v1/sessions/current" else _unauthenticated()
            self._send(200 if "session" in body else 401, "application/json", json.dumps(body).encode())
            return
        relative = path.removeprefix("/console/")
        wanted = (CONSOLE_DIST / relative).resolve()
        if relative and wanted.is_file() and wanted.is_relative_to(CONSOLE_DIST.resolve()):
            self._send(200, CONTENT_TYPES.get(wanted.suffix, "application/octet-stream"), wanted.read_bytes())
        elif "." not in relative.rsplit("/", 1)[-1]:
            self._send(200, "text/html", (CONSOLE_DIST / "index.html").read_bytes())
        else:
            self._send(403, "application/xml", b"<Error><Code>AccessDenied</Code></Error>")

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if not self.path.startswith("/v1/"):
            for name, value in CONSOLE_HEADERS.items():
                self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def _unauthenticated() -> dict[str, Any]:
    return {"error": {"code": "unauthenticated", "message": "Sign in or send an API key."}}


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    if not (CONSOLE_DIST / "index.html").is_file():
        pytest.fail("the console is not built: `make build` (or `make console`)")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Distribution)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(RECORD_VIOLATIONS)
    opened = context.new_page()
    try:
        yield opened
    finally:
        context.close()


def _violations(page: Page) -> list[str]:
    found: list[str] = page.evaluate("window.__violations")
    return found


@pytest.mark.parametrize(
    ("path", "heading"),
    [
        ("/console/sign-in", "Sign in"),
        ("/console/sign-up", "Create"),
        ("/console/forgot-password", "password"),
        ("/console/", "Sign in"),  # signed out: the app sends the person to sign in
    ],
)
def test_the_console_renders_under_its_deployed_csp(page: Page, origin: str, path: str, heading: str) -> None:
    # Given: the console served with CloudFront's headers
    # When
    answer = page.goto(origin + path)

    # Then: the policy is the deployed one, the page is drawn, and nothing was refused
    assert answer is not None
    assert answer.headers["content-security-policy"] == CONSOLE_HEADERS["Content-Security-Policy"]
    expect(page.get_by_role("heading", level=1)).to_contain_text(heading, ignore_case=True)
    expect(page.get_by_label("Email")).to_be_visible()
    assert _violations(page) == []


def test_the_policy_is_enforced_so_a_violation_would_be_seen(page: Page, origin: str) -> None:
    # Given: a console page under the policy
    page.goto(origin + "/console/sign-in")
    expect(page.get_by_label("Email")).to_be_visible()

    # When: a script the policy forbids (inline, from another origin) is added
    page.evaluate(
        """() => {
        const inline = document.createElement('script');
        inline.textContent = 'window.__ran = true';
        document.body.appendChild(inline);
        const remote = document.createElement('img');
        remote.src = 'https://example.com/pixel.png';
        document.body.appendChild(remote);
    }"""
    )

    # Then: it does not run, and the refusals are reported (the check above is not vacuous)
    page.wait_for_function("window.__violations.length >= 2")
    assert page.evaluate("window.__ran === undefined")
    assert {v.split(" ", 1)[0] for v in _violations(page)} >= {"script-src-elem", "img-src"}
