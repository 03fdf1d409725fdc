"""Run code in a fresh interpreter that imports this checkout, with an environment of its own
(a Lambda function's, say) rather than this test process's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def last_line(code: str, *args: str, **env: str) -> str:
    """The last line `code` prints, run with `args` and only `env` (besides PATH, HOME, LANG and
    TMPDIR) in its environment; fails the test with its stderr if it fails."""
    environment = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    environment.update(env)
    environment["PYTHONPATH"] = os.pathsep.join(
        str(ROOT / part) for part in ("layers/shared/python", ".", "clients/python/src")
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]
