"""Construct ids derived from resource keys (stable logical ids, readable template)."""

from __future__ import annotations


def construct_id(key: str, suffix: str = "") -> str:
    """'access-logs' -> 'AccessLogs' (+ suffix)."""
    return "".join(part.capitalize() for part in key.replace("_", "-").split("-")) + suffix
