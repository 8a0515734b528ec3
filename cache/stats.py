"""Cache counters: hits and misses per level and namespace, latency per level, Redis errors,
decode errors, values refused, pool waits, breaker state, L1 bytes. Plain Python so the cache
works outside Ray; a replica exports a snapshot as metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class CacheStats:
    hits: Counter[tuple[str, str]] = field(default_factory=Counter)  # (level, namespace)
    misses: Counter[str] = field(default_factory=Counter)  # namespace
    computes: Counter[str] = field(default_factory=Counter)
    redis_errors: int = 0
    decode_errors: int = 0
    # Values read from Redis and not served (bad seal, not decodable, failed their check).
    rejected: Counter[str] = field(default_factory=Counter)
    # Redis calls skipped because every connection was busy for the whole call timeout
    # (back-pressure, a miss; not a Redis failure).
    pool_busy: int = 0
    latency_s: dict[str, list[float]] = field(default_factory=dict)  # level -> recent samples

    def hit(self, level: str, namespace: str) -> None:
        self.hits[(level, namespace)] += 1

    def observe(self, level: str, seconds: float) -> None:
        samples = self.latency_s.setdefault(level, [])
        samples.append(seconds)
        if len(samples) > 4096:
            del samples[:2048]
