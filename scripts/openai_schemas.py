"""Writes batchroute_tools/contracts/openai_schemas.json: the component schemas of OpenAI's
request bodies, derived from the vendored OpenAPI document (batchroute_tools/contracts/openai.py,
`derive_schemas`). Run it after updating tests/fixtures/vendors/openai/openapi.yaml;
tests/unit/test_openai_contract.py fails until it is run.

Usage: `python scripts/openai_schemas.py`
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from batchroute_tools.contracts.openai import SCHEMAS_FILE, derive_schemas

DOCUMENT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "vendors" / "openai" / "openapi.yaml"


def schemas_json(document_path: Path = DOCUMENT) -> str:
    with document_path.open(encoding="utf-8") as handle:
        document = yaml.load(handle, Loader=yaml.CSafeLoader)
    return json.dumps(derive_schemas(document), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    SCHEMAS_FILE.write_text(schemas_json(), encoding="utf-8")
    print(f"wrote {SCHEMAS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
