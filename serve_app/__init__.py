"""The application: the edge (HTTP, gRPC, the Python handle), the transport-free pipeline,
admission. Its public surface is ``__all__``: what an operator deploys (``app_builder``, the
``DispatchIngress`` deployment, ``DispatchAppArgs``), what a caller uses (``OrmlClient``,
``OrmlGrpcClient``) and the pipeline the edges share. Each is imported on first use, so that
``serve_app.pipeline`` loads without Ray, FastAPI or gRPC."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "builder": ["app_builder"],
        "app": ["DispatchIngress"],
        "config": ["DispatchAppArgs"],
        "pipeline.limits": ["Limits"],
        "pipeline.dispatch": ["Pipeline"],
        "http.client": ["OrmlClient"],
        "grpc_api.client": ["OrmlGrpcClient"],
    },
)
