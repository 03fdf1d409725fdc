"""AWS Bedrock through boto3, with the function's IAM role (no API key): Converse and
ConverseStream for sync lanes and direct chat, batch inference jobs (S3 in, S3 out) for
batch lanes. Bodies and results come from `transform.py`; this module does the calls and
turns botocore's failures into the provider errors (docs/providers.md, AWS Bedrock).

    BedrockConverse.complete  -> bedrock-runtime Converse
    BedrockConverse.stream    -> bedrock-runtime ConverseStream: StreamStart once the event
                                 stream opens, a StreamDelta per text delta, StreamEnd with
                                 the usage of the `metadata` event
    BedrockConverse.check     -> bedrock ListFoundationModels and ListInferenceProfiles
                                 (SYSTEM_DEFINED, every page): the region's foundation model
                                 ids and cross-region inference profile ids (a health check)
    BedrockBatch.submit       -> S3 PutObject <bucket>/<prefix>/input/<job name>.jsonl (and,
                                 when a Llama record has stop sequences, <job name>.stops.json
                                 beside it: record id -> stops; the job name then ends in
                                 `-stops`), then bedrock
                                 CreateModelInvocationJob (the batch role, output to
                                 <bucket>/<prefix>/output/); the job id is the job's ARN. The
                                 job name is `batchroute-<the submission's key>` and is also
                                 the clientRequestToken: a retried submit (same key) writes
                                 the same file and gets the first job back, never a second
    BedrockBatch.poll         -> bedrock GetModelInvocationJob
    BedrockBatch.results      -> S3 GetObject <output>/<job id>/<input name>.out, line by line,
                                 each answer cut at its record's stop sequences (S3 GetObject
                                 <job name>.stops.json, once, for a `-stops` job)
    BedrockBatch.cancel       -> bedrock StopModelInvocationJob

How a failure maps (as providers/http.py maps HTTP answers):

    ThrottlingException, ServiceQuotaExceededException     TransientProviderError rate_limited
    ModelTimeoutException, InternalServerException,        TransientProviderError (retried)
      ServiceUnavailableException, ModelNotReadyException,
      ModelErrorException
    ValidationException, ResourceNotFoundException,        PermanentProviderError (item fails)
      AccessDeniedException for a model not enabled
    ValidationException "... with on-demand throughput     ProviderUnavailable
      isn't supported ..." (the model wants an             inference_profile_required (the
      inference profile id)                                lane fails over)
    stopReason malformed_model_output, malformed_tool_use  a transient failure (complete) or
                                                           TransientProviderError (stream)
                                                           model_output_malformed (retried)
    AccessDeniedException otherwise, bad credentials       ProviderUnavailable provider_auth_failed
    EndpointConnectionError, ConnectTimeoutError, a        ProviderUnavailable provider_unreachable
      connection closed before any answer
    ReadTimeoutError                                       TransientProviderError provider_timeout
    a stream broken after it opened                        TransientProviderError stream_interrupted

botocore's own retries are off for the Bedrock clients (the lane runner retries, with its
backoff); the S3 client keeps standard retries. botocore validates every request against
Bedrock's service model before sending it (parameter validation is on), the model of the API
version the endpoint pins (`api_version` for bedrock-runtime, `control_api_version` for
bedrock): BedrockClients refuses to be built (ProviderNotConfigured) when the installed
botocore has no model of that version. botocore applies one read time-out to every read, so
a ConverseStream waits max(first byte, idle) time-outs for each.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Final

import boto3
import botocore
import botocore.session
from botocore.config import Config
from botocore.eventstream import ParserError
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    DataNotFoundError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ReadTimeoutError as Urllib3ReadTimeout

import batchroute.providers.bedrock.transform as transform
from batchroute.domain.batches.jsonl import LineError, parse_jsonl
from batchroute.providers import base
from batchroute.providers.credentials import ProviderNotConfigured
from batchroute.providers.endpoints import ProviderEndpoint
from batchroute.providers.http import Timeouts

DEFAULT_BATCH_PREFIX: Final = "bedrock-batch"
# Bedrock's quota "Minimum number of records per batch inference job" (BedrockBatch's
# `min_requests`): the lane runner answers a smaller remainder of a lane through Converse
# instead (services/workflow/runner.py); submit() still refuses one, as a guard.
DEFAULT_MIN_RECORDS: Final = 100
_JOB_NAME_PREFIX: Final = "batchroute-"
# A job name is at most 63 characters of [a-zA-Z0-9] runs joined by '-' (botocore's
# ModelInvocationJobName): what the prefix and the `-stops` mark leave for the key.
_JOB_KEY_CHARS: Final = 63 - len(_JOB_NAME_PREFIX) - len(transform.STOPS_MARK)
_JOB_KEY: Final = re.compile(rf"[a-zA-Z0-9]{{1,{_JOB_KEY_CHARS}}}")
DEFAULT_TIMEOUT_HOURS: Final = 24  # the job expires after this (24 to 168)
# An output record echoes its modelInput, images included: far longer than an upload's line.
MAX_RECORD_BYTES: Final = 64 * 1024 * 1024
_S3_CONFIG: Final = {"retries": {"mode": "standard", "max_attempts": 3}}
_CREDENTIAL_ERRORS: Final = (NoCredentialsError, PartialCredentialsError)
# The Bedrock services whose API version an endpoint pins (api_version, control_api_version).
RUNTIME_SERVICE: Final = "bedrock-runtime"
CONTROL_SERVICE: Final = "bedrock"


# -- errors ------------------------------------------------------------------------------
def error_for_client_error(exc: ClientError, *, vendor: str) -> base.ProviderError:
    """The provider error for an AWS error answer (or a stream's exception event)."""
    error = exc.response.get("Error") or {}
    metadata = exc.response.get("ResponseMetadata") or {}
    return transform.aws_error(
        str(error.get("Code") or ""),
        str(error.get("Message") or ""),
        vendor=vendor,
        status=int(metadata.get("HTTPStatusCode") or 0),
        headers=metadata.get("HTTPHeaders") or {},
    )


def error_for_exception(exc: Exception, *, vendor: str, before_response: bool = False) -> base.ProviderError:
    """The provider error for a failure of the call itself (no AWS answer to read)."""
    name = type(exc).__name__
    if isinstance(exc, ClientError):
        return error_for_client_error(exc, vendor=vendor)
    if isinstance(exc, BotoConnectionError):  # EndpointConnectionError, ConnectTimeoutError, TLS
        return base.ProviderUnavailable(f"{vendor} is unreachable: {name}", code="provider_unreachable")
    if isinstance(exc, _CREDENTIAL_ERRORS):
        return base.ProviderUnavailable(f"{vendor}: no AWS credentials ({name})", code="provider_auth_failed")
    if isinstance(exc, ParamValidationError):
        return base.PermanentProviderError(
            f"the request does not fit Bedrock's API: {exc}", code="invalid_item"
        )
    if isinstance(exc, ReadTimeoutError | Urllib3ReadTimeout):
        return base.TransientProviderError(f"{vendor} did not answer in time", code="provider_timeout")
    if isinstance(exc, ConnectionClosedError) and before_response:
        return base.ProviderUnavailable(
            f"{vendor} closed the connection without answering: {name}", code="provider_unreachable"
        )
    if isinstance(exc, BotoCoreError | Urllib3Error | ParserError | OSError):
        if before_response:
            return base.TransientProviderError(f"{vendor} call failed: {name}", code="provider_error")
        return base.TransientProviderError(
            f"the connection to {vendor} broke: {name}", code="stream_interrupted"
        )
    return base.TransientProviderError(f"{vendor} call failed: {name}", code="provider_error")


@contextmanager
def _mapped(vendor: str, *, before_response: bool = True) -> Iterator[None]:
    try:
        yield
    except base.ProviderError:
        raise
    except (BotoCoreError, ClientError, Urllib3Error, ParserError, OSError) as exc:
        raise error_for_exception(exc, vendor=vendor, before_response=before_response) from exc


def _aws_code(exc: base.ProviderError) -> str:
    """The AWS error code behind a mapped provider error ("" when there was no AWS answer)."""
    cause = exc.__cause__
    return (
        str((cause.response.get("Error") or {}).get("Code") or "") if isinstance(cause, ClientError) else ""
    )


# -- clients -------------------------------------------------------------------------------
class BedrockClients:
    """The boto3 clients of one Bedrock endpoint, built on first use and shared by every
    thread (boto3 clients are thread-safe; building one is not): `bedrock-runtime` (one per
    read time-out: a stream waits its first-byte or idle time-out, whichever is longer), the
    `bedrock` control plane, and S3 for batch files. Tests and local mode point them at the
    emulator and moto with endpoint URLs. `api_versions` pins a Bedrock service's API
    version (service name -> version, from the endpoint): checked against the installed
    botocore's service models here, and the client built on that model."""

    def __init__(
        self,
        *,
        region: str | None,
        runtime_url: str | None = None,
        control_url: str | None = None,
        s3_url: str | None = None,
        timeouts: Timeouts | None = None,
        session: boto3.session.Session | None = None,
        max_connections: int = 64,
        api_versions: Mapping[str, str] | None = None,
    ) -> None:
        self.api_versions = {service: v for service, v in (api_versions or {}).items() if v}
        check_api_versions(self.api_versions)
        self.region = region
        self.runtime_url = runtime_url
        self.control_url = control_url
        self.s3_url = s3_url
        self.timeouts = timeouts or Timeouts()
        self.max_connections = max_connections
        self._session = session
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, float], Any] = {}

    def runtime(self, read_timeout: float | None = None) -> Any:
        return self._client("bedrock-runtime", self.runtime_url, read_timeout or self.timeouts.read)

    def control(self) -> Any:
        return self._client("bedrock", self.control_url, self.timeouts.read)

    def s3(self) -> Any:
        return self._client("s3", self.s3_url, self.timeouts.read)

    def _client(self, service: str, url: str | None, read_timeout: float) -> Any:
        key = (service, read_timeout)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                retries = (
                    _S3_CONFIG
                    if service == "s3"
                    else {"retries": {"mode": "standard", "total_max_attempts": 1}}
                )
                config = Config(
                    connect_timeout=self.timeouts.connect,
                    read_timeout=read_timeout,
                    max_pool_connections=self.max_connections,
                    parameter_validation=True,
                    user_agent_extra="batchroute",
                    **retries,
                )
                if self._session is None:  # one session: its loader caches the service models
                    self._session = boto3.session.Session()
                client = self._session.client(
                    service,
                    region_name=self.region,
                    endpoint_url=url,
                    config=config,
                    api_version=self.api_versions.get(service),
                )
                self._clients[key] = client
            return client


def check_api_versions(pinned: Mapping[str, str]) -> None:
    """ProviderNotConfigured unless the installed botocore has the service model of every
    pinned (service, API version): a pinned version is spoken, or nothing is."""
    for service, version in pinned.items():
        installed = installed_api_versions(service)
        if version not in installed:
            raise ProviderNotConfigured(
                f"the Bedrock endpoint pins {service} API version {version}, but botocore "
                f"{botocore.__version__} has {', '.join(installed) or 'no model of it'}: install a "
                f"botocore with the {version} model, or pin one of those in providers.toml"
            )


@cache
def installed_api_versions(service: str) -> tuple[str, ...]:
    """The API versions of `service` whose model the installed botocore carries."""
    loader = botocore.session.get_session().get_component("data_loader")
    try:
        return tuple(loader.list_api_versions(service, "service-2"))
    except DataNotFoundError:
        return ()


# -- sync ----------------------------------------------------------------------------------
@dataclass(eq=False)
class BedrockConverse:
    """The per-item adapter (SyncProvider) over Converse / ConverseStream."""

    slug: str
    clients: BedrockClients

    def complete(self, request: base.ProviderRequest) -> base.ProviderResult:
        kwargs = transform.converse_request(request)
        with _mapped(self.slug):
            response = self.clients.runtime().converse(**kwargs)
        return transform.converse_result(request.custom_id, response)

    def stream(self, request: base.ProviderRequest) -> Iterator[base.StreamEvent]:
        return self._events(request, transform.converse_request(request))

    def _events(self, request: base.ProviderRequest, kwargs: dict[str, Any]) -> Iterator[base.StreamEvent]:
        client = self.clients.runtime(self.stream_read_timeout(request))
        with _mapped(self.slug):
            response = client.converse_stream(**kwargs)
        events = response["stream"]
        acc = transform.StreamAccumulator(request.custom_id, vendor=self.slug)
        try:
            yield base.StreamStart()
            with _mapped(self.slug, before_response=False):
                for event in events:
                    delta = acc.delta(acc.add(event))
                    if delta is not None:
                        yield delta
        finally:
            events.close()
        if not acc.finished:
            raise base.TransientProviderError(
                f"{self.slug} ended the stream without messageStop", code="stream_interrupted"
            )
        yield base.StreamEnd.of(acc.result())  # malformed_* raises: the answer is not whole

    def stream_read_timeout(self, request: base.ProviderRequest) -> float:
        """botocore has one read time-out for every read of a response, the first and each
        next one alike: a stream's is the longer of its first-byte time-out (the request's
        own, e.g. direct chat's, else the endpoint's) and the endpoint's idle one."""
        timeouts = self.clients.timeouts
        return max(request.first_byte_timeout_seconds or timeouts.first_byte, timeouts.idle)

    def check(self) -> list[str]:
        """The model ids a lane may name in the endpoint's region (a health check; raises on
        failure): its foundation models, then its cross-region (system-defined) inference
        profiles (`us.anthropic....`), which ListFoundationModels does not list."""
        with _mapped(self.slug):
            control = self.clients.control()
            listed = control.list_foundation_models()
            pages = control.get_paginator("list_inference_profiles").paginate(typeEquals="SYSTEM_DEFINED")
            profiles = [
                str(p.get("inferenceProfileId"))
                for page in pages
                for p in page.get("inferenceProfileSummaries") or []
            ]
        return [str(m.get("modelId")) for m in listed.get("modelSummaries") or []] + profiles


# -- batch ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchSettings:
    """The endpoint options a batch lane needs (docs/providers.md, AWS Bedrock)."""

    bucket: str  # option batch_bucket: input and output files
    role_arn: str  # option batch_role_arn: the role Bedrock assumes to read and write them
    prefix: str = DEFAULT_BATCH_PREFIX  # option batch_prefix
    kms_key_id: str = ""  # option batch_kms_key_id: encrypts the output
    timeout_hours: int = DEFAULT_TIMEOUT_HOURS  # option batch_timeout_hours
    min_records: int = DEFAULT_MIN_RECORDS  # option batch_min_records

    @classmethod
    def from_endpoint(cls, endpoint: ProviderEndpoint) -> BatchSettings:
        return cls(
            bucket=endpoint.option("batch_bucket"),
            role_arn=endpoint.option("batch_role_arn"),
            prefix=endpoint.option("batch_prefix", DEFAULT_BATCH_PREFIX).strip("/"),
            kms_key_id=endpoint.option("batch_kms_key_id"),
            timeout_hours=int(endpoint.option("batch_timeout_hours", str(DEFAULT_TIMEOUT_HOURS))),
            min_records=int(endpoint.option("batch_min_records", str(DEFAULT_MIN_RECORDS))),
        )


@dataclass(eq=False)
class BedrockBatch:
    """The vendor batch adapter (BatchApiProvider) over batch inference jobs."""

    slug: str
    clients: BedrockClients
    settings: BatchSettings
    _: KW_ONLY
    clock: Callable[[], float] = time.time

    @property
    def min_requests(self) -> int:
        return self.settings.min_records

    def submit(self, requests: Iterable[base.ProviderRequest], *, key: str | None = None) -> str:
        settings = self.settings
        if not settings.bucket or not settings.role_arn:
            raise base.ProviderUnavailable(
                f"{self.slug} batch lanes need the batch_bucket and batch_role_arn options",
                code="provider_not_configured",
            )
        listed = list(requests)
        if not listed:
            raise base.PermanentProviderError("a batch job needs at least one request", code="invalid_item")
        if len(listed) < settings.min_records:
            raise base.ProviderUnavailable(
                f"{self.slug} runs batch jobs of at least {settings.min_records} records, not {len(listed)}",
                code="batch_too_small",
            )
        model = listed[0].provider_model_id
        if any(r.provider_model_id != model for r in listed):
            raise base.PermanentProviderError("a Bedrock batch job runs one model", code="invalid_item")
        body = b"".join(
            json.dumps(transform.batch_record(r), separators=(",", ":")).encode() + b"\n" for r in listed
        )
        stops = {r.custom_id: found for r in listed if (found := transform.record_stops(r))}
        name = self._job_name(key) + (transform.STOPS_MARK if stops else "")
        key = f"{settings.prefix}/input/{name}.jsonl"
        with _mapped(self.slug):
            if stops:  # before the job exists: results() finds it whenever the job has any
                self.clients.s3().put_object(
                    Bucket=settings.bucket,
                    Key=transform.stops_key(key),
                    Body=json.dumps({"stops": stops}, separators=(",", ":")).encode(),
                    ContentType="application/json",
                )
            self.clients.s3().put_object(
                Bucket=settings.bucket, Key=key, Body=body, ContentType="application/jsonl"
            )
        output: dict[str, Any] = {"s3Uri": transform.s3_uri(settings.bucket, f"{settings.prefix}/output/")}
        if settings.kms_key_id:
            output["s3EncryptionKeyId"] = settings.kms_key_id
        with _mapped(self.slug):
            created = self.clients.control().create_model_invocation_job(
                jobName=name,
                roleArn=settings.role_arn,
                clientRequestToken=name,
                modelId=model,
                modelInvocationType="InvokeModel",
                inputDataConfig={
                    "s3InputDataConfig": {
                        "s3InputFormat": "JSONL",
                        "s3Uri": transform.s3_uri(settings.bucket, key),
                    }
                },
                outputDataConfig={"s3OutputDataConfig": output},
                timeoutDurationInHours=settings.timeout_hours,
            )
        return str(created["jobArn"])

    def job_made(self, key: str, *, since: int) -> str | None:
        """FindsKeyedJobs: the ARN of the job submission `key` made (its name is the key's),
        in any state but `Failed` (a stopped or expired job keeps what it finished), by
        ListModelInvocationJobs (its ARN is random)."""
        name = self._job_name(key)
        after = datetime.fromtimestamp(since - base.CLOCK_SKEW_SECONDS, UTC)
        with _mapped(self.slug):
            pages = (
                self.clients.control()
                .get_paginator("list_model_invocation_jobs")
                .paginate(nameContains=name, submitTimeAfter=after, PaginationConfig={"MaxItems": 1000})
            )
            for page in pages:
                for job in page.get("invocationJobSummaries") or []:
                    named = job.get("jobName") in (name, name + transform.STOPS_MARK)
                    if named and job.get("status") != "Failed":
                        return str(job["jobArn"])
        return None

    def poll(self, job_id: str) -> base.JobStatus:
        return transform.job_status(self._job(job_id))

    def results(self, job_id: str) -> Iterator[base.ProviderResult]:
        job = self._job(job_id)
        bucket, key = transform.output_location(job)
        stops = self._stops(job)
        try:
            with _mapped(self.slug):
                body = self.clients.s3().get_object(Bucket=bucket, Key=key)["Body"]
        except base.ProviderError as exc:
            if _aws_code(exc) == "NoSuchKey":
                return  # the job wrote nothing (failed or stopped before any record)
            raise
        # A line that is not a JSON object is skipped: its request is then missing from the
        # results, and the lane runner resubmits it.
        try:
            with _mapped(self.slug, before_response=False):
                for _, record in parse_jsonl(body.iter_chunks(), max_line_bytes=MAX_RECORD_BYTES):
                    result = None if isinstance(record, LineError) else transform.batch_record_result(record)
                    if result is not None:
                        yield transform.apply_stops(result, stops.get(result.custom_id, ()))
        finally:
            body.close()

    def _stops(self, job: Mapping[str, Any]) -> dict[str, list[str]]:
        """The stop sequences submit() kept for the job's records ({} when none had any). A
        job named for them whose file is gone fails its results (never answers uncut)."""
        location = transform.stops_location(job)
        if location is None:
            return {}
        bucket, key = location
        with _mapped(self.slug):
            body = self.clients.s3().get_object(Bucket=bucket, Key=key)["Body"]
        try:
            with _mapped(self.slug, before_response=False):
                return transform.parse_stops(body.read())
        finally:
            body.close()

    def cancel(self, job_id: str) -> None:
        try:
            with _mapped(self.slug):
                self.clients.control().stop_model_invocation_job(jobIdentifier=job_id)
        except base.ProviderError as exc:
            if _aws_code(exc) == "ResourceNotFoundException":
                raise base.UnknownJob(f"{self.slug} does not know batch job {job_id}") from exc
            if _aws_code(exc) not in ("ConflictException", "ValidationException"):
                raise
            # else the job has already ended: nothing to stop

    def _job(self, job_id: str) -> dict[str, Any]:
        try:
            with _mapped(self.slug):
                return dict(self.clients.control().get_model_invocation_job(jobIdentifier=job_id))
        except base.ProviderError as exc:
            if _aws_code(exc) in ("ResourceNotFoundException", "ValidationException"):
                raise base.UnknownJob(f"{self.slug} does not know batch job {job_id}") from exc
            raise

    def _job_name(self, key: str | None) -> str:
        """A job name that is also its idempotency token (clientRequestToken) and its input
        file's name: from the submission's key, so a retried submit sends the same token
        and Bedrock answers with the job it made the first time (a key that is not a short
        run of letters and digits is used by its digest); a fresh one without a key."""
        if key is None:
            stamp = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y%m%d%H%M%S")
            return f"{_JOB_NAME_PREFIX}{stamp}-{uuid.uuid4().hex[:12]}"
        if not _JOB_KEY.fullmatch(key):
            key = hashlib.sha256(key.encode()).hexdigest()[:_JOB_KEY_CHARS]
        return f"{_JOB_NAME_PREFIX}{key}"
