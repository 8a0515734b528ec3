"""The application's arguments (``args:`` in deploy.yaml), validated by Serve's app builder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from actors.cpu_priority import CpuPolicy
from actors.device import GuardSettings
from actors.emulation import Emulation
from config import BackendChoice, environment
from serve_app.pipeline.limits import Limits


class CacheArgs(BaseModel):
    """The ETR result cache (``cache/``): L1 per replica, L2 Redis shared by all."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)  # no URL echoed
    enabled: bool = Field(True, description="Cache ETR predictions per feature row.")
    responses: bool = Field(
        True,
        description="Also cache whole ETR answers by request bytes (HTTP and gRPC): a repeated "
        "request is answered once parsed, with no features built and no model call.",
    )
    redis_url: str | None = Field(
        None,
        description="L2 Redis URL without a password; None reads ORML_REDIS_URL (which may "
        "hold one); unset there too: L1 only.",
    )
    redis_password_env: str | None = Field(
        environment.REDIS_PASSWORD.name,
        description="Environment variable holding the Redis password.",
    )
    redis_password_file: Path | None = Field(
        None, description="Or a secret file holding it (read when the variable is unset)."
    )
    redis_max_connections: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Redis calls at once per replica; more wait (within redis_timeout_s) and "
        "then miss: back-pressure, never counted as a Redis failure.",
    )
    seal_secret_env: str | None = Field(
        environment.CACHE_SECRET.name,
        description="Environment variable with a shared secret (>= 16 bytes): when set, every "
        "L2 value carries an HMAC of its key and bytes, and a value without a valid one is a "
        "miss (a Redis others can write to cannot feed the replicas).",
    )
    seal_secret_file: Path | None = Field(None, description="Or a secret file holding it.")
    l1_max_bytes: int = Field(64 << 20, ge=1 << 16, description="L1 bound, bytes.")
    l1_policy: Literal["lru", "tinylfu"] = Field("tinylfu", description="L1 eviction policy.")
    ttl_s: float = Field(
        300.0, gt=0, le=86_400, description="ETR rows' and answers' time to live, seconds."
    )
    solve_ttl_s: float = Field(
        3600.0, gt=0, le=7 * 86_400, description="Static solutions' time to live, seconds."
    )
    redis_timeout_s: float = Field(0.05, gt=0, le=5, description="Per Redis call, seconds.")
    quantum: float = Field(1e-4, gt=0, description="Feature values equal within this hit.")

    @field_validator("redis_url")
    @classmethod
    def _no_password_in_config(cls, url: str | None) -> str | None:
        if url is not None and urlsplit(url).password:
            raise ValueError(
                "holds a password: a Serve config is shown by Serve's REST API and dashboard; "
                "put the password in $ORML_REDIS_PASSWORD or redis_password_file"
            )
        return url


class HedgeArgs(BaseModel):
    """When a deployment call gets a second copy (``serve_app.hedging``)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(
        False,
        description="Off by default: on the node-loss drill of a starved 2-core host the copies "
        "did not save the calls stuck on the lost node (README, Operations: node loss).",
    )
    quantile: float = Field(
        0.95,
        gt=0.5,
        lt=1,
        description="A copy goes once an attempt is older than this "
        "quantile of the recent answered calls of the same kind.",
    )
    min_delay_s: float = Field(
        1.0,
        gt=0,
        le=600,
        description="Never sooner than this, seconds (also the delay "
        "before enough calls are known).",
    )
    budget: float = Field(
        0.05, ge=0, le=1, description="Copies per call, at most, over time (a token bucket)."
    )
    burst: float = Field(8.0, ge=1, le=1000, description="Copies that may go at once.")
    window: int = Field(256, ge=16, le=100_000, description="Answered calls remembered per kind.")


class ResilienceArgs(BaseModel):
    """Failover and fault detection (README "Operations" explains the trade-offs): the ingress's
    retry bounds, and how the model replicas watch their devices."""

    model_config = ConfigDict(extra="forbid")
    call_timeout_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="Last resort: an attempt (queueing at the handle included) unanswered this "
        "long is cancelled and retried. Hangs are normally caught sooner by "
        "replicas.watchdog_s.",
    )
    retry_budget_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Total time one request may spend failing over before it is answered 503.",
    )
    max_replica_faults: int = Field(
        2,
        ge=1,
        le=100,
        description="A request whose calls saw this many replicas fail while computing it "
        "(process died, device failed) is answered 422 naming its request id instead of being "
        "sent on to the next replica: a poison pill kills at most this many.",
    )
    hedge: HedgeArgs = Field(
        default_factory=HedgeArgs,
        description="A second copy of a call that is slower than nearly all recent ones, to "
        "another replica (a node lost mid-call is then not waited out).",
    )
    replicas: GuardSettings = Field(
        default_factory=GuardSettings,
        description="Every model replica's guard (watchdog, probe, health hold, exit on a "
        "device fault, drills, Busy window): the deployments' ``guard`` argument.",
    )


class LaneArgs(BaseModel):
    """One admission lane: requests running at once, and a short queue in front of them."""

    model_config = ConfigDict(extra="forbid")
    max_in_flight: int = Field(ge=1, le=100_000, description="Requests running at once.")
    max_queued: int = Field(
        ge=0, le=100_000, description="Requests waiting for a slot; more are shed (503)."
    )


class AdmissionArgs(BaseModel):
    """Admission at the ingress (``serve_app.pipeline.admission``): what is shed, and when."""

    model_config = ConfigDict(extra="forbid")
    default_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="A request's deadline when its caller gives none (x-timeout-ms header, "
        "gRPC deadline); work still queued at its deadline is dropped, not computed.",
    )
    offline_max_share: float = Field(
        0.5, ge=0, le=1, description="Share of a lane's slots offline requests may hold."
    )
    priority_key: SecretStr | None = Field(
        None,
        description="A caller sending it as x-priority-key may ask for online on an offline "
        "endpoint (x-priority: online); without it a request never rises above its endpoint's "
        "class. None: nobody can.",
    )
    dispatch: LaneArgs = Field(
        default_factory=lambda: LaneArgs(max_in_flight=4, max_queued=8),
        description="POST /v1/dispatch (size it near solver replicas x 2).",
    )
    etr: LaneArgs = Field(
        default_factory=lambda: LaneArgs(max_in_flight=64, max_queued=256),
        description="POST /v1/etr.",
    )
    solve: LaneArgs = Field(
        default_factory=lambda: LaneArgs(max_in_flight=2, max_queued=16),
        description="POST /v1/routes/solve (static solves, seconds each).",
    )


Endpoint = Literal["dispatch", "etr", "etr_bulk", "solve", "admin"]


class AuthArgs(BaseModel):
    """API keys (``serve_app.pipeline.api_keys``): which endpoints need a bearer token, and
    where the tokens are. Off by default (local use); on in production (README "Deploy")."""

    model_config = ConfigDict(extra="forbid")
    protected: list[Endpoint] = Field(
        default_factory=list,
        description="Endpoints that answer 401/403 without a valid token; empty: auth off. "
        "Health and readiness are never protected.",
    )
    tokens_env: str | None = Field(
        environment.API_TOKENS.name,
        description="Environment variable with token entries ('TOKEN' or 'TOKEN endpoint,...', "
        "';'-separated), read by the ingress replicas.",
    )
    tokens_file: Path | None = Field(
        None, description="A secret file with one token entry per line (# comments)."
    )


class OfflineSolveArgs(BaseModel):
    """Where a solver replica runs static solves (``actors.offline_process``)."""

    model_config = ConfigDict(extra="forbid")

    priority: CpuPolicy = Field(
        "idle",
        description="idle: child processes at SCHED_IDLE, run by the OS only when online work "
        "leaves a CPU free; nice: the same at nice 19; thread: the replica's own worker thread "
        "(steps aside between LNS steps only).",
    )
    processes: int = Field(
        1, ge=1, le=16, description="Child processes per replica: static solves at once."
    )


class DispatchAppArgs(BaseModel):
    """Arguments of ``serve_app.builder:app_builder``."""

    # No input echoed in errors: a refused value may be a secret (a Redis URL with a password).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    backend: BackendChoice | None = Field(
        None,
        description="OR kernels: CuPy when a GPU works (auto), else NumPy; None: the solver "
        "replicas' $ORML_BACKEND (auto when unset).",
    )
    etr_runtime: (
        Literal["auto", "tensorrt", "cupy", "onnxruntime", "numpy"]
        | Annotated[str, Field(pattern=r"^emulated:.+$")]
    ) = Field(
        "auto",
        description="ETR runtime: TensorRT > CuPy > ONNX Runtime by availability; "
        "emulated:<GPU type or profile.json> for experiments (etr.runtime_emulated).",
    )
    etr_placement: Literal["auto", "ingress", "deployment"] = Field(
        "auto",
        description="Where ETR rows are computed: in the ingress's own process (no hop: the "
        "model is microseconds on a CPU, a hop ~2 ms) or by the Etr deployment's replicas. "
        "auto: in the ingress when the Etr replicas run a CPU runtime, there when they have a "
        "GPU. The Etr deployment owns the model's configuration either way (versions, "
        "batching; `orml models`).",
    )
    improve_routes: bool = Field(True, description="Relocate-improve routes that got orders.")
    lean_listener: bool = Field(
        True,
        description="Each Ingress replica also serves the admission lanes' routes on a "
        "listener of its own, without Serve's per-request wrapper, where the launcher set "
        "HAProxy up for it (`orml serve`; serve_app.http.lean_listener). Off: every request "
        "through Serve's listener.",
    )
    ingress_priority_steps: int = Field(
        3,
        ge=0,
        le=10,
        description="Niceness steps the Ingress replicas run above the other replicas (Ray's "
        "workers, nice 15) where the host allows it (CAP_SYS_NICE): under overload the "
        "ingress's event loop is the stage that falls behind when the proxy and the refused "
        "connections want the cores too (actors.cpu_priority). 0: Ray's niceness.",
    )
    offline_solves: OfflineSolveArgs = Field(default_factory=lambda: OfflineSolveArgs())
    readiness_timeout_s: float = Field(
        2.0, gt=0, le=60, description="How long /readyz waits for each deployment to answer."
    )
    emulate_solver: Emulation | None = Field(
        None,
        description="Experiments only: solver replicas sleep an emulated device's call time "
        "(actors.emulation); figures measured so are emulated.",
    )
    limits: Limits = Field(default_factory=Limits)
    cache: CacheArgs = Field(default_factory=CacheArgs)
    resilience: ResilienceArgs = Field(default_factory=ResilienceArgs)
    admission: AdmissionArgs = Field(default_factory=AdmissionArgs)
    auth: AuthArgs = Field(default_factory=AuthArgs)
