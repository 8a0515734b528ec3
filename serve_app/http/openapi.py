"""The OpenAPI document of the route table.

Built from ``serve_app.http.routes.ROUTES`` and the endpoints' annotations (FastAPI's
generator over route objects that are never mounted: the router is
``serve_app.http.router``). The routes parse their bodies themselves (after admission, as
JSON or msgpack), so the generator cannot see their request models; each model's schema is
put back under both media types, so the docs and schema-driven clients (and fuzzers) see the
real contract.
"""

from __future__ import annotations

from typing import Any

from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from serve_app import schemas
from serve_app.http.routes import ROUTES

REF = "#/components/schemas/{model}"


def route_document(title: str, version: str, description: str, endpoints: Any) -> dict[str, Any]:
    """The OpenAPI document of every public route of the table, answered by ``endpoints``
    (``serve_app.http.endpoints.HttpEndpoints``; only its methods' annotations are read)."""
    routes = [
        APIRoute(
            r.path,
            getattr(endpoints, r.handler),
            methods=[r.method],
            summary=r.summary,
            include_in_schema=r.public,
            # Without a named model the answer is documented from the method's annotation.
            **({} if r.response is None else {"response_model": getattr(schemas, r.response)}),
        )
        for r in ROUTES
    ]
    spec = get_openapi(title=title, version=version, description=description, routes=routes)
    components = spec.setdefault("components", {}).setdefault("schemas", {})
    for r in ROUTES:
        if r.request is None:
            continue
        model = getattr(schemas, r.request)
        schema = model.model_json_schema(ref_template=REF)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        ref = {"schema": {"$ref": REF.format(model=model.__name__)}}
        spec["paths"][r.path]["post"]["requestBody"] = {
            "required": True,
            "content": {"application/json": ref, "application/x-msgpack": ref},
        }
    return spec
