"""The web console's production bundle (bytes, gzip) and its time to interactive on the
local stack, in Debian's chromium (docs/console.md).

Bundle: every file of `console/dist` (build it first: `make console`), raw and gzip -9, and
the first load: `index.html`, the CSS and the scripts the entry pulls in before it renders
(the entry chunk and its static imports, read from the `<script>`/`<link>` tags and the
modulepreload hints of index.html); page chunks load on first visit.

Time to interactive: the local stack is started as `make run` starts it; for each run a fresh
browser context (empty cache, no cookie) opens `/console/sign-in` and the clock stops when the
"Sign in" button is enabled, i.e. the app has loaded, asked `GET /v1/sessions/current` and
rendered the form a person can use. Also reported: the browser's `domInteractive`, and, signed
in, the overview with its four API reads done (the "Available" figure shown).

Run from the repository root with `.venv/bin/python -m bench.console_load [--runs 9]`.
"""

from __future__ import annotations

import argparse
import gzip
import re
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx
from playwright.sync_api import Browser, sync_playwright

from bench.machine import describe, load_average
from tests.e2e.local_stack import REPO, start_stack, stop_stack
from tests.e2e.test_console_browser import CHROMIUM, CHROMIUM_FLAGS, PASSWORD, VIEWPORT

DIST = REPO / "console" / "dist"


def _gzip_size(path: Path) -> int:
    return len(gzip.compress(path.read_bytes(), compresslevel=9))


def bundle_report() -> list[str]:
    index = (DIST / "index.html").read_text(encoding="utf-8")
    first = {"index.html"} | {
        ref.lstrip("/").removeprefix("console/") for ref in re.findall(r'(?:src|href)="([^"]+)"', index)
    }
    lines = [f"{'file':44} {'bytes':>9} {'gzip':>8}  first load"]
    total = total_gz = first_gz = first_raw = 0
    for path in sorted(p for p in DIST.rglob("*") if p.is_file()):
        name = str(path.relative_to(DIST))
        raw, packed = path.stat().st_size, _gzip_size(path)
        total, total_gz = total + raw, total_gz + packed
        initial = name in first
        if initial:
            first_raw, first_gz = first_raw + raw, first_gz + packed
        lines.append(f"{name:44} {raw:9d} {packed:8d}  {'yes' if initial else ''}")
    lines.append(f"{'all files':44} {total:9d} {total_gz:8d}")
    lines.append(f"{'first load (sign-in, overview)':44} {first_raw:9d} {first_gz:8d}")
    return lines


def _sign_in_ready_ms(browser: Browser, base_url: str) -> tuple[float, float]:
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url)
    page = context.new_page()
    started = time.perf_counter()
    page.goto("/console/sign-in", wait_until="commit")
    page.get_by_role("button", name="Sign in").wait_for(state="visible")
    ready = (time.perf_counter() - started) * 1000
    dom_interactive = float(
        page.evaluate("() => performance.getEntriesByType('navigation')[0].domInteractive")
    )
    context.close()
    return ready, dom_interactive


def _overview_ready_ms(browser: Browser, base_url: str, address: str) -> float:
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url)
    login = context.request.post("/v1/auth/login", data={"email": address, "password": PASSWORD})
    assert login.ok, login.text()
    page = context.new_page()
    started = time.perf_counter()
    page.goto("/console/", wait_until="commit")
    page.get_by_test_id("available").wait_for(state="visible")
    ready = (time.perf_counter() - started) * 1000
    context.close()
    return ready


def _summary(label: str, values: list[float]) -> str:
    return (
        f"{label:38} median {statistics.median(values):7.1f} ms  "
        f"min {min(values):7.1f}  max {max(values):7.1f}  (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    if not (DIST / "index.html").exists():
        raise SystemExit("the console is not built: run `make console` first")
    print(f"machine: {describe()}; load {load_average()}; {datetime.now(UTC):%Y-%m-%d}")
    print("\n".join(bundle_report()))
    with tempfile.TemporaryDirectory() as workdir:
        stack = start_stack(Path(workdir))
        try:
            address = f"bench-{uuid.uuid4().hex[:10]}@example.com"
            httpx.post(f"{stack.base_url}/v1/auth/register", json={"email": address, "password": PASSWORD})
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
                _sign_in_ready_ms(browser, stack.base_url)  # warm-up: the server's first requests
                sign_in = [_sign_in_ready_ms(browser, stack.base_url) for _ in range(args.runs)]
                overview = [_overview_ready_ms(browser, stack.base_url, address) for _ in range(args.runs)]
                browser.close()
        finally:
            stop_stack(stack)
    print(_summary("sign-in form usable (cold cache)", [ready for ready, _ in sign_in]))
    print(_summary("  of which domInteractive", [dom for _, dom in sign_in]))
    print(_summary("overview with its data (cold cache)", overview))
    print(f"load after: {load_average()}")


if __name__ == "__main__":
    main()
