"""Secrets from where deployments keep them: an environment variable or a mounted file.

A Serve config names where a secret is (``tokens_env``, ``redis_password_file``, ...), never
the secret itself: the config is shown by Serve's REST API and the dashboard, and is written
into a RayService in plain text.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_env(name: str | None) -> str | None:
    """The environment variable ``name``, surrounding whitespace dropped; None when it is
    unset or empty (or ``name`` is None). Every read of the environment goes through here or
    ``config.settings``."""
    value = os.environ.get(name, "").strip() if name else ""
    return value or None


def read_file(file: Path) -> str:
    """A secret file's text; ValueError naming the file when it cannot be read."""
    try:
        return Path(file).read_text()
    except OSError as exc:
        raise ValueError(f"{file}: cannot read ({exc.strerror or exc})") from None


def read_secret(env: str | None, file: Path | None) -> str | None:
    """The secret in the environment variable ``env`` or else in ``file`` (surrounding
    whitespace dropped); None when neither is set. ValueError naming the file when it cannot
    be read."""
    if (value := read_env(env)) is not None:
        return value
    if file is not None:
        return read_file(file).strip() or None
    return None
