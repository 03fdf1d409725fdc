"""An emulator of OpenAI's API, and of every host that speaks it (docs/emulators.md).

Routes (under the vendor's prefix, e.g. `/openai`, `/hosts/groq`):

- `POST /v1/chat/completions`: a `chat.completion`, or with `stream: true` server-sent
  `chat.completion.chunk` events, the usage chunk when `stream_options.include_usage`, then
  `data: [DONE]`;
- `POST /v1/embeddings`: a `list` of `embedding` objects;
- `GET /v1/models`: the models this vendor serves;
- (with `batch=True`) the Files and Batch APIs: `POST /v1/files` (multipart, purpose
  `batch`), `GET /v1/files/{id}`, `GET /v1/files/{id}/content`, `DELETE /v1/files/{id}`,
  `POST /v1/batches`, `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`.

Bodies follow OpenAI's API reference; tests parse every answer with the official SDK's
types (`openai.types`), so the emulator cannot drift from them. Answers, usage and faults
come from `behaviour.py`. A batch job stays `in_progress` for the configured time (by the
injected clock), its completed count growing, then writes its output and error files.
Files live on disk (`spool.py`), not in memory: a job keeps the path of its input file and
reads it line by line when it runs, writing its output and error lines to files as it goes.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

from batchroute_tools.emulators.behaviour import Answer, Behaviour, Fault, Work
from batchroute_tools.emulators.server import Reply, Request, Vendor, sse
from batchroute_tools.emulators.spool import Spool

Clock = Callable[[], float]  # seconds since the epoch


def error_reply(
    status: int, message: str, *, kind: str, code: str | None = None, headers: Mapping[str, str] | None = None
) -> Reply:
    return Reply.json(
        status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers
    )


def fault_reply(fault: Fault) -> Reply | None:
    """The HTTP answer of a fault, as OpenAI gives it; None for faults met later (a stream's)."""
    if fault.kind == "down":
        return Reply.dropped()
    if fault.kind == "fail":
        return error_reply(400, fault.message, kind="invalid_request_error", code="simulated_failure")
    if fault.kind in ("transient", "5xx"):
        return error_reply(500, fault.message, kind="server_error", code="server_error")
    if fault.kind == "rate_limited":
        return error_reply(
            429,
            fault.message,
            kind="requests",
            code="rate_limit_exceeded",
            headers={"retry-after-ms": "200", "retry-after": "1"},
        )
    if fault.kind == "overloaded":
        return error_reply(503, fault.message, kind="server_error", code="overloaded")
    return None


@dataclass
class _File:
    id: str
    purpose: str
    filename: str
    path: Path  # the content, on disk
    size: int
    created_at: int


@dataclass
class _Job:
    id: str
    endpoint: str
    input_file_id: str
    created_at: float
    input_path: Path  # the job's own name for its input file (removed when the job ends)
    cancelled_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    finished: str | None = None  # completed | expired | cancelled
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})


class OpenAIEmulator:
    def __init__(
        self,
        behaviour: Behaviour,
        *,
        provider: str,
        prefix: str,
        models: tuple[str, ...] = (),
        batch: bool = True,
        clock: Clock = time.time,
    ) -> None:
        self.behaviour = behaviour
        self.provider = provider
        self.models = models
        self.clock = clock
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}
        self._jobs: dict[str, _Job] = {}
        self.spool = Spool(provider) if batch else None
        self.vendor = Vendor(prefix)
        if self.spool is not None:
            self.vendor.on_stop.append(self.spool.close)
        route = self.vendor.route
        route("POST", "/v1/chat/completions")(self.chat)
        route("POST", "/v1/embeddings")(self.embeddings)
        route("GET", "/v1/models")(self.list_models)
        if batch:
            route("POST", "/v1/files")(self.upload)
            route("GET", r"/v1/files/(?P<file_id>[\w-]+)")(self.get_file)
            route("DELETE", r"/v1/files/(?P<file_id>[\w-]+)")(self.delete_file)
            route("GET", r"/v1/files/(?P<file_id>[\w-]+)/content")(self.file_content)
            route("POST", "/v1/batches")(self.create_batch)
            route("GET", r"/v1/batches/(?P<batch_id>[\w-]+)")(self.get_batch)
            route("POST", r"/v1/batches/(?P<batch_id>[\w-]+)/cancel")(self.cancel_batch)

    # -- chat and embeddings ------------------------------------------------------------
    def work(self, body: Mapping[str, Any], *, path: str) -> Work:
        if path.endswith("/embeddings"):
            value = body.get("input")
            inputs = tuple(value) if isinstance(value, list) else (value,)
            return Work(
                self.provider, str(body.get("model")), "embeddings", inputs=tuple(str(i) for i in inputs)
            )
        limit = body.get("max_completion_tokens") or body.get("max_tokens") or 4096
        return Work(
            self.provider,
            str(body.get("model")),
            "chat",
            messages=tuple(m for m in body.get("messages") or [] if isinstance(m, Mapping)),
            max_tokens=int(limit),
            stream=bool(body.get("stream")),
        )

    def chat(self, request: Request) -> Reply:
        body = request.json()
        invalid = _invalid_chat(body)
        if invalid:
            return error_reply(400, invalid, kind="invalid_request_error", code="invalid_request")
        work = self.work(body, path=request.path)
        fault = self.behaviour.fault(work)
        if fault is not None and fault.kind == "timeout":
            return Reply(200, {"content-type": "text/event-stream"}, delay_headers=3600.0)
        if fault is not None and (refusal := fault_reply(fault)) is not None:
            return refusal
        answer = self.behaviour.answer(work)
        ident, created = f"chatcmpl-{answer.ident}", int(self.clock())
        if not work.stream:
            time.sleep(self.behaviour.config.latency_seconds)
            whole = Reply.json(200, self.completion(work, answer, ident, created))
            if fault is not None and fault.kind == "reset":  # reset halfway through the body
                half = len(whole.body) // 2
                return Reply.stream(
                    [(0.0, whole.body[:half]), (0.0, whole.body[half:])],
                    content_type="application/json",
                    reset_after=1,
                )
            return whole
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        reset = 2 if fault is not None and fault.kind == "reset" else None
        return Reply.stream(self._chunks(work, answer, ident, created, usage), reset_after=reset)

    def completion(self, work: Work, answer: Answer, ident: str, created: int) -> dict[str, Any]:
        return {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": work.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": answer.finish,
                }
            ],
            "usage": _usage(answer),
            "system_fingerprint": None,
        }

    def _chunks(
        self, work: Work, answer: Answer, ident: str, created: int, usage: bool
    ) -> Iterator[tuple[float, bytes]]:
        config = self.behaviour.config

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": work.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }

        yield config.ttft_seconds, sse(None, chunk({"role": "assistant", "content": ""}))
        for piece in answer.pieces:
            yield config.inter_token_seconds, sse(None, chunk({"content": piece}))
        yield 0.0, sse(None, chunk({}, answer.finish))
        if usage:
            last = {**chunk({}), "choices": [], "usage": _usage(answer)}
            yield 0.0, sse(None, last)
        yield 0.0, sse(None, "[DONE]")

    def embeddings(self, request: Request) -> Reply:
        body = request.json()
        if not isinstance(body, dict) or not body.get("model") or body.get("input") in (None, "", []):
            return error_reply(400, "model and input are required", kind="invalid_request_error")
        work = self.work(body, path=request.path)
        fault = self.behaviour.fault(work)
        if fault is not None and (refusal := fault_reply(fault)) is not None:
            return refusal
        time.sleep(self.behaviour.config.latency_seconds)
        return Reply.json(200, self.embedding_list(work, self.behaviour.answer(work)))

    @staticmethod
    def embedding_list(work: Work, answer: Answer) -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": list(v)}
                for i, v in enumerate(answer.vectors)
            ],
            "model": work.model,
            "usage": {"prompt_tokens": answer.prompt_tokens, "total_tokens": answer.prompt_tokens},
        }

    def list_models(self, request: Request) -> Reply:
        if self.provider in self.behaviour.config.providers_down:
            return Reply.dropped()
        created = int(self.clock())
        return Reply.json(
            200,
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": created, "owned_by": self.provider}
                    for m in self.models
                ],
            },
        )

    # -- files --------------------------------------------------------------------------
    def upload(self, request: Request) -> Reply:
        fields = _multipart(request)
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return error_reply(400, "file and purpose=batch are required", kind="invalid_request_error")
        filename, content = fields["file"]
        record = self._store("batch", filename or "batch.jsonl", content)
        with self._lock:
            self._files[record.id] = record
        return Reply.json(200, _file_object(record))

    def get_file(self, request: Request) -> Reply:
        record = self._files.get(request.params["file_id"])
        if record is None:
            return error_reply(404, "No such File object", kind="invalid_request_error")
        return Reply.json(200, _file_object(record))

    def delete_file(self, request: Request) -> Reply:
        with self._lock:
            record = self._files.pop(request.params["file_id"], None)
        if record is None:
            return error_reply(404, "No such File object", kind="invalid_request_error")
        Spool.remove(record.path)
        return Reply.json(200, {"id": record.id, "object": "file", "deleted": True})

    def file_content(self, request: Request) -> Reply:
        record = self._files.get(request.params["file_id"])
        if record is None:
            return error_reply(404, "No such File object", kind="invalid_request_error")
        return Reply.raw(200, Spool.read(record.path), "application/octet-stream")

    # -- batches ------------------------------------------------------------------------
    def create_batch(self, request: Request) -> Reply:
        body = request.json()
        source = self._files.get(str(body.get("input_file_id")))
        if source is None:
            return error_reply(
                400, "input_file_id is not a file of this account", kind="invalid_request_error"
            )
        if body.get("endpoint") not in ("/v1/chat/completions", "/v1/embeddings", "/v1/responses"):
            return error_reply(400, "endpoint is not supported", kind="invalid_request_error")
        if body.get("completion_window") != "24h":
            return error_reply(400, "completion_window must be 24h", kind="invalid_request_error")
        total = 0
        try:
            for line in Spool.lines(source.path):
                if line.strip():
                    json.loads(line)
                    total += 1
        except ValueError:
            return error_reply(400, "the input file is not JSON Lines", kind="invalid_request_error")
        assert self.spool is not None  # the batch routes exist only with a spool
        job_id = f"batch_{uuid.uuid4().hex[:24]}"
        job = _Job(
            job_id, str(body["endpoint"]), source.id, self.clock(), self.spool.link(source.path, job_id)
        )
        job.counts["total"] = total
        with self._lock:
            self._jobs[job.id] = job
        return Reply.json(200, self._batch_object(job))

    def get_batch(self, request: Request) -> Reply:
        job = self._jobs.get(request.params["batch_id"])
        if job is None:
            return error_reply(404, "No such Batch object", kind="invalid_request_error")
        self._advance(job)
        return Reply.json(200, self._batch_object(job))

    def cancel_batch(self, request: Request) -> Reply:
        job = self._jobs.get(request.params["batch_id"])
        if job is None:
            return error_reply(404, "No such Batch object", kind="invalid_request_error")
        with self._lock:
            if job.finished is None:
                job.cancelled_at = self.clock()
                job.finished = "cancelled"
                Spool.remove(job.input_path)
        return Reply.json(200, self._batch_object(job))

    def _advance(self, job: _Job) -> None:
        """Run the job as far as the clock says: done once `batch_seconds` have passed."""
        with self._lock:
            if job.finished is not None:
                return
            elapsed = self.clock() - job.created_at
            total = job.counts["total"]
            duration = self.behaviour.config.batch_seconds
            if elapsed < duration:
                job.counts["completed"] = int(total * elapsed / duration) if duration else total
                return
            assert self.spool is not None
            names = {"ok": f"{job.id}-output", "error": f"{job.id}-errors"}
            paths = {kind: self.spool.path(name) for kind, name in names.items()}
            counts = {"ok": 0, "error": 0}
            expired = False
            with paths["ok"].open("wb") as ok, paths["error"].open("wb") as error:
                out = {"ok": ok, "error": error}
                for line in Spool.lines(job.input_path):
                    if not line.strip():
                        continue
                    row = self._run_line(json.loads(line))
                    if row is None:
                        expired = True
                        continue
                    out[row[0]].write(row[1])
                    counts[row[0]] += 1
            job.counts = {"total": total, "completed": counts["ok"], "failed": counts["error"]}
            for kind, path in paths.items():
                if not counts[kind]:
                    Spool.remove(path)
                    continue
                record = self._file_at(path, "batch_output", f"{job.id}_output.jsonl")
                self._files[record.id] = record
                if kind == "ok":
                    job.output_file_id = record.id
                else:
                    job.error_file_id = record.id
            job.finished = "expired" if expired else "completed"
            Spool.remove(job.input_path)

    def _run_line(self, line: Mapping[str, Any]) -> tuple[str, bytes] | None:
        """One input line's output (or error) line; None when the job expires before it."""
        custom_id, body = line.get("custom_id"), line.get("body") or {}
        work = self.work(body, path=str(line.get("url") or ""))
        fault = self.behaviour.fault(work, in_batch=True)
        request_id = f"req_{uuid.uuid4().hex[:24]}"
        if fault is not None and fault.kind == "expire":
            return None
        if fault is not None and fault.kind == "malformed":
            return "ok", b'{"id": "broken", "custom_id": ' + json.dumps(custom_id).encode() + b', "respon\n'
        if fault is not None and fault.kind in ("fail", "transient", "rate_limited", "overloaded", "down"):
            status = {"fail": 400, "rate_limited": 429}.get(fault.kind, 500)
            error = {
                "message": fault.message,
                "type": "invalid_request_error" if status == 400 else "server_error",
            }
            row = {
                "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                "custom_id": custom_id,
                "response": {"status_code": status, "request_id": request_id, "body": {"error": error}},
                "error": None,
            }
            return "error", (json.dumps(row) + "\n").encode()
        answer = self.behaviour.answer(work)
        if work.operation == "embeddings":
            result = self.embedding_list(work, answer)
        else:
            result = self.completion(work, answer, f"chatcmpl-{answer.ident}", int(self.clock()))
        row = {
            "id": f"batch_req_{uuid.uuid4().hex[:24]}",
            "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": request_id, "body": result},
            "error": None,
        }
        return "ok", (json.dumps(row) + "\n").encode()

    def _store(self, purpose: str, filename: str, content: bytes) -> _File:
        assert self.spool is not None
        path = self.spool.path("upload")
        path.write_bytes(content)
        return self._file_at(path, purpose, filename)

    def _file_at(self, path: Path, purpose: str, filename: str) -> _File:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        return _File(file_id, purpose, filename, path, path.stat().st_size, int(self.clock()))

    def _batch_object(self, job: _Job) -> dict[str, Any]:
        created = int(job.created_at)
        state = job.finished or ("in_progress" if self.clock() > job.created_at else "validating")
        done_at = int(job.created_at + self.behaviour.config.batch_seconds)
        return {
            "id": job.id,
            "object": "batch",
            "endpoint": job.endpoint,
            "errors": None,
            "input_file_id": job.input_file_id,
            "completion_window": "24h",
            "status": state,
            "output_file_id": job.output_file_id,
            "error_file_id": job.error_file_id,
            "created_at": created,
            "in_progress_at": created,
            "expires_at": created + 86_400,
            "finalizing_at": done_at if job.finished == "completed" else None,
            "completed_at": done_at if job.finished == "completed" else None,
            "failed_at": None,
            "expired_at": done_at if job.finished == "expired" else None,
            "cancelling_at": int(job.cancelled_at) if job.cancelled_at else None,
            "cancelled_at": int(job.cancelled_at) if job.cancelled_at else None,
            "request_counts": dict(job.counts),
            "metadata": None,
        }


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
    }


def _file_object(record: _File) -> dict[str, Any]:
    return {
        "id": record.id,
        "object": "file",
        "bytes": record.size,
        "created_at": record.created_at,
        "filename": record.filename,
        "purpose": record.purpose,
        "status": "processed",
        "status_details": None,
    }


def _invalid_chat(body: object) -> str | None:
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    if not body.get("model"):
        return "model is required"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty array"
    return None


def _multipart(request: Request) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    head = f"content-type: {request.headers.get('content-type', '')}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + request.body)
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields
