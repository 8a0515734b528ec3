"""The gRPC transport's message cap of the ingress replicas, set from the body limit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Serve's gRPC servers take messages up to this many bytes (read at process start; default
#: 2 GiB). The ingress's own is set to ``limits.max_body_bytes``: bigger messages are refused by
#: the transport before a byte is buffered for the app.
GRPC_CAP_ENV = "RAY_SERVE_GRPC_MAX_MESSAGE_SIZE"


def grpc_cap_options(actor_options: Mapping[str, Any] | None, max_bytes: int) -> dict[str, Any]:
    """``actor_options`` with ``GRPC_CAP_ENV`` = ``max_bytes`` in its runtime_env."""
    options = dict(actor_options or {})
    runtime_env = dict(options.get("runtime_env") or {})
    runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), GRPC_CAP_ENV: str(max_bytes)}
    options["runtime_env"] = runtime_env
    return options
