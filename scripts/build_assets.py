"""Build the Lambda layer and function assets into .build/ (no Docker) and the web console
into console/dist/: `make build`. With `--console`, only the console (`make console`, which
`make run` uses). Both skip the console when its sources are unchanged (infra/assets.py)."""

from __future__ import annotations

import sys
import time

from infra import assets


def _mb(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def console_only() -> int:
    try:
        built = assets.build_console()
    except (assets.BuildError, OSError) as error:
        print(f"console build failed: {error}", file=sys.stderr)
        return 1
    print(f"console {'built' if built else 'up to date (sources unchanged)'}: console/dist")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--console"]:
        return console_only()
    started = time.perf_counter()
    try:
        result = assets.build()
    except (assets.BuildError, OSError) as error:
        print(f"build failed: {error}", file=sys.stderr)
        return 1
    root = assets.ROOT
    size, files = assets.directory_size(result.layer_dir)
    cached = "" if result.dependencies_installed else " (dependencies cached)"
    print(f"layer      {_mb(size):>9}  {files:>5} files  {result.layer_dir.relative_to(root)}{cached}")
    for key, path in result.function_dirs.items():
        size, files = assets.directory_size(path)
        print(f"{key:<10} {_mb(size):>9}  {files:>5} files  {path.relative_to(root)}")
    size, files = assets.directory_size(result.console_dist)
    cached = "" if result.console_built else " (sources unchanged)"
    print(
        f"{'console':<10} {_mb(size):>9}  {files:>5} files  {result.console_dist.relative_to(root)}{cached}"
    )
    print(f"built in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
