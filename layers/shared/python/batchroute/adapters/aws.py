"""Cached boto3 clients, pointed at the embedded moto server in local mode."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from batchroute.config import get_settings

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=30)


@cache
def client(service: str) -> Any:
    settings = get_settings()
    return boto3.session.Session().client(
        service,
        region_name=settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=_CONFIG,
    )


def reset_clients() -> None:
    """Forget cached clients (tests switch between moto contexts)."""
    client.cache_clear()
