"""The multi-level cache: L1 (this process) -> L2 (Redis, shared) -> compute.

* Single flight: concurrent callers of one missing key in a process share one computation.
* Lease (optional): across replicas, the first to miss takes a short Redis lease; the others
  poll L2 for up to the lease time before computing themselves (never blocked longer).
* XFetch (Vattani et al., 2015): a hit on an entry close to expiry is, with a probability that
  grows as expiry nears and with how long the value took to compute, treated as a miss, so hot
  keys are refreshed by one early caller instead of stampeding when they expire.
* Failure: L2 errors and decode errors are misses; L2 writes run in the background, so a slow or
  dead Redis costs a request at most one bounded read.

Stored values are envelopes ``{"v": value, "d": compute seconds, "x": expiry (Unix time)}``
encoded by ``cache.codec`` (never pickle).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from cache.codec import CacheDecodeError, decode, encode
from cache.l1 import L1Cache
from cache.l2_redis import RedisL2
from cache.stats import CacheStats


class MultiLevelCache:
    """l2 : None runs L1-only. lease_ms : 0 disables the cross-replica lease.
    xfetch_beta : 0 disables early refresh; 1 is the paper's default.
    """

    def __init__(
        self,
        l1: L1Cache,
        l2: RedisL2 | None = None,
        *,
        stats: CacheStats | None = None,
        lease_ms: int = 0,
        xfetch_beta: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        self.l1, self.l2 = l1, l2
        self.stats = stats or (l2.stats if l2 is not None else CacheStats())
        if l2 is not None:
            l2.stats = self.stats
        self.lease_ms = lease_ms
        self.xfetch_beta = xfetch_beta
        self.rng = rng or random.Random()
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._writes: set[asyncio.Task[Any]] = set()

    # ---- envelopes --------------------------------------------------------------------------
    def _open(self, raw: bytes | None) -> dict[str, Any] | None:
        if raw is None:
            return None
        try:
            env = decode(raw)
            if not isinstance(env, dict) or not {"v", "d", "x"} <= env.keys():
                raise CacheDecodeError("not an envelope")
            return env
        except CacheDecodeError:
            self.stats.decode_errors += 1
            return None

    def _fresh(self, env: dict[str, Any]) -> bool:
        now = time.time()
        if now >= env["x"]:
            return False
        if self.xfetch_beta <= 0:
            return True
        early = -env["d"] * self.xfetch_beta * math.log(max(self.rng.random(), 1e-12))
        return now + early < env["x"]

    # ---- single key -------------------------------------------------------------------------
    async def get_or_compute(
        self, namespace: str, key: str, compute: Callable[[], Awaitable[Any]], ttl_s: float
    ) -> Any:
        """The cached value of ``key``, computing (once per process) when no level has it."""
        t0 = time.perf_counter()
        env = self._open(self.l1.get(key))
        if env is not None and self._fresh(env):
            self.stats.hit("l1", namespace)
            self.stats.observe("l1", time.perf_counter() - t0)
            return env["v"]
        if key in self._inflight:
            return await asyncio.shield(self._inflight[key])
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            value = await self._fill(namespace, key, compute, ttl_s)
            fut.set_result(value)
            return value
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # mark retrieved: waiters re-raise it, nobody logs it twice
            raise
        finally:
            del self._inflight[key]

    async def _fill(
        self, namespace: str, key: str, compute: Callable[[], Awaitable[Any]], ttl_s: float
    ) -> Any:
        if self.l2 is not None:
            env = self._open((await self.l2.get_many([key]))[0])
            if env is not None and self._fresh(env):
                self.l1.set(key, encode(env), max(0.0, env["x"] - time.time()))
                self.stats.hit("l2", namespace)
                return env["v"]
            if self.lease_ms and await self.l2.acquire_lease(key, self.lease_ms) is None:
                env = await self._wait_for_peer(key)
                if env is not None:
                    self.l1.set(key, encode(env), max(0.0, env["x"] - time.time()))
                    self.stats.hit("l2", namespace)
                    return env["v"]
        self.stats.misses[namespace] += 1
        self.stats.computes[namespace] += 1
        t0 = time.perf_counter()
        value = await compute()
        self._store([(key, value, time.perf_counter() - t0)], ttl_s)
        return value

    async def _wait_for_peer(self, key: str) -> dict[str, Any] | None:
        assert self.l2 is not None
        deadline = time.monotonic() + self.lease_ms / 1000
        while time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            env = self._open((await self.l2.get_many([key]))[0])
            if env is not None and self._fresh(env):
                return env
        return None

    def _store(self, items: Sequence[tuple[str, Any, float]], ttl_s: float) -> None:
        expiry = time.time() + ttl_s
        blobs = []
        for key, value, delta in items:
            blob = encode({"v": value, "d": delta, "x": expiry})
            self.l1.set(key, blob, ttl_s)
            blobs.append((key, blob, ttl_s))
        if self.l2 is not None and blobs:
            task = asyncio.get_running_loop().create_task(self.l2.set_many(blobs))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    # ---- batches ----------------------------------------------------------------------------
    async def get_many_or_compute(
        self,
        namespace: str,
        keys: Sequence[str],
        compute_missing: Callable[[list[int]], Awaitable[Sequence[Any]]],
        ttl_s: float,
    ) -> list[Any]:
        """Values for ``keys``: L1, then one MGET, then one ``compute_missing(indices)`` call
        for the rest (which must return their values in order)."""
        out: list[Any] = [None] * len(keys)
        todo: list[int] = []
        for i, key in enumerate(keys):
            env = self._open(self.l1.get(key))
            if env is not None and self._fresh(env):
                out[i] = env["v"]
                self.stats.hit("l1", namespace)
            else:
                todo.append(i)
        if todo and self.l2 is not None:
            raws = await self.l2.get_many([keys[i] for i in todo])
            still = []
            for i, raw in zip(todo, raws, strict=True):
                env = self._open(raw)
                if env is not None and self._fresh(env):
                    out[i] = env["v"]
                    self.l1.set(keys[i], raw, max(0.0, env["x"] - time.time()))
                    self.stats.hit("l2", namespace)
                else:
                    still.append(i)
            todo = still
        # Keys another caller is already computing are awaited, not recomputed.
        waiting = {i: self._inflight[keys[i]] for i in todo if keys[i] in self._inflight}
        mine = [i for i in todo if i not in waiting]
        mine = list({keys[i]: i for i in mine}.values())  # one computation per distinct key
        dup = [i for i in todo if i not in waiting and i not in mine]
        if mine:
            loop = asyncio.get_running_loop()
            futs = {keys[i]: loop.create_future() for i in mine}
            self._inflight.update(futs)
            self.stats.misses[namespace] += len(mine)
            self.stats.computes[namespace] += len(mine)
            try:
                t0 = time.perf_counter()
                values = list(await compute_missing(mine))
                if len(values) != len(mine):
                    raise ValueError(
                        f"compute_missing returned {len(values)} values for {len(mine)}"
                    )
                delta = (time.perf_counter() - t0) / max(1, len(mine))
                self._store([(keys[i], v, delta) for i, v in zip(mine, values, strict=True)], ttl_s)
                for i, v in zip(mine, values, strict=True):
                    out[i] = v
                    futs[keys[i]].set_result(v)
            except BaseException as exc:
                for f in futs.values():
                    if not f.done():
                        f.set_exception(exc)
                        f.exception()
                raise
            finally:
                for key in futs:
                    self._inflight.pop(key, None)
        for i, fut in waiting.items():
            out[i] = await asyncio.shield(fut)
        for i in dup:
            out[i] = out[next(j for j in mine if keys[j] == keys[i])]
        return out

    async def drain(self) -> None:
        """Wait for background L2 writes (tests, shutdown)."""
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)
