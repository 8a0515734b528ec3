"""The HTTP API's one route table (``ROUTES``), and what the edge reads from it: which route a
path is and its parameters (the router, ``serve_app.http.router``), which endpoint a request is
for (its body limit, its API key), its admission lane, and the label its metrics carry.

The router answers every route of the table; the middlewares, HAProxy's lanes
(``ops.haproxy_config``), the OpenAPI document and the docs read the same table.

Labels are route templates only (a path the app serves, or ``"unmatched"``), so a caller
cannot create a new metric series per distinct path it sends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HttpRoute:
    """One route (one per path). handler : the name of the ``HttpEndpoints`` method that answers
    it; endpoint : the endpoint whose body limit and API key apply to its body (None: no body);
    lane : the admission lane the pipeline takes it through (HAProxy sheds it in front when
    set); request, response : the names of its body's and its answer's models in
    ``serve_app.schemas`` (the endpoints read their bodies themselves: the request model
    documents them); public : in the OpenAPI document."""

    method: str
    path: str
    handler: str
    summary: str
    endpoint: str | None = None
    lane: str | None = None
    request: str | None = None
    response: str | None = None
    public: bool = True


ROUTES: tuple[HttpRoute, ...] = (
    HttpRoute(
        "POST",
        "/v1/dispatch",
        "dispatch",
        "Plan a dispatch round",
        endpoint="dispatch",
        lane="dispatch",
        request="DispatchRequest",
        response="DispatchResponse",
    ),
    HttpRoute(
        "POST",
        "/v1/etr",
        "etr_minutes",
        "Predict delivery minutes",
        endpoint="etr",
        lane="etr",
        request="EtrRequest",
        response="EtrResponse",
    ),
    HttpRoute(
        "POST",
        "/v1/etr/bulk",
        "etr_bulk",
        "Predict delivery minutes for many orders (offline: re-scoring, backfills)",
        endpoint="etr_bulk",
        lane="etr",
        request="EtrRequest",
        response="EtrResponse",
    ),
    HttpRoute(
        "POST",
        "/v1/routes/solve",
        "routes_solve",
        "Solve a static PDPTW instance (offline traffic; cached per instance)",
        endpoint="solve",
        lane="solve",
        request="SolveRequest",
        response="SolveResponse",
    ),
    HttpRoute("GET", "/healthz", "healthz", "The ingress process is alive"),
    HttpRoute("GET", "/readyz", "readyz", "Models loaded, warm and healthy (503 until then)"),
    # The Open Inference Protocol (KServe v2) for the ETR model (serve_app.kserve_v2), with
    # Triton's model configuration, repository index and statistics extensions. Paths naming
    # a model also take a version (``.../versions/{version}/...``); ``/v2/models/stats`` comes
    # before ``/v2/models/{model}``, which would take it for a model's name.
    HttpRoute("GET", "/v2", "v2_server_metadata", "KServe v2: server name, version, extensions"),
    HttpRoute("GET", "/v2/health/live", "v2_live", "KServe v2: the server is alive"),
    HttpRoute("GET", "/v2/health/ready", "v2_ready", "KServe v2: the server is ready (as /readyz)"),
    HttpRoute("GET", "/v2/models/stats", "v2_statistics", "Triton: every model's statistics"),
    HttpRoute(
        "POST", "/v2/repository/index", "v2_repository_index", "Triton: the models and versions"
    ),
    *(
        route
        for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version}")
        for route in (
            HttpRoute("GET", base, "v2_model_metadata", "KServe v2: a model's metadata"),
            HttpRoute("GET", f"{base}/ready", "v2_model_ready", "KServe v2: a model is ready"),
            HttpRoute("GET", f"{base}/config", "v2_model_config", "Triton: a model's config"),
            HttpRoute("GET", f"{base}/stats", "v2_statistics", "Triton: a model's statistics"),
            HttpRoute(
                "POST",
                f"{base}/infer",
                "v2_infer",
                "KServe v2: ETR minutes for a features tensor",
                endpoint="etr",
            ),
        )
    ),
    HttpRoute("GET", "/admin/status", "admin_status", "Operators: state", public=False),
    HttpRoute(
        "POST", "/admin/faults", "inject_fault", "Drills: a fault", endpoint="admin", public=False
    ),
)

#: The admission lane of each POST route (``Pipeline``: both ETR routes share the etr lane).
LANE_OF_PATH = {r.path: r.lane for r in ROUTES if r.lane is not None}
#: Paths served besides the table's: FastAPI's documentation.
DOC_PATHS = frozenset({"/docs", "/redoc", "/openapi.json"})
UNMATCHED = "unmatched"


def _pattern(template: str) -> re.Pattern[str]:
    """``/v2/models/{model}`` -> a pattern whose named groups are the path's parameters (a
    parameter is one path segment)."""
    return re.compile(
        "^" + re.sub(r"\\\{([a-z_]+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
    )


def _unique_paths(routes: tuple[HttpRoute, ...]) -> dict[str, HttpRoute]:
    # A path is one route: its method decides 405 (``serve_app.http.router``).
    by_path: dict[str, HttpRoute] = {}
    for route in routes:
        if route.path in by_path:
            raise ValueError(f"two routes for {route.path}: one route per path")
        by_path[route.path] = route
    return by_path


_EXACT = {path: r for path, r in _unique_paths(ROUTES).items() if "{" not in path}
#: Routes whose path has parameters, in the table's order (its order of matching: exact
#: paths first, so ``/v2/models/stats`` is not a model named "stats").
_TEMPLATES = [(_pattern(r.path), r) for r in ROUTES if "{" in r.path]


def resolve_path(path: str) -> tuple[HttpRoute, dict[str, str]] | None:
    """The route of a path below the application's prefix and its parameters by name, or
    None (any method: the caller decides what a method the route does not take is)."""
    route = _EXACT.get(path)
    if route is not None:
        return route, {}
    for pattern, route in _TEMPLATES:
        found = pattern.match(path)
        if found is not None:
            return route, found.groupdict()
    return None


def match_route(path: str) -> HttpRoute | None:
    """The route of a path below the application's prefix, or None (the body limit and the
    labels are per path)."""
    found = resolve_path(path)
    return None if found is None else found[0]


def body_endpoint(path: str) -> str:
    """The endpoint whose body limit applies to a request of ``path`` ("other": none of the
    table's)."""
    route = match_route(path)
    return route.endpoint if route is not None and route.endpoint is not None else "other"


def app_path(scope: dict[str, Any]) -> str:
    """The request's path below the application's route prefix (Serve's ``root_path``)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path


def route_label(scope: dict[str, Any]) -> str:
    """The metric label of a request: its route's path (a template where it has parameters),
    or ``UNMATCHED``."""
    path = app_path(scope)
    if path in DOC_PATHS:
        return path
    if path.startswith("/docs/"):
        return "/docs/*"
    route = match_route(path)
    return route.path if route is not None else UNMATCHED


def lane_capacities(admission: Any) -> dict[str, int]:
    """Per POST route, the requests its lane holds at once in one Ingress replica (running +
    queued): what a proxy in front may let through to it (``ops.haproxy_config``).
    admission : ``serve_app.config.AdmissionArgs``."""
    out = {}
    for path, lane in LANE_OF_PATH.items():
        args = getattr(admission, lane)
        out[path] = args.max_in_flight + args.max_queued
    return out
