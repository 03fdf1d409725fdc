"""Dependencies shared by the routers, as Annotated aliases: the settings, the clock, and
every service, taken from the one wiring (batchroute/wiring.py) of this app's settings and
clock, so tests that override `get_settings` or `get_clock` get services built from theirs."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from batchroute.clock import Clock, SystemClock
from batchroute.config import Settings, get_settings
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
from batchroute.services.delivery.targets import DeliveryTargets
from batchroute.services.feedback.service import FeedbackService
from batchroute.services.presets.service import Presets
from batchroute.services.routing.policy import RoutePolicyService
from batchroute.services.schedules.schedules import Schedules
from batchroute.services.work_orders.service import WorkOrders
from batchroute.wiring import Wiring, wiring_for

_system_clock = SystemClock()


def get_clock() -> Clock:
    return _system_clock


SettingsDep = Annotated[Settings, Depends(get_settings)]
ClockDep = Annotated[Clock, Depends(get_clock)]


def get_wiring(settings: SettingsDep, clock: ClockDep) -> Wiring:
    return wiring_for(settings, clock)


WiringDep = Annotated[Wiring, Depends(get_wiring)]


def _files(wiring: WiringDep) -> FileService:
    return wiring.files


def _quotes(wiring: WiringDep) -> QuoteService:
    return wiring.quotes()


def _batches(wiring: WiringDep) -> BatchService:
    return wiring.batches()


def _batch_reads(wiring: WiringDep) -> BatchReads:
    return wiring.batch_reads


def _billing_controls(wiring: WiringDep) -> BillingControlsService:
    return wiring.billing_controls


def _auto_topup(wiring: WiringDep) -> AutoTopupService:
    return wiring.auto_topup


def _credit_purchases(wiring: WiringDep) -> CreditPurchases:
    return wiring.credit_purchases


def _billing_events(wiring: WiringDep) -> BillingEventLog:
    return wiring.billing_event_log


def _retention(wiring: WiringDep) -> RetentionService:
    return wiring.retention


def _usage(wiring: WiringDep) -> UsageService:
    return wiring.usage


def _catalog(wiring: WiringDep) -> CatalogService:
    return wiring.catalog_service


def _content(wiring: WiringDep) -> ContentService:
    return wiring.content


def _compat_files(wiring: WiringDep) -> CompatFiles:
    return wiring.compat_files


def _compat_uploads(wiring: WiringDep) -> CompatUploads:
    return wiring.compat_uploads


def _compat_batches(wiring: WiringDep) -> CompatBatches:
    return wiring.compat_batches


def _delivery_targets(wiring: WiringDep) -> DeliveryTargets:
    return wiring.delivery_targets


def _bucket_delivery(wiring: WiringDep) -> BucketDelivery:
    return wiring.bucket_delivery


def _work_orders(wiring: WiringDep) -> WorkOrders:
    return wiring.work_orders


def _feedback(wiring: WiringDep) -> FeedbackService:
    return wiring.feedback


def _presets(wiring: WiringDep) -> Presets:
    return wiring.presets


FilesDep = Annotated[FileService, Depends(_files)]
QuotesDep = Annotated[QuoteService, Depends(_quotes)]
BatchesDep = Annotated[BatchService, Depends(_batches)]
ReadsDep = Annotated[BatchReads, Depends(_batch_reads)]
BillingControlsDep = Annotated[BillingControlsService, Depends(_billing_controls)]


def _route_policy(wiring: WiringDep) -> RoutePolicyService:
    return wiring.route_policy


RoutePolicyDep = Annotated[RoutePolicyService, Depends(_route_policy)]
AutoTopupDep = Annotated[AutoTopupService, Depends(_auto_topup)]
CreditPurchasesDep = Annotated[CreditPurchases, Depends(_credit_purchases)]
BillingEventsDep = Annotated[BillingEventLog, Depends(_billing_events)]
RetentionDep = Annotated[RetentionService, Depends(_retention)]
UsageDep = Annotated[UsageService, Depends(_usage)]
CatalogDep = Annotated[CatalogService, Depends(_catalog)]
ContentDep = Annotated[ContentService, Depends(_content)]
CompatFilesDep = Annotated[CompatFiles, Depends(_compat_files)]
CompatUploadsDep = Annotated[CompatUploads, Depends(_compat_uploads)]
CompatBatchesDep = Annotated[CompatBatches, Depends(_compat_batches)]
DeliveryTargetsDep = Annotated[DeliveryTargets, Depends(_delivery_targets)]
BucketDeliveryDep = Annotated[BucketDelivery, Depends(_bucket_delivery)]
WorkOrdersDep = Annotated[WorkOrders, Depends(_work_orders)]
FeedbackDep = Annotated[FeedbackService, Depends(_feedback)]
PresetsDep = Annotated[Presets, Depends(_presets)]


def _schedules(wiring: WiringDep) -> Schedules:
    return wiring.schedules


SchedulesDep = Annotated[Schedules, Depends(_schedules)]
