"""The multi-level cache: L1 (this process) -> L2 (Redis, shared) -> compute.

* Single flight: concurrent callers of one missing key in a process share one computation.
  It runs as a task of its own, so a caller that is cancelled (its client went away) leaves it
  running for the others; it is cancelled only when nobody waits for it any more.
* Lease (optional): across replicas, the first to miss takes a short Redis lease; the others
  poll L2 for up to the lease time before computing themselves (never blocked longer).
* XFetch (Vattani et al., 2015): a hit on an entry close to expiry is, with a probability that
  grows as expiry nears and with how long the value took to compute, treated as a miss, so hot
  keys are refreshed by one early caller instead of stampeding when they expire.
* Failure: L2 errors and decode errors are misses; L2 writes run in the background, so a slow or
  dead Redis costs a request at most one bounded read.

Stored values are envelopes ``{"v": value, "d": compute seconds, "x": expiry (Unix time)}``
encoded by ``cache.codec`` (never pickle). Nothing read from Redis is trusted: the envelope's
fields must have their types, an optional ``Seal`` (HMAC under a shared secret) must match the
key, and the caller's ``validate`` must accept the value; anything else is a counted miss
(``CacheStats.rejected``), never served. L1 holds only what this process computed or
accepted from L2.
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
from cache.seal import Seal
from cache.stats import CacheStats

#: A value check: True when a value read from L2 may be served (its type, shape and range).
Validator = Callable[[Any], bool]


def _accept_any(value: Any) -> bool:
    return True


class _Flight:
    """One computation shared by everyone waiting for its keys: a task, and how many wait.

    Every waiter awaits it shielded; a cancelled waiter leaves, and the last one to leave
    cancels the task (nobody wants its result). ``result`` is the value (one key) or a dict
    key -> value (a batch)."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.waiters = 0
        # Retrieved here, so a failure nobody awaited any more is not logged as unretrieved.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def join(self) -> Any:
        self.waiters += 1
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            if not self.task.done() and self.waiters == 1:
                self.task.cancel()
            raise
        finally:
            self.waiters -= 1


class MultiLevelCache:
    """l2 : None runs L1-only. lease_ms : 0 disables the cross-replica lease.
    xfetch_beta : 0 disables early refresh; 1 is the paper's default.
    seal : optional HMAC of every value written to / read from L2 (``cache.seal``).
    """

    def __init__(
        self,
        l1: L1Cache,
        l2: RedisL2 | None = None,
        *,
        stats: CacheStats | None = None,
        lease_ms: int = 0,
        xfetch_beta: float = 1.0,
        seal: Seal | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.l1, self.l2 = l1, l2
        self.stats = stats or (l2.stats if l2 is not None else CacheStats())
        if l2 is not None:
            l2.stats = self.stats
        self.lease_ms = lease_ms
        self.xfetch_beta = xfetch_beta
        self.seal = seal
        self.rng = rng or random.Random()
        self._inflight: dict[str, _Flight] = {}
        self._writes: set[asyncio.Task[Any]] = set()

    # ---- envelopes --------------------------------------------------------------------------
    def _open_l1(self, raw: bytes | None) -> dict[str, Any] | None:
        """An L1 envelope (written by this process)."""
        if raw is None:
            return None
        try:
            return _envelope(decode(raw))
        except CacheDecodeError:
            self.stats.decode_errors += 1
            return None

    def _open_l2(
        self, namespace: str, key: str, raw: bytes | None, validate: Validator, ttl_s: float
    ) -> tuple[dict[str, Any], bytes] | None:
        """An envelope read from Redis, and its unsealed bytes (for L1), if it may be served:
        sealed for this key (when sealing), decodable, well-formed, and accepted by
        ``validate``. Anything else is counted in ``stats.rejected[namespace]``. Its expiry is
        capped at ``ttl_s`` from now, whatever the envelope says: a value is never kept past
        the configured time to live, however it was written."""
        if raw is None:
            return None
        blob = raw if self.seal is None else self.seal.open(key, raw)
        if blob is None:  # not sealed for this key under our secret
            self.stats.rejected[namespace] += 1
            return None
        try:
            env = _envelope(decode(blob))
        except CacheDecodeError:
            self.stats.decode_errors += 1
            self.stats.rejected[namespace] += 1
            return None
        try:
            ok = bool(validate(env["v"]))
        except Exception:  # a check that raises on a foreign value refuses it too
            ok = False
        if not ok:
            self.stats.rejected[namespace] += 1
            return None
        env["x"] = min(env["x"], time.time() + ttl_s)
        return env, blob

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
        self,
        namespace: str,
        key: str,
        compute: Callable[[], Awaitable[Any]],
        ttl_s: float,
        validate: Validator = _accept_any,
    ) -> Any:
        """The cached value of ``key``, computing (once per process) when no level has it.
        validate : whether a value read from L2 may be served (see module doc)."""
        t0 = time.perf_counter()
        env = self._open_l1(self.l1.get(key))
        if env is not None and self._fresh(env):
            self.stats.hit("l1", namespace)
            self.stats.observe("l1", time.perf_counter() - t0)
            return env["v"]
        flight = self._inflight.get(key)
        if flight is None:
            task = asyncio.get_running_loop().create_task(
                self._fill(namespace, key, compute, ttl_s, validate)
            )
            flight = self._start(task, [key])
        got = await flight.join()
        return got[key] if isinstance(got, _Batch) else got

    def _start(self, task: asyncio.Task[Any], keys: Sequence[str]) -> _Flight:
        flight = _Flight(task)
        for key in keys:
            self._inflight[key] = flight

        def done(_: asyncio.Task[Any]) -> None:
            for key in keys:
                if self._inflight.get(key) is flight:
                    del self._inflight[key]

        task.add_done_callback(done)
        return flight

    async def _fill(
        self,
        namespace: str,
        key: str,
        compute: Callable[[], Awaitable[Any]],
        ttl_s: float,
        validate: Validator,
    ) -> Any:
        if self.l2 is not None:
            raw = (await self.l2.get_many([key]))[0]
            got = self._open_l2(namespace, key, raw, validate, ttl_s)
            if got is not None and self._fresh(got[0]):
                env, blob = got
                self.l1.set(key, blob, max(0.0, env["x"] - time.time()))
                self.stats.hit("l2", namespace)
                return env["v"]
            if self.lease_ms and await self.l2.acquire_lease(key, self.lease_ms) is None:
                got = await self._wait_for_peer(namespace, key, validate, ttl_s)
                if got is not None:
                    env, blob = got
                    self.l1.set(key, blob, max(0.0, env["x"] - time.time()))
                    self.stats.hit("l2", namespace)
                    return env["v"]
        self.stats.misses[namespace] += 1
        self.stats.computes[namespace] += 1
        t0 = time.perf_counter()
        value = await compute()
        self._store([(key, value, time.perf_counter() - t0)], ttl_s)
        return value

    async def _wait_for_peer(
        self, namespace: str, key: str, validate: Validator, ttl_s: float
    ) -> tuple[dict[str, Any], bytes] | None:
        assert self.l2 is not None
        deadline = time.monotonic() + self.lease_ms / 1000
        while time.monotonic() < deadline:
            await asyncio.sleep(0.005)
            raw = (await self.l2.get_many([key]))[0]
            got = self._open_l2(namespace, key, raw, validate, ttl_s)
            if got is not None and self._fresh(got[0]):
                return got
        return None

    def _store(self, items: Sequence[tuple[str, Any, float]], ttl_s: float) -> None:
        expiry = time.time() + ttl_s
        blobs = []
        for key, value, delta in items:
            blob = encode({"v": value, "d": delta, "x": expiry})
            self.l1.set(key, blob, ttl_s)
            sealed = blob if self.seal is None else self.seal.close(key, blob)
            blobs.append((key, sealed, ttl_s))
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
        validate: Validator = _accept_any,
    ) -> list[Any]:
        """Values for ``keys``: L1, then one MGET, then one ``compute_missing(indices)`` call
        for the rest (which must return their values in order). Keys another caller is
        computing are awaited, not computed again."""
        out: list[Any] = [None] * len(keys)
        todo: list[int] = []
        for i, key in enumerate(keys):
            env = self._open_l1(self.l1.get(key))
            if env is not None and self._fresh(env):
                out[i] = env["v"]
                self.stats.hit("l1", namespace)
            else:
                todo.append(i)
        if todo and self.l2 is not None:
            raws = await self.l2.get_many([keys[i] for i in todo])
            still = []
            for i, raw in zip(todo, raws, strict=True):
                got = self._open_l2(namespace, keys[i], raw, validate, ttl_s)
                if got is not None and self._fresh(got[0]):
                    env, blob = got
                    out[i] = env["v"]
                    self.l1.set(keys[i], blob, max(0.0, env["x"] - time.time()))
                    self.stats.hit("l2", namespace)
                else:
                    still.append(i)
            todo = still
        flights: dict[str, _Flight] = {}
        mine: dict[str, int] = {}  # one computation per distinct key
        for i in todo:
            key = keys[i]
            if key in self._inflight:
                flights[key] = self._inflight[key]
            else:
                mine.setdefault(key, i)
        if mine:
            task = asyncio.get_running_loop().create_task(
                self._compute_batch(namespace, mine, compute_missing, ttl_s)
            )
            batch = self._start(task, list(mine))
            for key in mine:
                flights[key] = batch
        results: dict[int, Any] = {}
        for flight in {id(f): f for f in flights.values()}.values():
            results[id(flight)] = await flight.join()
        for i in todo:
            got = results[id(flights[keys[i]])]
            out[i] = got[keys[i]] if isinstance(got, _Batch) else got
        return out

    async def _compute_batch(
        self,
        namespace: str,
        mine: dict[str, int],
        compute_missing: Callable[[list[int]], Awaitable[Sequence[Any]]],
        ttl_s: float,
    ) -> _Batch:
        self.stats.misses[namespace] += len(mine)
        self.stats.computes[namespace] += len(mine)
        t0 = time.perf_counter()
        values = list(await compute_missing(list(mine.values())))
        if len(values) != len(mine):
            raise ValueError(f"compute_missing returned {len(values)} values for {len(mine)}")
        delta = (time.perf_counter() - t0) / max(1, len(mine))
        self._store([(k, v, delta) for k, v in zip(mine, values, strict=True)], ttl_s)
        return _Batch(zip(mine, values, strict=True))

    async def drain(self) -> None:
        """Wait for background L2 writes (tests, shutdown)."""
        if self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)


class _Batch(dict):
    """A batch computation's values by key (so a waiter can tell it from a single value)."""


def _envelope(env: Any) -> dict[str, Any]:
    """``env`` if it is an envelope with the right types; else CacheDecodeError."""
    if not isinstance(env, dict) or not {"v", "d", "x"} <= env.keys():
        raise CacheDecodeError("not an envelope")
    d, x = env["d"], env["x"]
    for name, n in (("d", d), ("x", x)):
        if isinstance(n, bool) or not isinstance(n, int | float) or not math.isfinite(n):
            raise CacheDecodeError(f"envelope field {name} is not a finite number")
    if d < 0:
        raise CacheDecodeError("envelope compute time is negative")
    return env
