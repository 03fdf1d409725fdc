"""Lambda deployment assets in .build/, built without Docker.

.build/layer/python/     batchroute + runtime dependencies for Python 3.12 on x86_64
.build/functions/<key>/  functions/__init__.py + functions/<key>/**
                         (the handler is functions.<key>.handler.handler)
console/dist/            the web console's production bundle (`npm ci`, `npm run build` in
                         console/), which the stack uploads to the console bucket

The layer's third-party part is reinstalled only when the dependency list changes
(a stamp file holds its hash); our own code is copied afresh on every build.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from batchroute import resources

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / ".build"
LAYER_DIR = BUILD_DIR / "layer"
FUNCTIONS_DIR = BUILD_DIR / "functions"

PACKAGE_SOURCE = ROOT / "layers" / "shared" / "python" / resources.SERVICE
FUNCTIONS_SOURCE = ROOT / "functions"
CONSOLE_DIR = ROOT / "console"
CONSOLE_DIST = CONSOLE_DIR / "dist"
# What the console's build reads besides its own folder: the API's OpenAPI document is
# generated from these (by scripts/export_openapi.py), and the client types from the document.
CONSOLE_API_SOURCES = (ROOT / "functions" / "api", PACKAGE_SOURCE, ROOT / "scripts" / "export_openapi.py")

# The Lambda runtime the stack deploys (infra/compute.py) and the wheels that match it.
LAMBDA_PYTHON_VERSION = "3.12"
LAMBDA_PLATFORM = "manylinux2014_x86_64"
# The Lambda Python runtime ships the AWS SDK: never bundle it.
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer"})

_STAMP = BUILD_DIR / "layer-dependencies.sha256"
_CONSOLE_STAMP = BUILD_DIR / "console-sources.sha256"
# Outputs of the console build, never inputs of its fingerprint.
_CONSOLE_OUTPUTS = frozenset({"node_modules", "dist"})
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")
_PIP_NOISE = ("WARNING: Location",)


class BuildError(RuntimeError):
    """The assets could not be built."""


@dataclass(frozen=True)
class BuildResult:
    layer_dir: Path
    function_dirs: dict[str, Path]
    dependencies_installed: bool  # False when the cached third-party install was reused
    console_dist: Path
    console_built: bool  # False when console/dist was already built from the same sources


def function_asset_dir(key: str) -> Path:
    return FUNCTIONS_DIR / key


def layer_dependencies(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The [project].dependencies requirement strings the layer ships (the AWS SDK excluded)."""
    with pyproject.open("rb") as handle:
        requirements: list[str] = tomllib.load(handle)["project"]["dependencies"]
    return [req for req in requirements if _distribution_name(req) not in RUNTIME_PROVIDED]


def build(*, quiet: bool = False) -> BuildResult:
    """Build (or refresh) every asset under .build/ and return where they are.

    One build at a time (a lock file: the test workers each build, a synth may run beside
    them), and a refresh rewrites only the files that changed, so a reader of .build/ (a
    synth hashing the assets) never meets a tree half removed."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with (BUILD_DIR / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(quiet=quiet)


def _build(*, quiet: bool) -> BuildResult:
    layer_python = LAYER_DIR / "python"
    dependencies = layer_dependencies()
    installed = _install_dependencies(layer_python, dependencies, quiet=quiet)
    _mirror(PACKAGE_SOURCE, layer_python / resources.SERVICE)
    function_dirs = {fn.key: _build_function(fn.key) for fn in resources.FUNCTIONS}
    console_built = build_console(quiet=quiet)
    return BuildResult(
        layer_dir=LAYER_DIR,
        function_dirs=function_dirs,
        dependencies_installed=installed,
        console_dist=CONSOLE_DIST,
        console_built=console_built,
    )


def console_dist() -> Path:
    """console/dist as the stack deploys it; refuses a missing or unbuilt bundle."""
    if not (CONSOLE_DIST / "index.html").is_file():
        raise BuildError("console/dist/index.html is missing: run `make build` (it builds the console)")
    return CONSOLE_DIST


def build_console(*, quiet: bool = False) -> bool:
    """Build console/dist with npm unless it was built from the same sources; True if built.

    The fingerprint covers console/ (but node_modules and dist) and the API code the
    OpenAPI document comes from, so a renamed field rebuilds the client types and the
    bundle. `npm ci` runs when node_modules is missing or the lock file changed.
    """
    if not (CONSOLE_DIR / "package.json").is_file():
        raise BuildError("console/package.json is missing: the console's sources are not in this checkout")
    fingerprint = _console_fingerprint()
    if (CONSOLE_DIST / "index.html").is_file() and _read(_CONSOLE_STAMP) == fingerprint:
        return False
    _CONSOLE_STAMP.unlink(missing_ok=True)
    installed = CONSOLE_DIR / "node_modules" / ".package-lock.json"
    lock = CONSOLE_DIR / "package-lock.json"
    if not installed.is_file() or (lock.is_file() and lock.stat().st_mtime > installed.stat().st_mtime):
        _npm("ci", "--no-audit", "--no-fund", quiet=quiet)
    _npm("run", "build", quiet=quiet)
    console_dist()
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    _CONSOLE_STAMP.write_text(_console_fingerprint() + "\n")
    return True


def _console_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in _console_inputs():
        digest.update(f"{path.relative_to(ROOT)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _console_inputs() -> list[Path]:
    """console/ but its outputs (never walked: node_modules is large), and the API sources."""
    roots = [entry for entry in CONSOLE_DIR.iterdir() if entry.name not in _CONSOLE_OUTPUTS]
    files: list[Path] = []
    for root in [*roots, *CONSOLE_API_SOURCES]:
        files += root.rglob("*") if root.is_dir() else [root]
    return sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts)


def _npm(*arguments: str, quiet: bool) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError("npm is not installed: the console is built with Node.js 20+ and npm")
    completed = subprocess.run(  # noqa: S603
        [npm, *arguments], cwd=CONSOLE_DIR, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        output = (completed.stdout + completed.stderr).strip()
        raise BuildError(f"npm {' '.join(arguments)} in console/ failed:\n{output[-4000:]}")
    if not quiet and completed.stdout.strip():
        print(completed.stdout.strip())


def _read(path: Path) -> str | None:
    return path.read_text().strip() if path.is_file() else None


def _distribution_name(requirement: str) -> str:
    name = requirement
    for separator in ("[", "=", "<", ">", "!", "~", ";", " "):
        name = name.split(separator, 1)[0]
    return name.strip().lower().replace("_", "-")


def _install_dependencies(target: Path, dependencies: list[str], *, quiet: bool) -> bool:
    fingerprint = hashlib.sha256(
        "\n".join([LAMBDA_PLATFORM, LAMBDA_PYTHON_VERSION, *sorted(dependencies)]).encode()
    ).hexdigest()
    if target.is_dir() and _STAMP.is_file() and _STAMP.read_text().strip() == fingerprint:
        return False
    _STAMP.unlink(missing_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--target", str(target),
        "--platform", LAMBDA_PLATFORM,
        "--implementation", "cp",
        "--python-version", LAMBDA_PYTHON_VERSION,
        "--only-binary=:all:",
        *dependencies,
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    output = [
        line
        for line in (completed.stdout + completed.stderr).splitlines()
        if line.strip() and not line.startswith(_PIP_NOISE)
    ]
    if completed.returncode != 0:
        raise BuildError("pip install for the layer failed:\n" + "\n".join(output))
    if output and not quiet:
        print("\n".join(output))
    _prune(target)
    _STAMP.write_text(fingerprint + "\n")
    return True


def _prune(target: Path) -> None:
    """Drop what the runtime provides or never needs: the AWS SDK, console scripts, bytecode."""
    for entry in list(target.iterdir()):
        distribution = entry.name.split("-", 1)[0].removesuffix(".py").lower().replace("_", "-")
        if distribution in RUNTIME_PROVIDED:
            _remove(entry)
    _remove(target / "bin")
    for cache in list(target.rglob("__pycache__")):
        _remove(cache)


def _build_function(key: str) -> Path:
    source = FUNCTIONS_SOURCE / key
    if not source.is_dir():
        raise BuildError(f"functions/{key}/ is missing (declared in batchroute.resources.FUNCTIONS)")
    package = function_asset_dir(key) / "functions"
    package.mkdir(parents=True, exist_ok=True)
    for stray in function_asset_dir(key).iterdir():  # the asset holds the package alone
        if stray != package:
            _remove(stray)
    init = FUNCTIONS_SOURCE / "__init__.py"
    _write_if_changed(package / "__init__.py", init.read_bytes() if init.is_file() else b"")
    for stray in package.iterdir():
        if stray.name not in ("__init__.py", key):
            _remove(stray)
    _mirror(source, package / key)
    return function_asset_dir(key)


def _mirror(source: Path, destination: Path) -> None:
    """Make `destination` hold what `source` holds (but bytecode), touching only the files
    that differ: new and changed ones written, the ones gone removed."""
    if destination.is_symlink() or destination.is_file():
        _remove(destination)
    destination.mkdir(parents=True, exist_ok=True)
    names = os.listdir(source)
    kept = set(names) - _IGNORED(str(source), names)
    for stray in destination.iterdir():
        if stray.name not in kept:
            _remove(stray)
    for name in sorted(kept):
        origin, target = source / name, destination / name
        if origin.is_dir():
            _mirror(origin, target)
        else:
            if target.is_dir() and not target.is_symlink():
                _remove(target)
            _write_if_changed(target, origin.read_bytes(), mode=stat.S_IMODE(origin.stat().st_mode))


def _write_if_changed(path: Path, content: bytes, *, mode: int = 0o644) -> None:
    """`content` at `path` with `mode` (a script stays executable: functions/api/stream.sh is
    what the streaming function runs), written only when either differs."""
    if (
        path.is_file()
        and not path.is_symlink()
        and stat.S_IMODE(path.stat().st_mode) == mode
        and path.read_bytes() == content
    ):
        return
    staged = path.with_name(f".{path.name}.tmp")
    staged.write_bytes(content)
    staged.chmod(mode)
    staged.replace(path)  # a reader sees the old file or the new one, never half of it


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def directory_size(path: Path) -> tuple[int, int]:
    """(bytes, files) under path."""
    files = [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)
