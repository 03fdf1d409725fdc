"""Lambda SnapStart runtime hooks for the API function (docs/cold-start.md).

With SnapStart (declared in infra/compute.py for the API function, Python 3.12) Lambda runs
the function's init once per published version, snapshots the memory, and starts each new
execution environment from that snapshot instead of importing again. The hooks come from
`snapshot_restore_py`, which the Lambda Python runtime ships; elsewhere (tests, the local
stack) it is absent and `install()` does nothing.

- Before the snapshot: finish what the first request would otherwise pay for and that is
  the same in every copy: the OpenAPI document (which includes every route module, imported
  on first use otherwise: functions/api/lazy_routes.py), and the modules the wiring imports
  on first use. Nothing that is per copy: no AWS client, connection, credential or secret is created.
- After each restore: give the copy its own random sequence (every copy starts from the
  same memory, so `random` would repeat across them; ids and secrets use `os.urandom` and
  `secrets`, which the kernel keeps distinct), and drop any cached AWS client and signing
  client so connections are opened afresh.
"""

from __future__ import annotations

import importlib
import random
from typing import Any

# Imported by the wiring on first use; importing them into the snapshot takes their cost
# off the first request after a restore.
FIRST_REQUEST_MODULES = (
    "batchroute.adapters.dynamo.chat_holds",
    "batchroute.adapters.dynamo.identity",
    "batchroute.adapters.dynamo.lanes",
    "batchroute.adapters.dynamo.rate_limits",
    "batchroute.adapters.s3_objects",
    "batchroute.services.accounts.authentication",
    "batchroute.services.billing.rate_limiting",
    "batchroute.services.chat.direct",
    "batchroute.services.chat.state",
    "batchroute.providers.openai",
)


def before_snapshot() -> None:
    from functions.api.app import app

    app.openapi()  # the document is built once and cached on the app
    for module in FIRST_REQUEST_MODULES:
        importlib.import_module(module)


def after_restore() -> None:
    from batchroute.adapters.aws import reset_clients
    from batchroute.adapters.s3_objects import presigning_client

    random.seed()  # from os.urandom: this copy's own sequence
    reset_clients()
    presigning_client.cache_clear()


def install() -> bool:
    """Register the hooks when running on a SnapStart-capable Lambda runtime."""
    try:
        hooks: Any = importlib.import_module("snapshot_restore_py")
    except ImportError:
        return False
    hooks.register_before_snapshot(before_snapshot)
    hooks.register_after_restore(after_restore)
    return True
