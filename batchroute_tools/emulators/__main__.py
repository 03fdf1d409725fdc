"""The vendor emulators' process of the local stack (`python -m batchroute_tools.emulators`).

The runner (batchroute_tools/local/runner.py) binds the socket and starts this process, so the
emulators never share the service's interpreter, as the vendors never share a Lambda function's
(batchroute_tools/local/child.py). Settings come from the environment the runner passes on.
"""

from __future__ import annotations

import argparse
import os


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m batchroute_tools.emulators")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket the runner bound")
    parser.add_argument("--s3-endpoint", required=True, help="the moto server, for Bedrock's batch jobs")
    parser.add_argument("--payments-webhook-url", required=True, help="where the payment emulator posts")
    parser.add_argument("--region", required=True)
    args = parser.parse_args(argv)

    import boto3

    from batchroute.config import Settings
    from batchroute_tools.emulators import build_emulators
    from batchroute_tools.local import memory
    from batchroute_tools.local.child import inherited_socket, serve_until_parent_exits

    memory.limit_arenas()
    settings = Settings.from_environ({**os.environ, "ENVIRONMENT": "local"})
    s3 = boto3.session.Session().client("s3", region_name=args.region, endpoint_url=args.s3_endpoint)
    server = build_emulators(
        settings, s3=s3, sock=inherited_socket(args.fd), payments_webhook_url=args.payments_webhook_url
    ).start()
    serve_until_parent_exits()
    server.stop()


if __name__ == "__main__":
    main()
