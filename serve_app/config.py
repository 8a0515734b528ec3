"""The application's arguments (``args:`` in deploy.yaml), validated by Serve's app builder."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Request size limits; a request over any of them is answered 413 naming the limit."""

    model_config = ConfigDict(extra="forbid")
    max_body_bytes: int = Field(16 << 20, ge=1024, description="Request body size, bytes.")
    max_riders: int = Field(5000, ge=1, description="Riders per dispatch round.")
    max_orders: int = Field(2000, ge=1, description="New orders per dispatch round or ETR call.")
    max_route_stops: int = Field(32, ge=1, description="Stops on one rider's committed route.")


class DispatchAppArgs(BaseModel):
    """Arguments of ``serve_app.builder:app_builder``."""

    model_config = ConfigDict(extra="forbid")
    backend: Literal["auto", "numpy", "cupy"] = Field(
        "auto", description="OR kernels: CuPy when a GPU works, else NumPy."
    )
    etr_runtime: Literal["auto", "tensorrt", "cupy", "onnxruntime", "numpy"] = Field(
        "auto", description="ETR runtime: TensorRT > CuPy > ONNX Runtime by availability."
    )
    etr_model_version: str | None = Field(None, description="models/etr/<version>; None = latest.")
    improve_routes: bool = Field(True, description="Relocate-improve routes that got orders.")
    readiness_timeout_s: float = Field(
        2.0, gt=0, le=60, description="How long /readyz waits for each deployment to answer."
    )
    limits: Limits = Field(default_factory=Limits)
