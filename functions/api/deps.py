"""Dependencies shared by the routers, as Annotated aliases: the settings, the clock, and
every service, taken from the one wiring (batchroute/wiring/) of this app's settings and
clock, so tests that override `get_settings` or `get_clock` get services built from theirs.
A service the wiring builds once is `built("<name>")`; the account services, built per
request from seams tests replace, have their own providers (last section)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any

from fastapi import Depends

from batchroute.clock import Clock, SystemClock
from batchroute.services.accounts.accounts import Registration
from batchroute.services.accounts.password_reset import FORGOT_FLOOR_SECONDS, PasswordReset, ResponseFloor
from batchroute.services.accounts.passwords import Argon2Passwords
from batchroute.services.accounts.sessions import Sessions
from batchroute.services.accounts.settings import AccountSettings
from batchroute.services.accounts.verification import EmailVerification
from batchroute.services.batches.create import BatchService
from batchroute.services.batches.files import FileService
from batchroute.services.batches.quotes import QuoteService
from batchroute.services.batches.reads import BatchReads
from batchroute.services.billing.auto_topup import AutoTopupService
from batchroute.services.billing.controls import BillingControlsService
from batchroute.services.billing.events import BillingEventLog
from batchroute.services.billing.payments import CreditPurchases
from batchroute.services.billing.retention import RetentionService
from batchroute.services.billing.usage import UsageService
from batchroute.services.catalog.catalog import CatalogService
from batchroute.services.catalog.content import ContentService
from batchroute.services.compat.batches import CompatBatches
from batchroute.services.compat.files import CompatFiles
from batchroute.services.compat.uploads import CompatUploads
from batchroute.services.delivery.buckets import BucketDelivery
from batchroute.services.delivery.ports import Mailer
from batchroute.services.delivery.targets import DeliveryTargets
from batchroute.services.feedback.service import FeedbackService
from batchroute.services.presets.service import Presets
from batchroute.services.routing.policy import RoutePolicyService
from batchroute.services.schedules.schedules import Schedules
from batchroute.services.work_orders.service import WorkOrders
from batchroute.wiring import Wiring, wiring_for
from functions.api.settings_dep import SettingsDep as SettingsDep  # re-exported for the routes

_system_clock = SystemClock()


def get_clock() -> Clock:
    return _system_clock


ClockDep = Annotated[Clock, Depends(get_clock)]


def get_wiring(settings: SettingsDep, clock: ClockDep) -> Wiring:
    return wiring_for(settings, clock)


WiringDep = Annotated[Wiring, Depends(get_wiring)]


def built(name: str) -> Callable[[Wiring], Any]:
    """The dependency that hands a route the wiring's `name` (a service it built once)."""
    if not hasattr(Wiring, name):
        raise AttributeError(f"the wiring builds no {name!r}")

    def dependency(wiring: WiringDep) -> Any:
        return getattr(wiring, name)

    dependency.__name__ = dependency.__qualname__ = f"wiring_{name}"
    return dependency


FilesDep = Annotated[FileService, Depends(built("files"))]
QuotesDep = Annotated[QuoteService, Depends(built("quotes"))]
BatchesDep = Annotated[BatchService, Depends(built("batches"))]
ReadsDep = Annotated[BatchReads, Depends(built("batch_reads"))]
BillingControlsDep = Annotated[BillingControlsService, Depends(built("billing_controls"))]


RoutePolicyDep = Annotated[RoutePolicyService, Depends(built("route_policy"))]
AutoTopupDep = Annotated[AutoTopupService, Depends(built("auto_topup"))]
CreditPurchasesDep = Annotated[CreditPurchases, Depends(built("credit_purchases"))]
BillingEventsDep = Annotated[BillingEventLog, Depends(built("billing_event_log"))]
RetentionDep = Annotated[RetentionService, Depends(built("retention"))]
UsageDep = Annotated[UsageService, Depends(built("usage"))]
CatalogDep = Annotated[CatalogService, Depends(built("catalog_service"))]
ContentDep = Annotated[ContentService, Depends(built("content"))]
CompatFilesDep = Annotated[CompatFiles, Depends(built("compat_files"))]
CompatUploadsDep = Annotated[CompatUploads, Depends(built("compat_uploads"))]
CompatBatchesDep = Annotated[CompatBatches, Depends(built("compat_batches"))]
DeliveryTargetsDep = Annotated[DeliveryTargets, Depends(built("delivery_targets"))]
BucketDeliveryDep = Annotated[BucketDelivery, Depends(built("bucket_delivery"))]
WorkOrdersDep = Annotated[WorkOrders, Depends(built("work_orders"))]
FeedbackDep = Annotated[FeedbackService, Depends(built("feedback"))]
PresetsDep = Annotated[Presets, Depends(built("presets"))]


SchedulesDep = Annotated[Schedules, Depends(built("schedules"))]


# -- accounts: the seams tests override through `app.dependency_overrides` each have a small
# provider: an in-memory outbox for `get_mailer`, cheap argon2 parameters for
# `get_passwords`, no minimum duration for `get_forgot_floor`, a permissive URL check for
# `get_webhook_url_check`.
@lru_cache(maxsize=1)
def _production_passwords() -> Argon2Passwords:
    # One per cold start: it keeps the dummy hash that unknown-user sign-ins verify against.
    return Argon2Passwords()


def get_passwords() -> Argon2Passwords:
    return _production_passwords()


def get_mailer(wiring: WiringDep) -> Mailer:
    return wiring.mailer


def get_forgot_floor() -> ResponseFloor:
    return ResponseFloor(FORGOT_FLOOR_SECONDS)


def get_webhook_url_check(wiring: WiringDep) -> Callable[[str], object]:
    return wiring.webhook_url_check()


PasswordsDep = Annotated[Argon2Passwords, Depends(get_passwords)]
MailerDep = Annotated[Mailer, Depends(get_mailer)]


def get_email_verification(wiring: WiringDep, mailer: MailerDep) -> EmailVerification:
    return wiring.email_verification(mailer)


EmailVerificationDep = Annotated[EmailVerification, Depends(get_email_verification)]


def get_registration(
    wiring: WiringDep, passwords: PasswordsDep, verification: EmailVerificationDep
) -> Registration:
    return wiring.registration(passwords, verification)


def get_sessions(wiring: WiringDep, passwords: PasswordsDep, mailer: MailerDep) -> Sessions:
    return wiring.sessions(passwords, mailer)


def get_password_reset(
    wiring: WiringDep,
    passwords: PasswordsDep,
    mailer: MailerDep,
    floor: Annotated[ResponseFloor, Depends(get_forgot_floor)],
) -> PasswordReset:
    return wiring.password_reset(mailer, passwords, floor)


def get_account_settings(
    wiring: WiringDep, check_url: Annotated[Callable[[str], object], Depends(get_webhook_url_check)]
) -> AccountSettings:
    return wiring.account_settings(check_url)


RegistrationDep = Annotated[Registration, Depends(get_registration)]
SessionsDep = Annotated[Sessions, Depends(get_sessions)]
PasswordResetDep = Annotated[PasswordReset, Depends(get_password_reset)]
AccountSettingsDep = Annotated[AccountSettings, Depends(get_account_settings)]
