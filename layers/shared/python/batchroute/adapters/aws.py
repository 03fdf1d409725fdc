"""Cached boto3 clients, pointed at the embedded moto server in local mode, all made from one
boto3 session: its loader parses each service model once per process, where a session per
client parses it again (a third of a second for DynamoDB or Step Functions). A session is not
thread-safe, so clients are made under a lock; the clients themselves are."""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from batchroute.config import get_settings

_CONFIG = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=5, read_timeout=30)


_LOCK = threading.Lock()


@cache
def _session() -> boto3.session.Session:
    return boto3.session.Session()


def new_client(service: str, **options: Any) -> Any:
    """A client of the shared session (keyword options as `Session.client` takes them)."""
    with _LOCK:
        return _session().client(service, **options)


@cache
def client(service: str) -> Any:
    settings = get_settings()
    return new_client(
        service,
        region_name=settings.aws_region,
        endpoint_url=settings.aws_endpoint_url,
        config=_CONFIG,
    )


def reset_clients() -> None:
    """Forget cached clients (tests switch between moto contexts)."""
    client.cache_clear()
