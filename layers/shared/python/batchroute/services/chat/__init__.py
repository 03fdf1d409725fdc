"""Chat completions: direct (ranked lanes, holds, failover before the first byte, streaming),
the in-process state of the hot path, and queued chat jobs (docs/chat.md)."""
