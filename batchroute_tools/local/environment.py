"""What the runner hands on: the service's environment, and a stack file for tools and tests.

The environment variables are the ones the deployed functions get from CDK (the
uppercase names of batchroute.config.Settings fields), pointed at the moto server.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from batchroute_tools.local.provision import LocalStack

# Local AWS takes any credentials; these keep boto3 from looking for real ones.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
}


def use_fake_credentials(region: str) -> None:
    """Point this process's boto3 at nothing real: fake keys, no profile."""
    os.environ.pop("AWS_PROFILE", None)
    os.environ.update(FAKE_CREDENTIALS)
    os.environ["AWS_DEFAULT_REGION"] = region


def service_environment(stack: LocalStack, *, api_url: str) -> dict[str, str]:
    if stack.endpoint_url is None:
        raise ValueError("the local service needs the moto server's endpoint")
    return {
        "ENVIRONMENT": "local",
        # boto3 also honours AWS_ENDPOINT_URL itself, so every client lands on moto.
        "AWS_ENDPOINT_URL": stack.endpoint_url,
        "AWS_REGION": stack.region,
        "RESOURCE_PREFIX": stack.prefix,
        "QUEUE_URLS": json.dumps(stack.queue_urls),
        "BUCKETS": json.dumps(stack.buckets),
        "STATE_MACHINE_ARN": stack.state_machine_arn,
        "KMS_KEY_ID": stack.kms_key_id,
        "PUBLIC_BASE_URL": api_url,
    }


def write_stack_file(path: Path, stack: LocalStack, *, api_url: str, emulators_url: str = "") -> None:
    """Describe the running stack (endpoints, physical names) for the AWS CLI, scripts and e2e tests."""
    document = {"pid": os.getpid(), "api_url": api_url, "emulators_url": emulators_url, **asdict(stack)}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    partial.replace(path)  # readers never see half a file


def remove_stack_file(path: Path) -> None:
    """Remove the stack file if this process wrote it (another runner may have replaced it)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass
