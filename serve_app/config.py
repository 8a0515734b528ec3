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


class CacheArgs(BaseModel):
    """The ETR result cache (``cache/``): L1 per replica, L2 Redis shared by all."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description="Cache ETR predictions per feature row.")
    redis_url: str | None = Field(
        None, description="L2 Redis URL; None reads ORML_REDIS_URL; unset there too: L1 only."
    )
    l1_max_bytes: int = Field(64 << 20, ge=1 << 16, description="L1 bound, bytes.")
    l1_policy: Literal["lru", "tinylfu"] = Field("tinylfu", description="L1 eviction policy.")
    ttl_s: float = Field(300.0, gt=0, le=86_400, description="Entry time to live, seconds.")
    redis_timeout_s: float = Field(0.05, gt=0, le=5, description="Per Redis call, seconds.")
    quantum: float = Field(1e-4, gt=0, description="Feature values equal within this hit.")


class ResilienceArgs(BaseModel):
    """Failover and fault detection (README "Operations" explains the trade-offs)."""

    model_config = ConfigDict(extra="forbid")
    call_timeout_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="Last resort: an attempt (queueing at the handle included) unanswered this "
        "long is cancelled and retried. Hangs are normally caught sooner by watchdog_s.",
    )
    retry_budget_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Total time one request may spend failing over before it is answered 503.",
    )
    watchdog_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="A device call running this long marks its replica unhealthy (wedged).",
    )
    probe_timeout_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="The health probe (milliseconds of work) must finish within this, seconds; "
        "keep it under health_check_timeout_s so a hung probe trips the replica first.",
    )
    health_hold_s: float = Field(
        0.5,
        ge=0,
        le=10,
        description="After its probe a health check waits this long while the device stays "
        "healthy and ends the moment it fails, so Serve sees a failed replica's crash within "
        "a control-loop tick instead of at the next health_check_period_s. 0: answer at once "
        "(Serve's plain polling). Keep it + 0.5 s under health_check_timeout_s.",
    )
    exit_on_device_fault: bool = Field(
        True,
        description="A replica whose device failed ends its process, so Serve replaces it at "
        "the next health check instead of after three failed ones.",
    )
    fault_injection: bool = Field(
        False,
        description="Drills only: enable POST /admin/faults and the replicas' inject_fault.",
    )

    def replica_kwargs(self) -> dict[str, float | bool]:
        """The model deployments' constructor arguments taken from here."""
        return {
            "watchdog_s": self.watchdog_s,
            "probe_timeout_s": self.probe_timeout_s,
            "exit_on_device_fault": self.exit_on_device_fault,
            "health_hold_s": self.health_hold_s,
            "fault_injection": self.fault_injection,
        }


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
    cache: CacheArgs = Field(default_factory=CacheArgs)
    resilience: ResilienceArgs = Field(default_factory=ResilienceArgs)
