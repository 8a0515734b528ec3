"""Secrets from where deployments keep them: an environment variable or a mounted file.

A Serve config names where a secret is (``tokens_env``, ``redis_password_file``, ...), never
the secret itself: the config is shown by Serve's REST API and the dashboard, and is written
into a RayService in plain text.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_secret(env: str | None, file: Path | None) -> str | None:
    """The secret in the environment variable ``env`` or else in ``file`` (surrounding
    whitespace dropped); None when neither is set. ValueError naming the file when it cannot
    be read."""
    if env and os.environ.get(env):
        return os.environ[env].strip()
    if file is not None:
        try:
            return Path(file).read_text().strip() or None
        except OSError as exc:
            raise ValueError(f"{file}: cannot read ({exc.strerror or exc})") from None
    return None
