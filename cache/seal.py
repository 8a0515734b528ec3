"""Sealing cache values for a shared Redis: an HMAC-SHA256 under a secret, bound to the key.

Anyone who can write to Redis can write any bytes under any key. With a seal a value read
from L2 is served only if it carries the HMAC of (key, value) under the replicas' shared
secret: a forged value, or a genuine one copied under another key, is a miss. Without one,
values are still checked for type, shape and range (``MultiLevelCache``), but a well-formed
forgery would pass.
"""

from __future__ import annotations

import hashlib
import hmac

#: Bytes of secret at least (128 bits).
MIN_SECRET_BYTES = 16


class Seal:
    """secret : shared by every replica (from an environment variable or a secret file)."""

    TAG_BYTES = 32

    def __init__(self, secret: bytes) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"a cache seal needs a secret of >= {MIN_SECRET_BYTES} bytes")
        self._secret = bytes(secret)

    def _tag(self, key: str, blob: bytes) -> bytes:
        return hmac.new(self._secret, key.encode() + b"\0" + blob, hashlib.sha256).digest()

    def close(self, key: str, blob: bytes) -> bytes:
        """``blob`` with its tag in front, for ``key``."""
        return self._tag(key, blob) + blob

    def open(self, key: str, raw: bytes) -> bytes | None:
        """The blob ``close`` sealed for ``key``, or None when the tag does not match."""
        raw = bytes(raw)
        tag, blob = raw[: self.TAG_BYTES], raw[self.TAG_BYTES :]
        return blob if hmac.compare_digest(tag, self._tag(key, blob)) else None
