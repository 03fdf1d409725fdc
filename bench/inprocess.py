"""The service's AWS resources on moto inside this process (`mock_aws`), provisioned as the
integration tests do and with the settings pointed at them: what bench/quote.py runs on, and
bench/chat_overhead.py's count of AWS calls.

Call it inside an active `mock_aws()`, once the process's local settings are in `os.environ`:
the service's modules are imported here, on the call, because they read their settings when
imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any


def provision_in_process(settings: Mapping[str, str] | None = None) -> Any:
    """Provision the local stack's resources on the active `mock_aws`, point the settings at them
    (and set `settings` too), and return what `provision` made."""
    from batchroute import resources
    from batchroute.adapters.aws import reset_clients
    from batchroute.config import get_settings
    from batchroute_tools.local.provision import LOCAL_ACCOUNT, LOCAL_REGION, provision

    reset_clients()
    stack = provision(
        prefix=resources.resource_prefix("local"),
        account=LOCAL_ACCOUNT,
        region=LOCAL_REGION,
        endpoint_url=None,
    )
    os.environ.update(
        {
            "QUEUE_URLS": json.dumps(stack.queue_urls),
            "BUCKETS": json.dumps(stack.buckets),
            "STATE_MACHINE_ARN": stack.state_machine_arn,
            "KMS_KEY_ID": stack.kms_key_id,
            **(settings or {}),
        }
    )
    get_settings.cache_clear()
    return stack
