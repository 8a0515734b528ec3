"""OpenAPI request bodies for routes that read their own body.

The routes parse the body themselves (after admission, as JSON or msgpack), so FastAPI cannot
see their request model; this puts each model's schema back into ``/openapi.json`` under both
media types, so the docs and schema-driven clients (and fuzzers) see the real contract.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

REF = "#/components/schemas/{model}"


def document_request_bodies(api: FastAPI, bodies: dict[str, type[BaseModel]]) -> None:
    """Make ``api.openapi()`` describe ``bodies`` (path -> model) as the POST request bodies."""

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is not None:
            return api.openapi_schema
        spec = get_openapi(
            title=api.title, version=api.version, description=api.description, routes=api.routes
        )
        schemas = spec.setdefault("components", {}).setdefault("schemas", {})
        for path, model in bodies.items():
            schema = model.model_json_schema(ref_template=REF)
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
            ref = {"schema": {"$ref": REF.format(model=model.__name__)}}
            spec["paths"][path]["post"]["requestBody"] = {
                "required": True,
                "content": {"application/json": ref, "application/x-msgpack": ref},
            }
        api.openapi_schema = spec
        return spec

    api.openapi = openapi  # type: ignore[method-assign]
