"""The customer's bucket for delivery target tests: a SECOND moto server, in its own process
(its own state, nothing shared with the service's moto), on another loopback port, that
checks credentials like S3 does: only the IAM access key made here may write, a wrong
secret is `SignatureDoesNotMatch`, an unknown key `InvalidAccessKeyId`.

    with CustomerS3.start() as customer:
        customer.endpoint_url, customer.access_key_id, customer.secret_access_key
        customer.objects("customer-results")  # {key: bytes}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

BUCKET = "customer-results"
OTHER_BUCKET = "customer-archive"
# The server's first actions run without credentials (moto's INITIAL_NO_AUTH_ACTION_COUNT):
# the IAM user, its policy and its access key. Everything after is authenticated.
_SETUP_ACTIONS = 3
_SERVER = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print("PORT", server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # until the test closes our stdin
server.stop()
"""


@dataclass(frozen=True)
class CustomerS3:
    endpoint_url: str
    access_key_id: str
    secret_access_key: str

    def client(self, *, secret: str | None = None) -> Any:
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=secret or self.secret_access_key,
            config=Config(
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def objects(self, bucket: str = BUCKET) -> dict[str, bytes]:
        s3 = self.client()
        listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}

    def content_type(self, key: str, bucket: str = BUCKET) -> str:
        return str(self.client().head_object(Bucket=bucket, Key=key)["ContentType"])

    def target_body(self, **overrides: Any) -> dict[str, Any]:
        """A POST /v1/delivery-targets body for this server's bucket."""
        body: dict[str, Any] = {
            "name": "customer bucket",
            "endpoint_url": self.endpoint_url,
            "region": "us-east-1",
            "bucket": BUCKET,
            "prefix": "batchroute/out",
            "access_key_id": self.access_key_id,
            "secret_access_key": self.secret_access_key,
        }
        body.update(overrides)
        return body

    @classmethod
    @contextmanager
    def start(cls) -> Iterator[CustomerS3]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "TEST_SERVER_MODE"))}
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_SETUP_ACTIONS)
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            while line and not line.startswith("PORT"):
                line = process.stdout.readline()
            endpoint = f"http://127.0.0.1:{int(line.split()[1])}"
            iam = boto3.session.Session().client(
                "iam",
                endpoint_url=endpoint,
                region_name="us-east-1",
                aws_access_key_id="setup",
                aws_secret_access_key="setup-secret",
            )
            iam.create_user(UserName="delivery")
            iam.put_user_policy(
                UserName="delivery",
                PolicyName="s3",
                PolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                    }
                ),
            )
            key = iam.create_access_key(UserName="delivery")["AccessKey"]
            customer = cls(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
            s3 = customer.client()
            s3.create_bucket(Bucket=BUCKET)
            s3.create_bucket(Bucket=OTHER_BUCKET)
            yield customer
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
