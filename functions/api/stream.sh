#!/bin/sh
# The API's streamed routes on Lambda (infra/compute.py, API_STREAM): the Lambda Web Adapter
# runs this script, then forwards each request to uvicorn and streams the response back.
# The same ASGI app as the buffered function (functions/api/app.py); docs/chat.md, "On AWS".
# No proxy headers: a client's X-Forwarded-For must never become the client IP.
export PYTHONPATH="/var/task:/opt/python:${PYTHONPATH}"
exec python -m uvicorn functions.api.app:app --host 127.0.0.1 --port "${AWS_LWA_PORT:-8080}" \
    --no-access-log --log-level warning --timeout-keep-alive 60 --no-proxy-headers
