"""What a client asks of presets, as the request models build it (functions/api/schemas/
presets.py reads each body once, at the edge, with the domain's rules: domain/presets/presets.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from batchroute.domain.presets.presets import PresetContent


@dataclass(frozen=True, slots=True)
class CreatePreset:
    """A new preset (version 1), or an archived name back at its next version."""

    name: str
    content: PresetContent


@dataclass(frozen=True, slots=True)
class ReplacePreset:
    """PUT: the whole template again, as the next version."""

    content: PresetContent


@dataclass(frozen=True, slots=True)
class PatchPreset:
    """PATCH: the template's fields as the client sent them (customer JSON: `parameters` and
    `routing` merge key by key, null removes), judged merged over the latest version
    (`merge_patch`, then `parse_preset`)."""

    fields: Mapping[str, Any]
