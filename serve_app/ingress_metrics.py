"""The ingress's metrics, exported through Ray's Prometheus endpoint (``ray_`` prefix):
requests by endpoint/status/class, pipeline stage times, failovers, admission, the cache."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from functools import lru_cache
from typing import ClassVar

from ray.serve import metrics

from actors.model_metrics import MS_BUCKETS


@lru_cache(maxsize=1)
def request_counter() -> metrics.Counter:
    """Requests by endpoint, status code and priority (recorded by the ingress)."""
    return metrics.Counter(
        "orml_requests",
        description="HTTP requests by endpoint, status and priority.",
        tag_keys=("endpoint", "status", "priority"),
    )


class BulkCounter:
    """A Ray counter incremented in bulk: increments are summed here and handed to Ray at
    most once per ``flush_s``. Ray records each increment at several microseconds, a visible
    share of the ingress's CPU at thousands of requests a second (``bench/flame.py``). Counts
    reach Ray ``flush_s`` later at most, whether or not another increment follows: the first
    increment after a flush schedules the next on the running event loop (without one, the
    next increment flushes)."""

    def __init__(self, counter: metrics.Counter, tag_keys: tuple[str, ...], flush_s: float = 1.0):
        self.counter, self.tag_keys, self.flush_s = counter, tag_keys, flush_s
        self._pending: Counter[tuple[str, ...]] = Counter()
        self._flushed_at = time.monotonic()
        self._scheduled: asyncio.TimerHandle | None = None

    def inc(self, *tag_values: str) -> None:
        """One more for these tag values (in ``tag_keys`` order)."""
        self._pending[tag_values] += 1
        if time.monotonic() - self._flushed_at >= self.flush_s:
            self.flush()
        elif self._scheduled is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            self._scheduled = loop.call_later(self.flush_s, self.flush)

    def flush(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
        pending, self._pending = self._pending, Counter()
        self._flushed_at = time.monotonic()
        for values, n in pending.items():
            self.counter.inc(n, tags=dict(zip(self.tag_keys, values, strict=True)))


@lru_cache(maxsize=1)
def requests_by_endpoint() -> BulkCounter:
    """``request_counter`` in bulk (the ingress's per-request count)."""
    return BulkCounter(request_counter(), ("endpoint", "status", "priority"))


@lru_cache(maxsize=1)
def stage_histogram() -> metrics.Histogram:
    """Dispatch pipeline stage latency (tagged ``stage``)."""
    return metrics.Histogram(
        "orml_dispatch_stage_ms",
        description="Dispatch pipeline stage wall time, ms.",
        boundaries=MS_BUCKETS,
        tag_keys=("stage",),
    )


@lru_cache(maxsize=1)
def failover_counter() -> metrics.Counter:
    """Failed attempts the ingress retried on another replica (tagged call and error)."""
    return metrics.Counter(
        "orml_failovers",
        description="Deployment calls retried on another replica, by call and error.",
        tag_keys=("target", "error"),
    )


class CacheMetrics:
    """Cache hits/misses per level and namespace, Redis and decode errors (counters), L1 bytes
    and breaker state (gauges; breaker 0 closed, 1 half-open, 2 open)."""

    _BREAKER: ClassVar[dict[str, int]] = {"closed": 0, "half_open": 1, "open": 2}

    def __init__(self, component: str) -> None:
        self.component = component
        self.hits = metrics.Counter(
            "orml_cache_hits", description="Cache hits.", tag_keys=("level", "namespace")
        )
        self.misses = metrics.Counter(
            "orml_cache_misses", description="Cache misses.", tag_keys=("namespace",)
        )
        self.errors = metrics.Counter(
            "orml_cache_errors",
            description="Redis errors, undecodable values, values refused (seal, decode, "
            "check), calls skipped for a busy pool.",
            tag_keys=("kind",),
        )
        self.l1_bytes = metrics.Gauge("orml_cache_l1_bytes", description="Bytes held in L1.")
        self.breaker = metrics.Gauge(
            "orml_cache_breaker_state", description="0 closed, 1 half-open, 2 open."
        )
        self._last: dict[tuple[str, ...], int] = {}

    def _inc(self, counter: metrics.Counter, key: tuple[str, ...], total: int, tags: dict) -> None:
        delta = total - self._last.get(key, 0)
        if delta > 0:
            counter.inc(delta, tags=tags)
            self._last[key] = total

    def export(self, cache) -> None:  # cache: MultiLevelCache
        s = cache.stats
        for (level, ns), n in s.hits.items():
            self._inc(self.hits, ("hit", level, ns), n, {"level": level, "namespace": ns})
        for ns, n in s.misses.items():
            self._inc(self.misses, ("miss", ns), n, {"namespace": ns})
        self._inc(self.errors, ("redis",), s.redis_errors, {"kind": "redis"})
        self._inc(self.errors, ("decode",), s.decode_errors, {"kind": "decode"})
        self._inc(self.errors, ("rejected",), sum(s.rejected.values()), {"kind": "rejected"})
        self._inc(self.errors, ("pool_busy",), s.pool_busy, {"kind": "pool_busy"})
        self.l1_bytes.set(cache.l1.bytes_held)
        if cache.l2 is not None:
            self.breaker.set(self._BREAKER[cache.l2.breaker.state.value])
