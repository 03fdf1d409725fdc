"""Secrets the service must use later (webhook signing secrets) are sealed with KMS.

The ciphertext (base64) is stored; the plaintext exists only in memory. An encryption
context binds each ciphertext to its owner and purpose, so a ciphertext copied onto
another org's record does not decrypt.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from batchroute.adapters.aws import shared_client
from batchroute.errors import Unavailable


@dataclass(eq=False, repr=False)
class KmsSealer:
    key_id: str | None
    kms: Any = shared_client("kms")

    def seal(self, plaintext: str, *, context: dict[str, str]) -> str:
        if not self.key_id:
            raise Unavailable(
                "Secrets cannot be stored: no encryption key is configured.", code="encryption_unavailable"
            )
        response = self.kms.encrypt(
            KeyId=self.key_id, Plaintext=plaintext.encode("utf-8"), EncryptionContext=context
        )
        return base64.b64encode(response["CiphertextBlob"]).decode("ascii")

    def unseal(self, ciphertext: str, *, context: dict[str, str]) -> str:
        kwargs: dict[str, Any] = {
            "CiphertextBlob": base64.b64decode(ciphertext),
            "EncryptionContext": context,
        }
        if self.key_id:
            kwargs["KeyId"] = self.key_id  # only our key may have sealed it
        response = self.kms.decrypt(**kwargs)
        return bytes(response["Plaintext"]).decode("utf-8")
