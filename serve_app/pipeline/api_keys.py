"""API keys: optional bearer-token authentication per endpoint (Triton's restricted APIs as the
model).

Tokens come from an environment variable and/or a secret file, one entry per line (or ``;``
separated in the variable): ``TOKEN`` may call every protected endpoint, ``TOKEN endpoint,...``
only those listed. A token must be at least ``MIN_TOKEN_CHARS`` characters. Only the endpoints
named in ``protected`` ask for a token; health and readiness never do. Tokens are kept as
SHA-256 digests and a presented token is compared with every one of them with
``hmac.compare_digest`` (no early exit), so the answer's timing says nothing about how much of
a token was right or which entry it matched.

No Ray, FastAPI or gRPC here: both edges pass the ``Authorization`` value they received.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from config.secrets import read_env, read_file
from serve_app.pipeline.errors import Forbidden, Unauthenticated

log = logging.getLogger("orml.serve")

ENDPOINTS = ("dispatch", "etr", "etr_bulk", "solve", "admin")
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class _Key:
    digest: bytes
    endpoints: frozenset[str]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def parse_tokens(text: str, source: str) -> list[_Key]:
    """Entries of ``text`` (lines or ``;``-separated); raises ValueError naming ``source`` and
    the entry's number (never the token)."""
    keys = []
    entries = [e.strip() for line in text.splitlines() for e in line.split(";")]
    for k, entry in enumerate((e for e in entries if e and not e.startswith("#")), start=1):
        token, _, scope = entry.partition(" ")
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"{source}: entry {k}: a token needs >= {MIN_TOKEN_CHARS} characters")
        names = frozenset(n.strip() for n in scope.split(",") if n.strip()) or frozenset(ENDPOINTS)
        unknown = names - set(ENDPOINTS)
        if unknown:
            raise ValueError(f"{source}: entry {k}: unknown endpoints {sorted(unknown)}")
        keys.append(_Key(_digest(token), names))
    return keys


class ApiKeys:
    """protected : endpoints that need a token (``ENDPOINTS``); keys : from ``parse_tokens``."""

    def __init__(self, protected: Iterable[str], keys: list[_Key]) -> None:
        self.protected = frozenset(protected)
        unknown = self.protected - set(ENDPOINTS)
        if unknown:
            raise ValueError(f"unknown endpoints to protect: {sorted(unknown)}")
        if self.protected and not keys:
            raise ValueError("API keys are on but no token is configured")
        self._keys = keys

    @classmethod
    def load(cls, protected: Iterable[str], env_var: str | None, file: Path | None) -> ApiKeys:
        """Tokens from ``$env_var`` and ``file`` (either may be unset). Raises ValueError.

        Tokens configured while nothing is protected are a deployment that meant to be
        closed and is open: said as a warning at start."""
        keys = []
        if (tokens := read_env(env_var)) is not None:
            keys += parse_tokens(tokens, f"${env_var}")
        if file is not None:
            keys += parse_tokens(read_file(file), str(file))
        protected = list(protected)
        if keys and not protected:
            log.warning(
                "%d API tokens are configured (%s) but auth.protected is empty: every endpoint "
                "answers without one. Name the endpoints to protect (deploy/production.yaml "
                "protects all but health).",
                len(keys),
                " and ".join(x for x in (env_var and f"${env_var}", file and str(file)) if x),
            )
        return cls(protected, keys)

    def check(self, endpoint: str, authorization: str | None) -> None:
        """Pass, or raise Unauthenticated (no or unknown token) / Forbidden (not allowed)."""
        if endpoint not in self.protected:
            return
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated(endpoint, "a bearer token is required")
        digest = _digest(token.strip())
        match = None
        for key in self._keys:  # every key compared: no timing hint of which one matched
            if hmac.compare_digest(key.digest, digest):
                match = key
        if match is None:
            raise Unauthenticated(endpoint, "the token is not valid")
        if endpoint not in match.endpoints:
            raise Forbidden(endpoint)


OPEN = ApiKeys((), [])  # nothing protected: local use
