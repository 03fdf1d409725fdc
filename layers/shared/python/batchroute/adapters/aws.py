"""Cached boto3 clients, pointed at the embedded moto server in local mode, all made from one
boto3 session: its loader parses each service model once per process, where a session per
client parses it again (a third of a second for DynamoDB or Step Functions). A session is not
thread-safe, so clients are made under a lock; the clients themselves are."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(eq=False)
class GivenOrShared:
    """An adapter's client, as a dataclass field (`sqs: Any = shared_client("sqs")`):
    the one its constructor was given (a test's, a pinned endpoint's), else `shared()`, asked on
    each use, so a `reset_clients` is seen. Left out, the field's default is None: none given."""

    shared: Callable[[], Any]

    def __set_name__(self, owner: type, name: str) -> None:
        self._given = f"_given_{name}"

    def __get__(self, adapter: object | None, owner: type | None = None) -> Any:
        if adapter is None:
            return None
        return getattr(adapter, self._given) or self.shared()

    def __set__(self, adapter: object, given: Any) -> None:
        setattr(adapter, self._given, given)


def shared_client(service: str) -> GivenOrShared:
    """The field of an adapter's client of `service`: given, else the process's (`client`)."""
    return GivenOrShared(lambda: client(service))
