"""The served pipeline: dispatch rounds, ETR predictions and static solves, in one place.

Every protocol (HTTP, gRPC, the Python handle) parses its request into a decoder and calls
the same method here with a ``CallContext``. In order, for a dispatch round:

1. admission: a permit from the ``dispatch`` lane, or shed at once (``Overloaded``), before
   any byte of the body is parsed;
2. decode (the edge's parser, run only once admitted), the size limits, the new orders;
3. etr: their features, then the cache, then one call to the ETR model for the misses,
   started at once and left running while
4. pack: the riders become domain types and the round becomes arrays;
5. solve: ONE call to a solver replica prices every (rider, order) insertion, applies the ETR
   floor, assigns, inserts and improves (``planner.dispatch_round.solve_round``): the R x O
   candidate arrays never leave the solver's process (or its GPU);
6. unpack: the plan, with the timing of every stage.

So a dispatch costs two hops (ETR, solver), one when every ETR row is cached (or the round
says `etr_floor: false`). The stage names are ``planner.dispatch_round.STAGES``; this module
adds ``admission_ms`` and ``decode_ms``, the serving path's own.

Every ETR answer (and a plan's ETR floor) comes from ONE model version and names it, also
while a roll swaps versions replica by replica: cache keys carry the version the caller
believes is serving, and rows a replica computed with another version are never stored under
them (``_cached_predict``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np

from cache.keys import Quantisation, cache_key
from domain import DispatchPlan, Order
from domain.order_columns import CREATED
from etr import Prediction
from etr.features import features_from_columns, features_from_orders
from planner.dispatch_round import build_plan, etr_floor_seconds
from planner.pdptw.instance import PdptwInstance
from serve_app.pipeline.admission import Admission, Permit
from serve_app.pipeline.cached_values import etr_answer_check, is_minutes, solution_check
from serve_app.pipeline.context import CallContext
from serve_app.pipeline.errors import BodyTimeout, InvalidInput, TooLarge
from serve_app.pipeline.limits import Limits
from serve_app.pipeline.ports import EtrModel, ReplicaCache, Solver
from serve_app.pipeline.round_source import RoundSource

T = TypeVar("T")
#: The request's own bytes (and anything else that changes its answer), read once admitted:
#: the key of a whole-answer cache.
RawBody = Callable[[], Awaitable[bytes]]
#: Event-loop turns given to the ETR stage before the pack, which holds the loop: a hop's call
#: is sent by Serve's router from this loop, and a model computed here runs in a turn of its
#: own (``actors.etr_batcher``'s inline calls) after the features, so both must be done or
#: gone first to overlap the pack. 3 turns left the in-process model's call to after the pack
#: (the ETR stage ending 5-8 ms after it at 5000 x 2000); 12 finish it before (about 0.3 ms).
YIELDS_TO_SEND = 12
Decode = Callable[[], Awaitable[T]]
#: Called with a dispatch round's stage timings (ms) after every round.
TimingsObserver = Callable[[dict[str, float]], None]


@dataclass(frozen=True)
class EtrCall:
    orders: Sequence[Order]
    utc_offset_s: float = 0.0


@dataclass(frozen=True)
class SolveCall:
    """instance : validated; key_payload : its canonical form (the cache key's input)."""

    instance: PdptwInstance
    time_limit_s: float
    seed: int
    key_payload: Any


class _VersionMoved(Exception):
    """A replica answered with another version than the cache keys were built for."""

    def __init__(self, prediction: Prediction | None = None) -> None:
        super().__init__()
        self.prediction = prediction


#: Cache lookups retried while a roll moves versions under them, then answered uncached.
VERSION_TRIES = 3
#: The form of a cached static solution (``cached_values.solution_check``): 2 added
#: ``unassigned``; entries of another form are under other keys, never read.
SOLVE_VALUES_VERSION = "2"
#: Static solves are keyed by their exact numbers: quantised like ETR rows, a 0.5 s solve was
#: answered with a 0.05 s one (``time_limit_s`` rounded to whole seconds), and windows that
#: differ by less than a second are different instances.
EXACT = Quantisation(coord_deg=1e-12, time_s=1e-12, default=1e-12)


async def read_within_deadline(decode: Decode[T], ctx: CallContext) -> T:
    """``decode()`` (reading the body, then parsing it), its reading bounded by the request's
    deadline: a body that has not arrived by then raises ``BodyTimeout`` and the admission slot
    taken for it goes back at once, instead of being held for as long as a client trickles."""
    remaining = ctx.remaining_s()
    if remaining == math.inf:
        return await decode()
    try:
        return await asyncio.wait_for(decode(), timeout=max(remaining, 0.0))
    except TimeoutError:
        raise BodyTimeout(
            f"the request's body did not arrive within its deadline ({ctx.request_id})"
        ) from None


def _settle(task: asyncio.Future[Any]) -> None:
    """Leave ``task`` to end on its own, its outcome taken (a refresh that failed keeps what
    was known; the call that needed it raised already)."""

    def taken(done: asyncio.Future[Any]) -> None:
        if not done.cancelled():
            done.exception()

    task.add_done_callback(taken)


def check_round_limits(sizes: tuple[int, int, int], limits: Limits) -> None:
    """Raise TooLarge (413) for a round over the configured sizes; ``sizes`` as
    ``RoundSource.sizes``."""
    riders, orders, longest = sizes
    if riders > limits.max_riders:
        raise TooLarge("riders", riders, limits.max_riders)
    if orders > limits.max_orders:
        raise TooLarge("orders", orders, limits.max_orders)
    if longest > limits.max_route_stops:
        raise TooLarge("route stops", longest, limits.max_route_stops)


class Pipeline:
    """solver : dispatch rounds and static solves (online rounds first: the replicas make
    static solves step aside for them); etr : the model; cache : ETR rows, whole ETR answers
    (``cache_answers``) and static solutions (None: off); improve_routes : the solve stage's
    last step; on_timings : where a dispatch round's stage timings go (metrics)."""

    def __init__(
        self,
        *,
        solver: Solver,
        etr: EtrModel,
        admission: Admission,
        limits: Limits,
        cache: ReplicaCache | None = None,
        cache_answers: bool = True,
        improve_routes: bool = True,
        on_timings: TimingsObserver | None = None,
    ) -> None:
        self.solver = solver
        self.etr = etr
        self.admission = admission
        self.limits = limits
        self.cache = cache
        self.cache_answers = cache_answers
        self.improve_routes = improve_routes
        self.on_timings = on_timings

    # ---- dispatch ---------------------------------------------------------------------------
    async def dispatch(self, decode: Decode[RoundSource], ctx: CallContext) -> DispatchPlan:
        """Plan one round; raises the errors of ``serve_app.pipeline.errors``."""
        permit = await self.admission.acquire("dispatch", ctx)
        # What the ingress knows of the ETR model is refreshed once a second by the first
        # caller to need it: a hop to an Etr replica. Asked for now, that hop runs while the
        # body is read; left to the ETR stage, a round after a quiet second waited for it
        # (docs/round.md, "Served").
        refreshed = asyncio.ensure_future(self.etr.refresh_ahead())
        try:
            async with permit:
                return await self._dispatch(decode, ctx, permit)
        finally:
            _settle(refreshed)

    async def _dispatch(
        self, decode: Decode[RoundSource], ctx: CallContext, permit: Permit
    ) -> DispatchPlan:
        t0 = time.perf_counter()
        call = await read_within_deadline(decode, ctx)
        check_round_limits(call.sizes(), self.limits)
        orders = call.new_orders()
        etr_started = time.perf_counter()
        etr_done: list[float] = []
        etr = None
        if len(orders) and call.etr_floor():
            features = features_from_columns(orders, utc_offset_s=call.utc_offset_s)
            etr = asyncio.ensure_future(self._cached_predict(features, ctx))
            etr.add_done_callback(lambda _: etr_done.append(time.perf_counter()))
            for _ in range(YIELDS_TO_SEND):  # let the hop leave before the CPU work below
                await asyncio.sleep(0)
        try:
            # A plan must be a valid next request: no route past the stop limit.
            stop_limit = self.limits.max_route_stops
            weights = replace(call.dispatch_weights(), max_route_stops=stop_limit)
            t1 = time.perf_counter()
            packed = call.packed()
            arrays = packed.arrays
            t2 = time.perf_counter()
            floor, version = None, None
            if etr is not None:
                got = await etr
                floor = etr_floor_seconds(orders.values[:, CREATED], packed.now, got.minutes)
                version = got.model_version
        finally:
            if etr is not None and not etr.done():
                etr.cancel()
        t3 = time.perf_counter()
        assigned = await self.solver.solve_round(arrays, weights, floor, self.improve_routes, ctx)
        t4 = time.perf_counter()
        plan = build_plan(packed, assigned, weights.late_weight, floor)
        t5 = time.perf_counter()
        timings = {
            "admission_ms": permit.waited_s * 1e3,
            "decode_ms": (t1 - t0) * 1e3,
            "pack_ms": (t2 - t1) * 1e3,
            "etr_ms": ((etr_done[0] if etr_done else etr_started) - etr_started) * 1e3,
            "solve_ms": (t4 - t3) * 1e3,
            **assigned.timings_ms,
            "unpack_ms": (t5 - t4) * 1e3,
            "total_ms": (t5 - t0) * 1e3 + permit.waited_s * 1e3,
        }
        if self.on_timings is not None:
            self.on_timings(timings)
        return replace(plan, timings_ms=timings, etr_model_version=version)

    # ---- ETR --------------------------------------------------------------------------------
    async def etr_minutes(
        self,
        decode: Decode[EtrCall],
        ctx: CallContext,
        max_orders: int | None = None,
        raw: RawBody | None = None,
    ) -> Prediction:
        """ETR minutes for a list of orders (the ``etr`` lane); at most ``max_orders``
        (default ``limits.max_orders``). With ``raw`` (the request's bytes) and
        ``cache_answers``, a request seen before under the serving model version is answered
        from the cache (parsed, so that a cached answer is served only with one minute per
        order of this request)."""
        limit = self.limits.max_orders if max_orders is None else max_orders
        async with await self.admission.acquire("etr", ctx):
            call = await read_within_deadline(decode, ctx)
            if len(call.orders) > limit:
                raise TooLarge("orders", len(call.orders), limit)

            async def compute() -> Prediction:
                return await self._etr_minutes(call.orders, call.utc_offset_s, ctx)

            if self.cache is None or not self.cache_answers or raw is None:
                return await compute()
            return await self._cached_answer(await raw(), len(call.orders), compute)

    async def _cached_answer(
        self, body: bytes, orders: int, compute: Callable[[], Awaitable[Prediction]]
    ) -> Prediction:
        """The whole answer to ``body`` (``orders`` of them), cached under the version
        believed to serve; an answer a roll computed with another version is returned, not
        stored."""
        assert self.cache is not None
        version = await self.etr.model_version()

        async def answer() -> dict[str, Any]:
            got = await compute()
            if got.model_version != version:
                raise _VersionMoved(got)
            return {"minutes": got.minutes.tolist(), "model_version": version}

        key = cache_key("etr-answer", f"v{version}", body)
        try:
            got = await self.cache.levels.get_or_compute(
                "etr-answer", key, answer, self.cache.ttl_s, etr_answer_check(version, orders)
            )
        except _VersionMoved as moved:
            return moved.prediction
        return Prediction(np.asarray(got["minutes"], np.float32), got["model_version"])

    async def etr_features(
        self, features: np.ndarray, ctx: CallContext, version: str | None = None
    ) -> Prediction:
        """ETR minutes float32[k] for features float32[k, 39], and their version (the Python
        API, the Open Inference Protocol). version : a loaded version to answer with (None:
        the serving one); NotFound when it is not loaded."""
        async with await self.admission.acquire("etr", ctx):
            return await self._cached_predict(features, ctx, version)

    async def _etr_minutes(
        self, orders: Sequence[Order], utc_offset_s: float, ctx: CallContext
    ) -> Prediction:
        features = features_from_orders(orders, utc_offset_s=utc_offset_s)
        return await self._cached_predict(features, ctx)

    async def _cached_predict(
        self, features: np.ndarray, ctx: CallContext, pinned: str | None = None
    ) -> Prediction:
        """Cached rows and computed rows of one version. Keys are built for the version
        asked for (``pinned``), else the one believed to serve; when a replica computes the
        misses with another (a roll is under way), nothing is stored and the lookup starts
        over under that version's keys.

        A model computed in this process is not cached by row: keying and looking up a row
        costs more than computing it in a batch."""
        if self.cache is None or len(features) == 0 or self.etr.computes_here:
            return await self.etr.predict(features, ctx, pinned)
        quant = self.cache.quant
        for _ in range(VERSION_TRIES):
            version = pinned or await self.etr.model_version()
            keys = [cache_key("etr", f"v{version}", row, quant) for row in features]

            async def compute_missing(idx: list[int], version: str = version) -> list[float]:
                got = await self.etr.predict(features[idx], ctx, pinned)
                if got.model_version != version:
                    raise _VersionMoved(got.model_version)
                return [float(m) for m in got.minutes]

            try:
                values = await self.cache.levels.get_many_or_compute(
                    "etr", keys, compute_missing, self.cache.ttl_s, is_minutes
                )
            except _VersionMoved:
                continue
            return Prediction(np.asarray(values, np.float32), version)
        return await self.etr.predict(features, ctx)  # still moving: whole, uncached

    # ---- static solves (offline) ------------------------------------------------------------
    async def solve(self, decode: Decode[SolveCall], ctx: CallContext) -> tuple[dict, bool]:
        """A static PDPTW solve (the ``solve`` lane), cached per instance and seed.

        Returns (summary, cached): summary as ``Solver.solve_pdptw`` gives it."""
        async with await self.admission.acquire("solve", ctx):
            call = await read_within_deadline(decode, ctx)
            if call.time_limit_s > ctx.remaining_s():
                raise InvalidInput.at(
                    ("body", "time_limit_s"),
                    f"{call.time_limit_s:g} s is more than the request's deadline leaves "
                    f"({max(0.0, ctx.remaining_s()):.1f} s): send a longer x-timeout-ms (or "
                    "gRPC deadline)",
                )
            computed = False

            async def compute() -> dict[str, Any]:
                nonlocal computed
                computed = True
                return await self.solver.solve_pdptw(
                    call.instance, call.time_limit_s, call.seed, ctx
                )

            if self.cache is None:
                return await compute(), False
            key = cache_key("solve", SOLVE_VALUES_VERSION, call.key_payload, EXACT)
            result = await self.cache.levels.get_or_compute(
                "solve", key, compute, self.cache.solve_ttl_s, solution_check(call.instance)
            )
            return result, not computed
