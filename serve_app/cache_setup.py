"""Building the ingress's result cache from its args and the environment (ORML_REDIS_URL)."""

from __future__ import annotations

import logging

from cache import CacheStats, CircuitBreaker, L1Cache, MultiLevelCache, Quantisation, RedisL2
from cache.seal import Seal
from config import get_settings, read_secret
from serve_app.config import CacheArgs
from serve_app.pipeline.ports import ReplicaCache

log = logging.getLogger("orml.cache")


def build_cache(cfg: CacheArgs) -> ReplicaCache | None:
    """None when disabled; L1-only (and says so) when no Redis URL is configured."""
    if not cfg.enabled:
        return None
    url = cfg.redis_url or get_settings().redis_url
    stats = CacheStats()
    l2 = None
    seal = None
    if url:
        l2 = RedisL2(
            url,
            password=read_secret(cfg.redis_password_env, cfg.redis_password_file),
            timeout_s=cfg.redis_timeout_s,
            max_connections=cfg.redis_max_connections,
            breaker=CircuitBreaker(),
            stats=stats,
        )
        secret = read_secret(cfg.seal_secret_env, cfg.seal_secret_file)
        seal = None if secret is None else Seal(secret.encode())
        log.warning(
            "ETR cache: L1 (%d MiB, %s) + Redis L2 (values %s)",
            cfg.l1_max_bytes >> 20,
            cfg.l1_policy,
            "sealed (HMAC)" if seal else f"checked, not sealed: set ${cfg.seal_secret_env}",
        )
    else:
        log.warning(
            "ETR cache: L1 only (%d MiB, %s); ORML_REDIS_URL is not set",
            cfg.l1_max_bytes >> 20,
            cfg.l1_policy,
        )
    cache = MultiLevelCache(
        L1Cache(cfg.l1_max_bytes, cfg.ttl_s, cfg.l1_policy), l2, stats=stats, seal=seal
    )
    return ReplicaCache(cache, cfg.ttl_s, Quantisation(default=cfg.quantum), url, cfg.solve_ttl_s)
