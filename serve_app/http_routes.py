"""The HTTP API's routes by path, for the ASGI middleware in front of FastAPI's router: which
endpoint a request is for (its body limit, its API key), and the label its metrics carry.

Labels are route templates only (a path the app serves, or ``"unmatched"``), so a caller
cannot create a new metric series per distinct path it sends.
"""

from __future__ import annotations

from typing import Any

#: POST routes with a body, and the endpoint each is (``Limits.body_bytes``, API keys).
ENDPOINT_OF_PATH = {
    "/v1/dispatch": "dispatch",
    "/v1/etr": "etr",
    "/v1/etr/bulk": "etr_bulk",
    "/v1/routes/solve": "solve",
    "/v2/models/etr/infer": "etr",  # the Open Inference Protocol (serve_app.kserve_v2)
    "/admin/faults": "admin",
}
#: Paths without a body, served as themselves.
OTHER_PATHS = frozenset(
    {
        *("/healthz", "/readyz", "/admin/status", "/docs", "/redoc", "/openapi.json"),
        *("/v2/health/live", "/v2/health/ready", "/v2/models/etr", "/v2/models/etr/ready"),
    }
)
UNMATCHED = "unmatched"


def app_path(scope: dict[str, Any]) -> str:
    """The request's path below the application's route prefix (Serve's ``root_path``)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def route_label(scope: dict[str, Any]) -> str:
    """The metric label of a request: its route's path, or ``UNMATCHED``."""
    path = app_path(scope)
    if path in ENDPOINT_OF_PATH or path in OTHER_PATHS or path.startswith("/docs/"):
        return path if not path.startswith("/docs/") else "/docs/*"
    return UNMATCHED


#: The admission lane of each POST route (``Pipeline``: both ETR routes share the etr lane).
LANE_OF_PATH = {
    "/v1/dispatch": "dispatch",
    "/v1/etr": "etr",
    "/v1/etr/bulk": "etr",
    "/v1/routes/solve": "solve",
}


def lane_capacities(admission: Any) -> dict[str, int]:
    """Per POST route, the requests its lane holds at once in one Ingress replica (running +
    queued): what a proxy in front may let through to it (``ops.haproxy_config``).
    admission : ``serve_app.config.AdmissionArgs``."""
    out = {}
    for path, lane in LANE_OF_PATH.items():
        args = getattr(admission, lane)
        out[path] = args.max_in_flight + args.max_queued
    return out
