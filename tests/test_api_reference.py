"""The HTTP and gRPC reference pages are the app's own OpenAPI document and .proto, current."""

from __future__ import annotations

import json
from pathlib import Path

from ops.api_reference import grpc_page, http_page, openapi

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference"
REGENERATE = "run: python -m ops.api_reference docs/reference"


def test_the_committed_pages_are_what_the_app_generates():
    spec = openapi()
    assert json.loads((REFERENCE / "openapi.json").read_text()) == json.loads(json.dumps(spec)), (
        REGENERATE
    )
    assert (REFERENCE / "http.md").read_text() == http_page(spec), REGENERATE
    assert (REFERENCE / "grpc.md").read_text() == grpc_page(), REGENERATE


def test_every_route_and_body_is_on_the_page():
    spec = openapi()
    page = (REFERENCE / "http.md").read_text()
    assert all(f"`{path}`" in page for path in spec["paths"])
    assert "### DispatchRequest" in page and "### OrderIn" in page
