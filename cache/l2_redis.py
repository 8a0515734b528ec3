"""L2: Redis shared by every replica on every node, behind a circuit breaker.

Every call has an explicit short timeout (socket and asyncio), so a slow, paused or dead Redis
costs a request at most ``timeout_s`` before it is treated as a miss; after
``failure_threshold`` failures the breaker stops asking until a probe succeeds. Batched lookups
use one MGET; writes go through one pipeline with TTLs jittered so entries written together do
not expire together.

At most ``max_connections`` calls run at once. A call that finds them all busy waits for one
within its timeout, and if none frees it is a miss counted as ``pool_busy``: back-pressure
from this process's own burst, not a Redis failure, so it never opens the breaker. The same
holds for a call that got a connection with less than half its timeout left and ran out of
it: the burst spent its time, not Redis. A call cancelled half-way (its request went away)
neither fails nor closes the breaker.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from cache.breaker import CircuitBreaker
from cache.stats import CacheStats


class RedisL2:
    """url : ``redis://[:password@]host:port/db`` (``rediss://`` for TLS); password : when
    given, it overrides the URL's."""

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        timeout_s: float = 0.05,
        max_connections: int = 64,
        ttl_jitter: float = 0.1,
        breaker: CircuitBreaker | None = None,
        stats: CacheStats | None = None,
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._slots = asyncio.Semaphore(max_connections)
        self.ttl_jitter = ttl_jitter
        self.breaker = breaker or CircuitBreaker()
        self.stats = stats or CacheStats()
        extra = {} if password is None else {"password": password}
        self._client = aioredis.Redis.from_url(
            url,
            **extra,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            max_connections=max_connections,
            retry_on_timeout=False,
            # A pooled connection to a Redis that restarted is dead: reconnect once, still
            # inside the call's timeout, instead of failing the probe that would close the
            # breaker.
            retry=Retry(NoBackoff(), 1),
            retry_on_error=[RedisConnectionError],
            health_check_interval=0,
        )

    async def _call(self, make, default):
        if not self.breaker.allow():
            return default
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(self._slots.acquire(), self.timeout_s)
        except TimeoutError:
            self.breaker.release()
            self.stats.pool_busy += 1
            return default
        except BaseException:
            self.breaker.release()
            raise
        left = self.timeout_s - (time.perf_counter() - t0)
        try:
            result = await asyncio.wait_for(make(), max(left, 0.001))
        except asyncio.CancelledError:
            self.breaker.release()
            raise
        except TimeoutError:
            if left < self.timeout_s / 2:
                self.breaker.release()
                self.stats.pool_busy += 1
            else:
                self.breaker.failure()
                self.stats.redis_errors += 1
            return default
        except Exception:
            self.breaker.failure()
            self.stats.redis_errors += 1
            return default
        finally:
            self._slots.release()
        self.breaker.success()
        self.stats.observe("l2", time.perf_counter() - t0)
        return result

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        return await self._call(lambda: self._client.mget(list(keys)), [None] * len(keys))

    async def set_many(self, items: Sequence[tuple[str, bytes, float]]) -> bool:
        """(key, value, ttl_s) triples; True if Redis took them."""
        if not items:
            return True

        async def write() -> bool:
            pipe = self._client.pipeline(transaction=False)
            for key, value, ttl_s in items:
                jitter = 1.0 + random.uniform(-self.ttl_jitter, self.ttl_jitter)
                pipe.set(key, value, px=max(1, int(ttl_s * 1000 * jitter)))
            await pipe.execute()
            return True

        return bool(await self._call(write, False))

    async def acquire_lease(self, key: str, lease_ms: int) -> str | None:
        """A short lease (SET NX PX) so one replica computes a missing key; token or None."""
        token = secrets.token_hex(8)
        ok = await self._call(
            lambda: self._client.set(f"{key}:lease", token, nx=True, px=lease_ms), None
        )
        return token if ok else None

    async def close(self) -> None:
        await self._client.aclose()
