"""Settings from ``ORML_*`` environment variables, validated once at the edge."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Environment configuration; every field is read from ``ORML_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="ORML_", extra="forbid", frozen=True)

    backend: Literal["auto", "numpy", "cupy"] = Field(
        "auto",
        description="Array backend for the kernels: 'auto' uses CuPy when a CUDA device works, "
        "else NumPy.",
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
