"""The data-file loaders (batchroute/catalog/loader.py, content/loader.py): a bad row fails
loudly naming its file and row, the format's features build the right lanes, and importing
the packages loads nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC
from decimal import Decimal
from importlib.resources import as_file
from pathlib import Path

import pytest

from batchroute.catalog import builtin_catalog
from batchroute.catalog.datafile import DataError
from batchroute.catalog.loader import data_folder, load_catalog
from batchroute.content import BuiltinContent
from batchroute.content import loader as content_loader

LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


def _edited(tmp_path: Path, name: str, old: str, new: str, *, content: bool = False) -> Path:
    """A copy of the package's data folder with `old` replaced by `new`, once, in `name`."""
    folder = tmp_path / "data"
    with as_file(content_loader.data_folder() if content else data_folder()) as source:
        shutil.copytree(source, folder)
    text = (folder / name).read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {name}"
    (folder / name).write_text(text.replace(old, new))
    return folder


def _fails(folder: Path, *fragments: str, content: bool = False) -> None:
    with pytest.raises(DataError) as raised:
        content_loader.load_content(folder) if content else load_catalog(folder)
    for fragment in fragments:
        assert fragment in str(raised.value)


def test_loading_the_package_data_again_gives_an_equal_catalog() -> None:
    assert load_catalog() == builtin_catalog()
    assert content_loader.load_content().posts == BuiltinContent().posts()


def test_the_built_in_data_is_loaded_once_per_process() -> None:
    assert builtin_catalog() is builtin_catalog()
    assert BuiltinContent().changelog() is BuiltinContent().changelog()


def test_importing_the_packages_reads_no_data() -> None:
    probe = (
        "import sys, batchroute.catalog, batchroute.content; "
        "print(sorted(m for m in sys.modules if m.endswith(('.loader', '.datafile')) or m == 'tomllib'))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_float_price_fails_naming_the_file_row_and_key(tmp_path: Path) -> None:
    folder = _edited(
        tmp_path,
        "lanes.toml",
        'price = { input = "0.15", output = "0.60", cached_input = "0.075" }',
        'price = { input = 0.15, output = "0.60", cached_input = "0.075" }',
    )
    _fails(folder, "lanes.toml, lanes[0] (openai/gpt-4o-mini): price.input", "decimal string", "float 0.15")


@pytest.mark.parametrize(
    ("name", "old", "new", "fragments"),
    [
        (
            "lanes.toml",
            'provider = "groq"\nmodel = "meta-llama/Llama-3.1-8B-Instruct"',
            'provider = "grok"\nmodel = "meta-llama/Llama-3.1-8B-Instruct"',
            (
                "lanes.toml, lanes[15] (grok/meta-llama/Llama-3.1-8B-Instruct): provider",
                "not in providers.toml",
            ),
        ),
        (
            "lanes.toml",
            'model = "gemini-1.5-flash"',
            'model = "gemini-2.0-flash"',
            ("lanes[6] (google/gemini-2.0-flash)", "lane google/gemini-2.0-flash is already defined at"),
        ),
        (
            "lanes.toml",
            "daily_capacity_items = 5_000",
            "daily_capacity = 5_000",
            ("edge-eu/meta-llama/Llama-3.3-70B-Instruct, edge-us/", "daily_capacity_items: missing"),
        ),
        (
            "lanes.toml",
            'price = { input = "0.049", output = "0.049" }',
            'price = { input = "0.049", output = "0.049" }\nhosted_tool = ["calculator"]',
            ("deepinfra/meta-llama/Llama-3.2-11B-Vision-Instruct", "hosted_tool: unknown key"),
        ),
        (
            "lanes.toml",
            'runtime_capabilities = ["vision", "any_image_type", "whitespace_stop", "seed", "penalties"]',
            'runtime_capabilities = ["vision", "reasoning"]',
            ("runtime_capabilities", "cannot do all of"),
        ),
        (
            "lanes.toml",
            'price = { input = "0.02", output = "0" }\nbatch_price_factor = "1"',
            'price = { input = "0.02", output = "0" }\nbatch_price_factor = "2"',
            ("together/BAAI/bge-large-en-v1.5): batch_price_factor", "at most 1"),
        ),
        (
            "providers.toml",
            'privacy_tiers = ["standard"]\ndata_retention_days = 55',
            'privacy_tiers = ["standard", "secret"]\ndata_retention_days = 55',
            (
                "providers.toml, providers.google: privacy_tiers",
                "'secret' is not one of standard, confidential",
            ),
        ),
        (
            "providers.toml",
            'extends = "edge-eu"',
            'extends = "edge-mars"',
            ("providers.toml, providers.edge-us: extends", "not a provider listed above"),
        ),
        (
            "models.toml",
            'operations = ["embeddings"]\nruntime_capabilities = ["embedding_dimensions"]',
            'operations = "embeddings"\nruntime_capabilities = ["embedding_dimensions"]',
            ("models.toml, models.text-embedding-3-small: operations", "list of non-blank strings"),
        ),
        (
            "fees.toml",
            'margin_floor_pct = "5.90"',
            'margin_floor_pct = "-5.90"',
            ("fees.toml: margin_floor_pct", "decimal string"),
        ),
        (
            "catalog.toml",
            'version = "2026-12-04.2"',
            'version = "2026-12-04.2"\nversion = "2026-12-05.1"',
            ("catalog.toml: Cannot overwrite a value (at line 5",),  # TOML's own errors name the line
        ),
        (
            "workflow_products.json",
            '"routing_mode": "privacy_constrained"',
            '"routing_mode": "privacy"',
            ("workflow_products.json, workflow_products[3] (pii-redaction): route_policy.routing_mode",),
        ),
    ],
)
def test_a_bad_row_fails_naming_its_file_and_row(
    tmp_path: Path, name: str, old: str, new: str, fragments: tuple[str, ...]
) -> None:
    _fails(_edited(tmp_path, name, old, new), *fragments)


def test_a_bad_content_row_fails_naming_its_file_and_row(tmp_path: Path) -> None:
    folder = _edited(
        tmp_path,
        "posts.toml",
        "published_at = 2026-11-21T11:30:00Z",
        "published_at = 2026-11-21T11:30:00",
        content=True,
    )
    _fails(folder, "posts.toml, posts[3] (how-routing-receipts-work): published_at", "in UTC", content=True)


def test_explicit_batch_prices_replace_the_factor(tmp_path: Path) -> None:
    # Given a lane whose batch price is not the provider's factor times the direct price
    folder = _edited(
        tmp_path,
        "lanes.toml",
        'price = { input = "0.59", output = "0.79" }',
        'price = { input = "0.59", output = "0.79", batch_input = "0.30", batch_output = "0.40" }',
    )

    # When / Then
    lane = next(lane for lane in load_catalog(folder).lanes if lane.lane_id == f"groq/{LLAMA_70B}")
    assert (lane.price.batch_input_per_mtok, lane.price.batch_output_per_mtok) == (
        Decimal("0.30"),
        Decimal("0.40"),
    )
    assert (lane.price.input_per_mtok, lane.price.output_per_mtok) == (Decimal("0.59"), Decimal("0.79"))


def test_a_provider_variant_and_a_shared_lane_row_are_data_changes(tmp_path: Path) -> None:
    # Given a third edge pool that extends edge-eu and is switched off, sharing edge-eu's 8B row
    folder = _edited(
        tmp_path,
        "providers.toml",
        "launched = false\n",
        'launched = false\n\n[providers.edge-ap]\nextends = "edge-eu"\ndisplay_name = "Edge AP"\n'
        'regions = ["ap"]\nenabled = false\n',
    )
    lanes = (folder / "lanes.toml").read_text()
    shared = 'provider = ["edge-eu", "edge-us"]\nmodel = "meta-llama/Llama-3.1-8B-Instruct"'
    (folder / "lanes.toml").write_text(
        lanes.replace(shared, shared.replace('"edge-us"]', '"edge-us", "edge-ap"]'))
    )

    # When
    catalog = load_catalog(folder)

    # Then: it inherits everything it does not override, and its lane is edge-eu's
    edge_ap, edge_eu = catalog.provider("edge-ap"), catalog.provider("edge-eu")
    assert edge_ap is not None and edge_eu is not None
    assert (edge_ap.kind, edge_ap.privacy_tiers, edge_ap.max_concurrency) == (
        "edge",
        ("standard", "confidential"),
        4,
    )
    assert (edge_ap.regions, edge_ap.enabled, edge_ap.launched) == (("ap",), False, True)
    [lane] = [lane for lane in catalog.lanes if lane.provider == "edge-ap"]
    eu_lane = next(x for x in catalog.lanes if x.lane_id == "edge-eu/meta-llama/Llama-3.1-8B-Instruct")
    assert (
        lane.reliability == eu_lane.reliability and lane.runtime_capabilities == eu_lane.runtime_capabilities
    )
    assert catalog.lanes[-1] is lane  # listed after the providers above it


def test_content_dates_are_utc_and_the_default_author_applies() -> None:
    content = content_loader.load_content()
    assert content.version == "2026-11-21.1"
    assert all(entry.released_at.tzinfo is UTC for entry in content.changelog)
    assert {post.author for post in content.posts} == {"BatchRoute engineering"}


def test_a_models_release_date_is_a_toml_date(tmp_path: Path) -> None:
    # Given gpt-4o-mini's release date written as a string
    folder = _edited(tmp_path, "models.toml", "released = 2024-07-18", 'released = "2024-07-18"')
    # Then the catalog refuses it, naming the file, the model and the key
    _fails(folder, "models.toml", "gpt-4o-mini", "released", "a date such as 2024-07-18")
    # And the built-in models all have one
    assert all(model.released is not None for model in builtin_catalog().models)
