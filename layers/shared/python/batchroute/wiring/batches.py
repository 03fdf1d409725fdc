"""The batches context: input files, quotes, batch creation and reads."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.feedback import FeedbackWiring

if TYPE_CHECKING:
    from batchroute.services.batches.create import BatchService
    from batchroute.services.batches.files import FileCheckResender, FileLimits, FileService
    from batchroute.services.batches.launch import WorkflowLaunch
    from batchroute.services.batches.quotes import QuoteService
    from batchroute.services.batches.reads import BatchReads


class BatchesWiring(FeedbackWiring):
    @cached_property
    def file_limits(self) -> FileLimits:
        from batchroute.services.batches.files import FileLimits

        settings = self.settings
        return FileLimits(
            max_direct_upload_bytes=settings.max_direct_upload_bytes,
            max_file_bytes=settings.max_file_bytes,
            upload_url_seconds=settings.file_upload_url_seconds,
            multipart_threshold_bytes=settings.file_multipart_threshold_bytes,
            part_bytes=settings.file_part_bytes,
            max_line_bytes=settings.max_jsonl_line_bytes,
            download_redirect_bytes=settings.file_download_redirect_bytes,
            download_url_seconds=settings.file_download_url_seconds,
        )

    @cached_property
    def files(self) -> FileService:
        """Also what quotes and batch creation use to read an `input_file_id`."""
        from batchroute.services.batches.files import FileService, queued_checks

        return FileService(
            self.file_store,
            self.uploads,
            self.clock,
            self.file_limits,
            request_check=queued_checks(self.queue("route")),
        )

    @cached_property
    def quotes(self) -> QuoteService:
        """Reads `input_file_id`s from the native file service, a `batch` file's vendor lines
        converted (`VendorLineFiles`; `QuoteService.reading` for another source)."""
        from batchroute.adapters.quote_items import QuoteItemSink
        from batchroute.services.batches.quotes import QuoteService
        from batchroute.services.billing.funding import LimitPreview
        from batchroute.services.compat.vendor_lines import VendorLineFiles

        return QuoteService(
            catalog=self.catalog,
            live=self.lane_states,
            snapshots=self.quote_store,
            item_sink=QuoteItemSink(self.artifacts),
            files=VendorLineFiles(self.files),
            balances=self.ledger,
            guards=self.guards,
            clock=self.clock,
            policies=self.route_policies,
            presets=self.presets,
            limits=LimitPreview(self.ledger, self.controls, self.clock),
            check_url=self.webhook_url_check(),
        )

    @cached_property
    def workflow_launch(self) -> WorkflowLaunch:
        """What starts a created batch's workflow: the create request, and the sweeper again."""
        from batchroute.adapters.stepfunctions import BatchExecutions
        from batchroute.services.batches.launch import WorkflowLaunch

        return WorkflowLaunch(self.batch_records, BatchExecutions(self.settings.state_machine_arn))

    @cached_property
    def batches(self) -> BatchService:
        from batchroute.services.batches.create import BatchService

        return BatchService(
            records=self.batch_records,
            funds=self.funds,
            quotes=self.quotes,
            artifacts=self.artifacts,
            launch=self.workflow_launch,
            sealer=self.sealer,
            check_url=self.webhook_url_check(),
            clock=self.clock,
            work_orders=self.work_orders,
            retention_grace=self.settings.retention_grace,
        )

    @cached_property
    def batch_reads(self) -> BatchReads:
        from batchroute.services.batches.reads import BatchReads

        return BatchReads(
            self.batch_records,
            self.artifacts,
            retention=self.retention,
            grace=self.settings.retention_grace,
            feedback=self.feedback,
        )

    @cached_property
    def file_check_resender(self) -> FileCheckResender:
        from batchroute.services.batches.files import FileCheckResender

        return FileCheckResender(self.files, self.file_store)
