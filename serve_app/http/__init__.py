"""The HTTP edge: one route table (``routes``), the endpoints it names (``endpoints``), the
ASGI app built from both (``app``) with its middleware one file each (``body_limit``,
``request_metrics``, ``direct_routes``), the request and answer codec (``codec``), the
replica's own listener (``lean_listener``), the OpenAPI bodies (``openapi``) and the typed
client (``client``)."""
