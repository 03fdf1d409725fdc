"""The Lambda assets in .build/: our package plus Lambda-platform wheels, one folder per function."""

from __future__ import annotations

import os
import stat
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from batchroute import resources
from infra import assets


def _files(root: Path, pattern: str = "*.py") -> set[str]:
    return {
        str(p.relative_to(root)) for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts
    }


def test_the_layer_ships_our_package_as_it_is_in_the_repository(lambda_assets: assets.BuildResult) -> None:
    # Given / When
    shipped = lambda_assets.layer_dir / "python" / resources.SERVICE

    # Then
    assert _files(shipped, "*") == _files(assets.PACKAGE_SOURCE, "*")
    for name in _files(assets.PACKAGE_SOURCE, "*"):
        assert (shipped / name).read_bytes() == (assets.PACKAGE_SOURCE / name).read_bytes(), name


def test_the_layer_has_lambda_platform_wheels_and_no_aws_sdk(lambda_assets: assets.BuildResult) -> None:
    # Given
    site = lambda_assets.layer_dir / "python"

    # When
    top_level = {p.name.split("-")[0].lower() for p in site.iterdir()}
    compiled = list(site.glob("pydantic_core/*.so"))

    # Then: the runtime's SDK is not duplicated; compiled code is for CPython 3.12 on x86_64
    assert top_level.isdisjoint(assets.RUNTIME_PROVIDED)
    assert {"pydantic", "fastapi", "mangum", "aws_lambda_powertools"} <= top_level
    assert compiled
    assert all("cpython-312-x86_64-linux-gnu" in p.name for p in compiled)


def test_the_layer_dependencies_are_the_project_dependencies_minus_the_sdk() -> None:
    # Given
    declared = tomllib.loads((assets.ROOT / "pyproject.toml").read_text())["project"]["dependencies"]

    # When
    shipped = assets.layer_dependencies()

    # Then
    assert [d for d in declared if not d.startswith(("boto3", "botocore"))] == shipped


@pytest.mark.parametrize("spec", resources.FUNCTIONS, ids=lambda f: f.key)
def test_each_function_asset_holds_its_handler_package(
    lambda_assets: assets.BuildResult, spec: resources.Function
) -> None:
    # Given
    root = lambda_assets.function_dirs[spec.key]

    # When
    package = root / "functions" / spec.key

    # Then: importable as functions.<key>.handler, with exactly the repository's modules
    assert (root / "functions" / "__init__.py").is_file()
    assert (package / "handler.py").is_file(), f"{spec.handler} has no module"
    assert _files(package) == _files(assets.FUNCTIONS_SOURCE / spec.key)
    assert {p.name for p in root.iterdir()} == {"functions"}


def test_no_bytecode_is_shipped(lambda_assets: assets.BuildResult) -> None:
    # Given / When
    caches = list(assets.BUILD_DIR.rglob("__pycache__"))

    # Then
    assert caches == []


def test_a_second_build_reuses_the_installed_dependencies(lambda_assets: assets.BuildResult) -> None:
    # Given: the session's build

    # When
    again = assets.build(quiet=True)

    # Then
    assert again.dependencies_installed is False
    assert again.function_dirs == lambda_assets.function_dirs


def test_a_script_stays_executable_in_its_asset(lambda_assets: assets.BuildResult) -> None:
    # The streaming function's exec wrapper runs functions/api/stream.sh (docs/chat.md)
    shipped = lambda_assets.function_dirs["api"] / "functions" / "api" / "stream.sh"
    source = assets.FUNCTIONS_SOURCE / "api" / "stream.sh"
    assert os.access(source, os.X_OK)
    assert stat.S_IMODE(shipped.stat().st_mode) == stat.S_IMODE(source.stat().st_mode)
    # And a build that finds it without its mode (an older build's copy) restores it
    shipped.chmod(0o644)
    assets.build(quiet=True)
    assert os.access(shipped, os.X_OK)


def test_builds_at_once_wait_for_each_other_and_a_refresh_rewrites_nothing_unchanged(
    lambda_assets: assets.BuildResult,
) -> None:
    # Given the session's build, and a file of it as a reader (a synth) sees it
    shipped = lambda_assets.layer_dir / "python" / resources.SERVICE
    probe = shipped / "resources.py"
    before = probe.stat()
    # When three builds run at once (as the test workers' builds and a synth beside them do)
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: assets.build(quiet=True), range(3)))
    # Then each ends whole, the layer still the package, and an unchanged file untouched
    assert all(r.function_dirs == lambda_assets.function_dirs for r in results)
    assert _files(shipped, "*") == _files(assets.PACKAGE_SOURCE, "*")
    assert (probe.stat().st_ino, probe.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_the_console_bundle_is_built_once_per_source_state(lambda_assets: assets.BuildResult) -> None:
    # Given: the session's build produced console/dist
    index = lambda_assets.console_dist / "index.html"
    assert index.is_file()
    built_at = index.stat().st_mtime_ns

    # When: built again from the same sources
    rebuilt = assets.build_console(quiet=True)

    # Then: npm is not run again, and the stack finds the bundle
    assert rebuilt is False
    assert index.stat().st_mtime_ns == built_at
    assert assets.console_dist() == assets.CONSOLE_DIST


def test_a_missing_console_bundle_stops_the_synth_with_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given: a checkout whose console was never built
    monkeypatch.setattr(assets, "CONSOLE_DIST", tmp_path / "dist")

    # When / Then
    with pytest.raises(assets.BuildError, match="make build"):
        assets.console_dist()
