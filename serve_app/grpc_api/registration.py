"""The gRPC service as Serve's ingress registers it: requests arrive as their bytes.

grpc's generated ``add_OrmlServicer_to_server`` parses every request in the transport, before
the ingress sees it, so each request in flight holds its parsed message whatever admission
decides, and a message of empty sub-messages parses into dozens of times its bytes
(``bench/hostile.py``). Registered with ``add_orml_servicer`` (``grpc_servicer_functions`` in
deploy.yaml), a request reaches the ingress as ``RawRequest`` and is parsed there only once
admitted, under its method's byte limit (``serve_app.grpc_api.servicer``). Replies are
serialized as usual."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from serve_app.grpc_api import orml_pb2 as pb

SERVICE = "orml.v1.Orml"
#: Method -> (request message, response message).
METHODS: dict[str, tuple[type[Any], type[Any]]] = {
    "Dispatch": (pb.DispatchRequest, pb.DispatchResponse),
    "Etr": (pb.EtrRequest, pb.EtrResponse),
    "SolveRoutes": (pb.SolveRequest, pb.SolveResponse),
}


@dataclass(frozen=True, slots=True)
class RawRequest:
    """A request's serialized message, not parsed yet."""

    data: bytes


def add_orml_servicer(servicer: Any, server: Any) -> None:
    """``add_OrmlServicer_to_server`` with requests left as ``RawRequest``."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=RawRequest,
            response_serializer=response.SerializeToString,
        )
        for name, (_, response) in METHODS.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    server.add_registered_method_handlers(SERVICE, handlers)
