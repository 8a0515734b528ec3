"""The HTTP edge: one route table (``routes``), the one router over it (``router``), the
endpoints it names (``endpoints``), the ASGI app built from them (``app``) with its middleware
one file each (``body_limit``, ``request_metrics``), the request and answer codec (``codec``),
the replica's own listener (``lean_listener``), the OpenAPI document of the table
(``openapi``) and the typed client (``client``)."""
