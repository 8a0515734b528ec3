"""Settings from ``ORML_*`` environment variables, validated once at the edge."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

#: The OR kernels' array backend: 'auto' is CuPy when a CUDA device works, else NumPy
#: (``kernels.backend.resolve_backend``; the setting is merged by ``backend_for``).
BackendChoice = Literal["auto", "numpy", "cupy"]


class Settings(BaseSettings):
    """Environment configuration; every field is read from ``ORML_<FIELD>``.

    The served app's arguments (``serve_app.config``) leave ``backend`` and ``cache.redis_url``
    None to mean "this process's setting here": a value in deploy.yaml wins, the environment
    fills in, and each is merged in one place (``backend_for``, ``build_cache``).
    """

    model_config = SettingsConfigDict(env_prefix="ORML_", extra="forbid", frozen=True)

    backend: BackendChoice = Field(
        "auto", description="Array backend for the OR kernels (``BackendChoice``)."
    )
    gpu_min_pairs: int = Field(
        1_000_000,
        ge=0,
        description="With backend 'auto' on a working GPU, a round of fewer rider x order pairs "
        "than this runs on NumPy: a small round's GPU time is host work and launches "
        "(``kernels.backend.backend_for_round``); 0 sends every round to the GPU.",
    )
    redis_url: str | None = Field(
        None,
        description="L2 cache, e.g. redis://:password@host:6379/0 (rediss:// for TLS); unset: "
        "L1-only.",
    )
    grpc_max_message_bytes: int = Field(
        2**31 - 1,
        validation_alias=AliasChoices("RAY_SERVE_GRPC_MAX_MESSAGE_SIZE"),
        description="Ray Serve's own variable: the largest gRPC message its servers take, read "
        "once at process start (serve_app.builder sets it for the ingress).",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this process (read once)."""
    return Settings()


def backend_for(configured: str | None) -> str:
    """The backend a process runs: ``configured`` (a deploy file's value) when given, else
    ``ORML_BACKEND``."""
    return get_settings().backend if configured is None else configured
