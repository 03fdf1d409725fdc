"""Delivery targets: register, list, change, remove and test the buckets an org's batch
artifacts are pushed to (docs/delivery-targets.md; the rules in domain/delivery/targets.py).

The secret access key is sealed with KMS (context: org, target, purpose) before anything is
stored, and unsealed only in memory when a test or a delivery opens the bucket. No answer,
log line or error carries it. Every endpoint URL passes the SSRF guard when it is saved and
again before every connection (`check_url`: the guard with the deployment's loopback rule).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, replace
from typing import Protocol

from batchroute.clock import Clock, isoformat
from batchroute.domain.delivery.network import ResolvedUrl, reaches
from batchroute.domain.delivery.targets import (
    MAX_TARGETS_PER_ORG,
    BucketRefused,
    CreateTarget,
    DeliveryTarget,
    LastTest,
    Readable,
    TargetTest,
    UpdateTarget,
    apply_update,
    check_new,
    check_update,
    probe_object_key,
    secret_context,
)
from batchroute.errors import Conflict, InvalidRequest, NotFound
from batchroute.ids import new_id
from batchroute.observability import logger
from batchroute.services.delivery.ports import Sealer

# An update raced by another write (an update, a test's outcome) is made again on a fresh read.
UPDATE_ATTEMPTS = 3


class TargetStore(Protocol):
    def create(self, target: DeliveryTarget, *, limit: int) -> bool: ...

    def list(self, org_id: str) -> list[DeliveryTarget]: ...

    def get(self, org_id: str, target_id: str) -> DeliveryTarget | None: ...

    def replace(self, target: DeliveryTarget, *, seen: DeliveryTarget) -> bool: ...

    def record_test(self, target: DeliveryTarget, test: LastTest) -> bool: ...

    def delete(self, org_id: str, target_id: str) -> bool: ...


class Bucket(Protocol):
    def put(self, key: str, body: bytes, *, content_type: str) -> None: ...

    def upload(self, key: str, source: Readable, *, content_type: str) -> None: ...

    def keys(self, prefix: str, *, limit: int) -> list[str]: ...

    def read(self, key: str, *, max_bytes: int) -> bytes: ...


class Buckets(Protocol):
    def open(self, target: DeliveryTarget, secret_access_key: str) -> Bucket: ...


@dataclass(eq=False)
class DeliveryTargets:
    store: TargetStore
    sealer: Sealer
    buckets: Buckets
    _: KW_ONLY
    check_url: Callable[[str], object]
    clock: Clock
    max_targets: int = MAX_TARGETS_PER_ORG
    probe_buckets: Buckets | None = None  # the test endpoint's (short time-outs); None: `buckets`
    # The service's own AWS endpoint, when it has one (local mode: its moto): never a target's
    own_endpoint: str | None = None

    # -- registration --------------------------------------------------------------------
    def create(self, org_id: str, command: CreateTarget) -> DeliveryTarget:
        """A new target from the given fields (each checked at the edge)."""
        check_new(command)
        self._check_endpoint(command.endpoint_url)
        now = isoformat(self.clock.now())
        target_id = new_id("dt", self.clock.now())
        sealed = self.sealer.seal(command.secret_access_key, context=secret_context(org_id, target_id))
        target = command.target(target_id=target_id, org_id=org_id, sealed=sealed, at=now)
        if not self.store.create(target, limit=self.max_targets):
            raise Conflict(
                f"An organization may register at most {self.max_targets} delivery targets.",
                code="delivery_target_limit",
                details={"limit": self.max_targets},
            )
        logger.info("delivery target registered", extra={"org_id": org_id, "target_id": target_id})
        return target

    def for_org(self, org_id: str) -> list[DeliveryTarget]:
        return self.store.list(org_id)

    def enabled(self, org_id: str) -> list[DeliveryTarget]:
        return [t for t in self.store.list(org_id) if t.enabled]

    def get(self, org_id: str, target_id: str) -> DeliveryTarget:
        target = self.store.get(org_id, target_id) if target_id.startswith("dt_") else None
        if target is None:
            raise NotFound("No such delivery target.", code="delivery_target_not_found")
        return target

    def read_prefix(
        self, org_id: str, target_id: str, prefix: str, *, max_files: int, max_bytes: int
    ) -> Iterator[tuple[str, bytes]]:
        """Every object under `prefix` in the org's target (at most `max_files`, each at most
        `max_bytes`), read with the target's own credentials: a schedule's input files. The
        bucket's refusal is the caller's error (`bucket_<code>`)."""
        target = self.get(org_id, target_id)
        try:
            bucket = self.open(target)
            for key in bucket.keys(prefix, limit=max_files):
                yield key, bucket.read(key, max_bytes=max_bytes)
        except BucketRefused as refused:
            raise InvalidRequest(
                f"The input bucket refused: {refused.message}", code=f"bucket_{refused.code}".lower()[:64]
            ) from None

    def find(self, org_id: str, target_id: str) -> DeliveryTarget | None:
        return self.store.get(org_id, target_id)

    def update(self, org_id: str, target_id: str, changes: UpdateTarget) -> DeliveryTarget:
        """Apply `changes` to the target as it is: a write that lands between the read and
        the write (another update, a test's outcome) has the update made again on a fresh
        read, up to UPDATE_ATTEMPTS times, then 409 `concurrent_update`."""
        check_update(changes)
        sealed = None
        for _ in range(UPDATE_ATTEMPTS):
            current = self.get(org_id, target_id)
            updated = apply_update(current, changes, at=isoformat(self.clock.now()))
            if updated.endpoint_url != current.endpoint_url:
                self._check_endpoint(updated.endpoint_url)
            if changes.secret_access_key is not None:
                sealed = sealed or self.sealer.seal(
                    changes.secret_access_key, context=secret_context(org_id, target_id)
                )
                updated = replace(updated, secret_sealed=sealed)
            if self.store.replace(updated, seen=current):
                return updated
        raise Conflict(
            "The delivery target changed while this update was applied; retry.",
            code="concurrent_update",
        )

    def delete(self, org_id: str, target_id: str) -> None:
        self.get(org_id, target_id)
        if not self.store.delete(org_id, target_id):
            raise NotFound("No such delivery target.", code="delivery_target_not_found")
        logger.info("delivery target removed", extra={"org_id": org_id, "target_id": target_id})

    # -- reaching the bucket ---------------------------------------------------------------
    def open(self, target: DeliveryTarget, *, probe: bool = False) -> Bucket:
        """The target's bucket, ready to write: the endpoint re-checked by the SSRF guard
        (its name may resolve elsewhere now), the secret unsealed in memory only; `probe`:
        with the test endpoint's short time-outs. Raises BucketRefused."""
        if target.endpoint_url is not None:
            try:
                self._checked(target.endpoint_url)
            except InvalidRequest as refused:
                raise BucketRefused(refused.code, refused.message) from None
        try:
            secret = self.sealer.unseal(
                target.secret_sealed, context=secret_context(target.org_id, target.target_id)
            )
        except Exception:
            logger.exception(
                "delivery target secret could not be unsealed",
                extra={"org_id": target.org_id, "target_id": target.target_id},
            )
            raise BucketRefused("secret_unavailable", "the stored secret could not be unsealed") from None
        buckets = (self.probe_buckets or self.buckets) if probe else self.buckets
        return buckets.open(target, secret)

    def test(self, org_id: str, target_id: str) -> TargetTest:
        """Write a small sample object with the target's credentials; the outcome, kept on
        the target as `last_test` unless the target changed while it was tested (the
        outcome is of the settings it had). A refusal is an answer (`ok: false`), not an error."""
        target = self.get(org_id, target_id)
        now = self.clock.now()
        key = probe_object_key(target, now)
        body = json.dumps(
            {
                "object": "delivery_target.test",
                "target_id": target.target_id,
                "created_at": isoformat(now),
                "message": "A test object written by the batch service; safe to delete.",
            }
        ).encode()
        try:
            self.open(target, probe=True).put(key, body, content_type="application/json")
        except BucketRefused as refused:
            test = LastTest(False, isoformat(now), key, refused.code, refused.message)
        else:
            test = LastTest(True, isoformat(now), key)
        self.store.record_test(target, test)
        logger.info(
            "delivery target tested",
            extra={"org_id": org_id, "target_id": target_id, "ok": test.ok, "error_code": test.error_code},
        )
        return TargetTest(target_id, target.bucket, test)

    def _checked(self, endpoint_url: str) -> None:
        """The SSRF guard, and never the service's own storage (an org would read and write
        every org's objects there: local mode's moto checks no key)."""
        resolved = self.check_url(endpoint_url)
        if self.own_endpoint and isinstance(resolved, ResolvedUrl) and reaches(resolved, self.own_endpoint):
            raise InvalidRequest(
                "endpoint_url is the service's own storage, not a bucket of yours.", code="unsafe_url"
            )

    def _check_endpoint(self, endpoint_url: str | None) -> None:
        if endpoint_url is None:
            return
        try:
            self._checked(endpoint_url)
        except InvalidRequest as refused:
            raise InvalidRequest(
                refused.message,
                code=refused.code,
                details={**(refused.details or {}), "field": "endpoint_url"},
            ) from None
