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

from serve_app.grpc_api import kserve_v2_pb2 as v2
from serve_app.grpc_api import orml_pb2 as pb

SERVICE = "orml.v1.Orml"
#: Method -> (request message, response message).
METHODS: dict[str, tuple[type[Any], type[Any]]] = {
    "Dispatch": (pb.DispatchRequest, pb.DispatchResponse),
    "Etr": (pb.EtrRequest, pb.EtrResponse),
    "SolveRoutes": (pb.SolveRequest, pb.SolveResponse),
}


#: The Open Inference Protocol's service, by its name there (``kserve_v2.proto``).
INFERENCE_SERVICE = "inference.GRPCInferenceService"
INFERENCE_METHODS: dict[str, tuple[type[Any], type[Any]]] = {
    "ServerLive": (v2.ServerLiveRequest, v2.ServerLiveResponse),
    "ServerReady": (v2.ServerReadyRequest, v2.ServerReadyResponse),
    "ServerMetadata": (v2.ServerMetadataRequest, v2.ServerMetadataResponse),
    "ModelReady": (v2.ModelReadyRequest, v2.ModelReadyResponse),
    "ModelMetadata": (v2.ModelMetadataRequest, v2.ModelMetadataResponse),
    "ModelInfer": (v2.ModelInferRequest, v2.ModelInferResponse),
    "ModelConfig": (v2.ModelConfigRequest, v2.ModelConfigResponse),
    "ModelStatistics": (v2.ModelStatisticsRequest, v2.ModelStatisticsResponse),
    "RepositoryIndex": (v2.RepositoryIndexRequest, v2.RepositoryIndexResponse),
}


@dataclass(frozen=True, slots=True)
class RawRequest:
    """A request's serialized message, not parsed yet."""

    data: bytes


def add_orml_servicer(servicer: Any, server: Any) -> None:
    """``add_OrmlServicer_to_server`` with requests left as ``RawRequest``."""
    _add(servicer, server, SERVICE, METHODS)


def add_inference_servicer(servicer: Any, server: Any) -> None:
    """The Open Inference Protocol's ``GRPCInferenceService`` for the ETR model, requests
    left as ``RawRequest``."""
    _add(servicer, server, INFERENCE_SERVICE, INFERENCE_METHODS)


def _add(
    servicer: Any, server: Any, service: str, methods: dict[str, tuple[type[Any], type[Any]]]
) -> None:
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=RawRequest,
            response_serializer=response.SerializeToString,
        )
        for name, (_, response) in methods.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_registered_method_handlers(service, handlers)
