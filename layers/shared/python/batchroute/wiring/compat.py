"""The vendor-compatible surface: files, uploads and batches."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from batchroute.wiring.chat import ChatWiring

if TYPE_CHECKING:
    from batchroute.services.compat.batches import CompatBatches
    from batchroute.services.compat.files import CompatFiles
    from batchroute.services.compat.uploads import CompatUploads


class CompatWiring(ChatWiring):
    @cached_property
    def compat_files(self) -> CompatFiles:
        from batchroute.services.compat.files import CompatFiles

        return CompatFiles(
            self.files,
            outputs=self.compat_store,
            batches=self.batch_records,
            artifacts=self.artifacts,
            reclaim=self.batch_records,
            retention=self.retention,
            grace=self.settings.retention_grace,
        )

    @cached_property
    def compat_uploads(self) -> CompatUploads:
        from batchroute.services.compat.uploads import CompatUploads

        return CompatUploads(self.compat_store, self.compat_files, self.uploads, self.clock)

    @cached_property
    def compat_batches(self) -> CompatBatches:
        from batchroute.services.compat.batches import CompatBatches

        return CompatBatches(
            batches=self.batches,
            files=self.files,
            reads=self.batch_reads,
            records=self.compat_store,
            clock=self.clock,
        )
