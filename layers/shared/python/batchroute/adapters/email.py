"""Outgoing email: Amazon SES, plus a local outbox of `.eml` files in local mode.

Messages carry single-use tokens, so bodies are never logged; in local mode each message is
also written as an RFC 5322 file a developer can open to follow its link.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchroute.adapters.aws import shared_client
from batchroute.config import Settings
from batchroute.errors import Unavailable
from batchroute.observability import logger


@dataclass(frozen=True)
class OutgoingEmail:
    to: str
    subject: str
    text: str


def rfc5322(sender: str, email: OutgoingEmail, *, at: datetime | None = None) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = email.to
    message["Subject"] = email.subject
    message["Date"] = format_datetime(at or datetime.now(UTC))
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message.set_content(email.text)
    return message


@dataclass(eq=False, repr=False, kw_only=True)
class SesMailer:
    sender: str
    outbox_dir: Path | None = None
    ses: Any = shared_client("ses")

    @classmethod
    def from_settings(cls, settings: Settings) -> SesMailer:
        outbox = Path(settings.local_outbox_dir) if settings.environment == "local" else None
        return cls(sender=settings.email_sender, outbox_dir=outbox)

    def send(self, to: str, subject: str, text: str) -> None:
        email = OutgoingEmail(to=to, subject=subject, text=text)
        if self.outbox_dir is not None:
            # Written first: the local copy exists even if the embedded SES refuses the message.
            self._write_local_copy(email)
        try:
            response = self.ses.send_email(
                Source=self.sender,
                Destination={"ToAddresses": [to]},
                Message={
                    "Subject": {"Data": subject, "Charset": "UTF-8"},
                    "Body": {"Text": {"Data": text, "Charset": "UTF-8"}},
                },
            )
        except (ClientError, BotoCoreError) as exc:
            # The error names no body; the caller decides whether the failure is fatal.
            raise Unavailable(
                "The email could not be sent; try again later.", code="email_unavailable"
            ) from exc
        logger.info("email sent", extra={"message_id": response.get("MessageId"), "subject": subject})

    def _write_local_copy(self, email: OutgoingEmail) -> Path:
        assert self.outbox_dir is not None
        self.outbox_dir.mkdir(parents=True, exist_ok=True)
        now = datetime.now(UTC)
        path = self.outbox_dir / f"{now:%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:8]}.eml"
        path.write_bytes(rfc5322(self.sender, email, at=now).as_bytes())
        logger.info("email written to the local outbox", extra={"path": str(path), "subject": email.subject})
        return path


class MemoryOutbox:
    """A mailer that keeps messages in memory (tests, and tools that show links themselves)."""

    def __init__(self) -> None:
        self.messages: list[OutgoingEmail] = []

    def send(self, to: str, subject: str, text: str) -> None:
        self.messages.append(OutgoingEmail(to=to, subject=subject, text=text))

    def to(self, address: str) -> list[OutgoingEmail]:
        return [m for m in self.messages if m.to == address]
