"""``dispatch_round``: one round, end to end, as a pure function of a ``DispatchRound``.

The stages (``STAGES``; each reports ``<stage>_ms``), the same names in-process and served:

    pack    ``round_arrays``: the round's domain types into arrays
    etr     ETR minutes per new order -> ``etr_floor_seconds`` (served: cache, then the model;
            in-process the minutes are an input and this stage is not timed)
    solve   ``solve_round``: price every (rider, order) insertion, assign, insert (repeat up to
            max_orders_per_rider times, each pass re-pricing the remaining orders against the
            routes that now hold the earlier picks), relocate-improve the changed routes; one
            call on the solver's device, reporting ``SOLVE_STEPS`` inside it
    unpack  ``build_plan``: arrays back into a ``DispatchPlan``

The served pipeline (``serve_app.pipeline``) runs pack and etr at the ingress and solve as one
call to a solver replica, so the R x O candidate arrays never leave the solver's device.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from domain import (
    Assignment,
    CostBreakdown,
    DispatchPlan,
    DispatchRound,
    DispatchWeights,
    RouteTable,
    Unassigned,
    UnassignedReason,
)
from kernels import compiled
from kernels.arrays import OrderArrays, RouteArrays
from kernels.assign import assign
from kernels.backend import (
    array_module,
    backend_for_round,
    device_clock,
    module_for,
    to_numpy,
)
from kernels.certified_assign import (
    DEVICE_FIRST_PAIRS,
    DeviceCosts,
    HostBounds,
    certified_assign,
)
from kernels.improve import improve
from kernels.insertion_bounds import insertion_lower_bounds
from kernels.insertion_costs import insertion_costs
from kernels.insertion_types import Insertions
from kernels.route_edit import insert_orders
from kernels.schedule import route_totals
from kernels.transfers import to_device, to_host
from planner.round_to_arrays import PackedRound, RoundArrays, pack_round
from planner.stage_times import StageTimes

STAGES = ("pack", "etr", "solve", "unpack")
SOLVE_STEPS = ("insertion_ms", "assign_ms", "insert_ms", "improve_ms")


def nearest_riders(routes: RouteArrays, orders: OrderArrays, k: int) -> tuple[Any, Any]:
    """Candidate pairs: each order with its k riders nearest to its pickup (straight line).

    Returns (rider index int[P], order index int[P]), P = O x min(k, R).
    """
    xp = routes.xp
    n_routes = routes.shape[0]
    k = min(k, n_routes)
    d = routes.start_xy[:, None, :] - orders.pickup_xy[None, :, :]
    d2 = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]  # [R, O]
    if k < n_routes:
        near = xp.argpartition(d2, k - 1, axis=0)[:k]  # [k, O]
    else:
        near = xp.broadcast_to(xp.arange(n_routes)[:, None], d2.shape)
    order_idx = xp.broadcast_to(xp.arange(d2.shape[1])[None, :], near.shape)
    return near.reshape(-1), order_idx.reshape(-1)


#: Pairs priced between two checkpoints on the array loops a warming replica uses (a block
#: takes a fraction of a second there): ``solve_round`` stops within about that of being
#: abandoned. The compiled kernel prices in one call (in blocks it would pay for re-packed
#: routes and concatenated answers), as does a GPU.
CHECKPOINT_PAIRS = 1 << 20


def _price(
    routes: RouteArrays,
    orders: OrderArrays,
    late_weight: float,
    candidates: int | None,
    checkpoint: Callable[[], None] | None = None,
) -> Insertions:
    """Insertion costs [R, O]; with ``candidates`` only the nearest riders per order are priced.
    With a ``checkpoint`` (called between blocks of rows) big pricings on the array loops go by
    blocks of about ``CHECKPOINT_PAIRS`` pairs."""
    if candidates is None or candidates >= routes.shape[0]:
        n_routes, n_orders = routes.shape[0], len(orders)
        block = max(1, CHECKPOINT_PAIRS // max(1, n_orders))
        on_loops = routes.xp is np and compiled.warming()
        if checkpoint is None or not on_loops or n_routes <= block:
            return insertion_costs(routes, orders, late_weight=late_weight)
        parts = []
        for lo in range(0, n_routes, block):
            checkpoint()
            rows = np.arange(lo, min(lo + block, n_routes))
            parts.append(insertion_costs(routes.take(rows), orders, late_weight=late_weight))
        return Insertions(
            **{
                f: np.concatenate([getattr(p, f) for p in parts])
                for f in Insertions.__dataclass_fields__
            }
        )
    xp = routes.xp
    ri, oi = nearest_riders(routes, orders, candidates)
    got = insertion_costs(routes.take(ri), orders.take(oi), late_weight=late_weight, pairs=True)
    shape = (routes.shape[0], len(orders))
    out = Insertions(
        cost=xp.full(shape, xp.inf, xp.float32),
        pickup_pos=xp.full(shape, -1, xp.int32),
        dropoff_pos=xp.full(shape, -1, xp.int32),
        travel=xp.zeros(shape, xp.float32),
        lateness=xp.zeros(shape, xp.float32),
        dropoff_arrival=xp.zeros(shape, xp.float32),
    )
    for name in Insertions.__dataclass_fields__:
        getattr(out, name)[ri, oi] = getattr(got, name)
    return out


@dataclass(frozen=True)
class Assigned:
    """What the solve stage returns (host NumPy).

    rider_of : int64[O] rider index per new order, -1 if unassigned.
    cost : float64[O] the (ETR-adjusted) insertion cost each assigned order was bought at.
    ever_feasible : bool[O] some rider could take the order in some pass.
    changed : int64[K] riders whose route changed; only their routes come back (row k is
        rider ``changed[k]``), with their schedule, so the caller runs no route kernel.
    routes, owner : the K changed routes after insertion and improvement (``RouteArrays``;
        int32[K, S] owner keys as ``PackedRound.owner``).
    arrival : float32[K, S] arrival at each of their stops, seconds since the round's now.
    added_travel_s, added_lateness_s : the round's driving and lateness over those routes,
        after minus before.
    backend : the array backend the stage ran on ("numpy" or "cupy").
    solved_by : the replica that ran it (set by the serving solver; empty in-process).
    """

    rider_of: np.ndarray
    cost: np.ndarray
    ever_feasible: np.ndarray
    changed: np.ndarray
    routes: RouteArrays
    owner: np.ndarray
    arrival: np.ndarray
    added_travel_s: float
    added_lateness_s: float
    timings_ms: dict[str, float] = field(default_factory=dict)
    backend: str = "numpy"
    solved_by: str = ""


def round_arrays(round_: DispatchRound) -> tuple[PackedRound, RoundArrays]:
    """Pack a round (host NumPy)."""
    packed = pack_round(round_)
    return packed, packed.arrays


def price_candidates(arrays: RoundArrays, weights: DispatchWeights) -> Insertions:
    """The insertion of every new order into every route, on the arrays' device (the first
    step of ``solve_round``; the solver's health probe runs it alone)."""
    return _price(arrays.routes, arrays.orders, weights.late_weight, weights.candidate_riders)


def etr_adjusted_cost(ins: Insertions, due: Any, etr_floor: Any, late_weight: float) -> Any:
    """Cost with each new drop-off arriving no earlier than the ETR model predicts.

    The OR schedule knows driving and waiting; the ETR model, trained on real deliveries, also
    knows what the schedule does not (kitchens, handovers). A candidate's own lateness is
    re-priced as ``max(0, max(planned, etr) - due)`` instead of ``max(0, planned - due)``.
    due, etr_floor : float32[O] seconds since now (for a grid ``ins`` [R, O]; for pairs [P],
    the pairs' orders' values). Returns float32 like ``ins.cost`` (a new array; ``ins`` is left
    as it is).

    With a = planned - due and f = etr - due, the extra lateness ``max(a, f, 0) - max(a, 0)``
    is ``max(f - max(a, 0), 0)``, bit for bit in float32 (where a >= f both are 0; elsewhere the
    same one subtraction), so it takes four passes over the R x O array in place instead of
    eleven with their temporaries.
    """
    xp = array_module(ins.cost)
    if ins.cost.ndim == 2:
        due, etr_floor = due[None, :], etr_floor[None, :]
    f = (etr_floor - due).astype(xp.float32)
    extra = ins.dropoff_arrival - due
    xp.maximum(extra, 0, out=extra)
    xp.subtract(f, extra, out=extra)
    xp.maximum(extra, 0, out=extra)
    extra *= xp.float32(late_weight)
    # An infeasible pair's cost is inf and its extra finite (>= 0): inf + extra stays inf.
    extra += ins.cost
    return extra


def _full_routes_closed(routes: RouteArrays, max_stops: int) -> RouteArrays:
    """The routes with no insertion position left where an order's two stops would take the
    route past ``max_stops`` (``insert_limit`` -1: every pair with it prices infeasible)."""
    xp = routes.xp
    full = routes.n_stops + 2 > max_stops
    if not bool(full.any()):
        return routes
    limit = xp.where(full, xp.int32(-1), routes.insert_limit).astype(xp.int32)
    return replace(routes, insert_limit=limit)


@dataclass(frozen=True)
class _Picks:
    """One pass's answer over its open riders and orders (host NumPy).

    rider : int64[K] (index into the pass's riders), order : int64[K] (into its orders);
    pickup_pos, dropoff_pos : int64[K]; cost : float64[K] (ETR-adjusted where a floor is set);
    ever_feasible : bool[O'] per open order; stops : int64[K] stops on each picked rider's
    route before the pass (how wide the routes grow, known on the host).
    """

    rider: np.ndarray
    order: np.ndarray
    pickup_pos: np.ndarray
    dropoff_pos: np.ndarray
    cost: np.ndarray
    ever_feasible: np.ndarray
    stops: np.ndarray


def _adjusted(ins: Insertions, order_idx: Any, due: Any, floor: Any, w: float) -> Any:
    """``ins.cost`` with the ETR floor of each pair's order (``etr_adjusted_cost``)."""
    if floor is None:
        return ins.cost
    return etr_adjusted_cost(ins, due[order_idx], floor[order_idx], w)


def _pass_dense(
    routes: RouteArrays,
    orders: OrderArrays,
    floor: Any,
    weights: DispatchWeights,
    checkpoint: Callable[[], None] | None,
    times: StageTimes,
    reference: bool = False,
) -> _Picks:
    """Price every pair (or each order's nearest ``candidate_riders``), then ``assign`` (on a
    GPU, the certified search over the device's prices, unless ``reference``)."""
    xp = routes.xp
    w = weights.late_weight
    with times("insertion_ms"):
        ins = _price(routes, orders, w, weights.candidate_riders, checkpoint)
        cost = ins.cost if floor is None else etr_adjusted_cost(ins, orders.due, floor, w)
        ever = xp.isfinite(cost).any(axis=0)
    with times("assign_ms"):
        pick = _dense_pick(cost, weights, checkpoint, reference)
    got = np.nonzero(pick >= 0)[0]
    rider = pick[got]
    # The picks' entries are gathered where the prices are: on a device only K of each
    # [R, O] array cross to the host, not the arrays, in one copy each way.
    at = tuple(to_device([rider, got], xp))
    ever, pickup_pos, dropoff_pos, picked_cost, stops = to_host(
        [ever, ins.pickup_pos[at], ins.dropoff_pos[at], cost[at], routes.n_stops[at[0]]], xp
    )
    return _Picks(
        rider=rider,
        order=got,
        pickup_pos=pickup_pos.astype(np.int64),
        dropoff_pos=dropoff_pos.astype(np.int64),
        cost=picked_cost.astype(np.float64),
        ever_feasible=ever,
        stops=stops.astype(np.int64),
    )


def _dense_pick(
    cost: Any,
    weights: DispatchWeights,
    checkpoint: Callable[[], None] | None,
    reference: bool = False,
) -> np.ndarray:
    """int64[O] rider per order (-1 none) of the exact assignment over a priced [R, O]; with
    ``reference``, always the dense host ``assign``."""
    xp = array_module(cost)
    if xp is not np and weights.candidate_riders is None and not reference:
        # Every price is on the device already: only the pairs that can win go to the host.
        costs = DeviceCosts(cost)
        picked = certified_assign(
            costs, costs.price, first=DEVICE_FIRST_PAIRS, checkpoint=checkpoint
        )
        if picked is not None:
            return picked.rider_of
    elif checkpoint is not None:
        checkpoint()
    # The dense solve is the host's: the matrix crosses once, the answer not at all.
    return assign(to_numpy(cost)).astype(np.int64)


def _pass_certified(
    routes: RouteArrays,
    orders: OrderArrays,
    floor: np.ndarray | None,
    weights: DispatchWeights,
    checkpoint: Callable[[], None] | None,
    times: StageTimes,
) -> _Picks | None:
    """The exact answer of ``_pass_dense`` on the host, pricing only the pairs that can win
    (``certified_assign`` over ``insertion_lower_bounds``); None where it cannot certify."""
    from kernels._insertion_costs_jit import insertion_costs_jit, route_context_jit

    w = weights.late_weight
    with times("insertion_ms"):
        ctx = route_context_jit(routes)
        bound = insertion_lower_bounds(routes, orders, late_weight=w, etr_floor=floor, ctx=ctx)

    def price(rider: np.ndarray, order: np.ndarray) -> Insertions:
        return insertion_costs_jit(routes, orders, ctx, w, False, at=(rider, order))

    def price_cost(rider: np.ndarray, order: np.ndarray) -> np.ndarray:
        with times("insertion_ms"):
            return _adjusted(price(rider, order), order, orders.due, floor, w)

    # The pricing inside is counted as insertion_ms; the rest of the loop (scans and sparse
    # solves) as assign_ms.
    pricing_before = times.ms["insertion_ms"]
    started = time.perf_counter()
    picked = certified_assign(HostBounds(bound), price_cost, checkpoint=checkpoint)
    spent_ms = (time.perf_counter() - started) * 1e3
    times.ms["assign_ms"] += spent_ms - (times.ms["insertion_ms"] - pricing_before)
    if picked is None:
        return None
    got = np.nonzero(picked.rider_of >= 0)[0]
    rider = picked.rider_of[got]
    ins = price(rider, got)
    return _Picks(
        rider=rider,
        order=got,
        pickup_pos=ins.pickup_pos.astype(np.int64),
        dropoff_pos=ins.dropoff_pos.astype(np.int64),
        cost=np.asarray(_adjusted(ins, got, orders.due, floor, w), np.float64),
        ever_feasible=picked.ever_feasible,
        stops=routes.n_stops[rider].astype(np.int64),
    )


#: Rider x order pairs below which a pass prices densely even on the host: the certified
#: pass's half-dozen compiled calls cost more than pricing a small round whole, and the MDRP
#: replay runs tens of thousands of such rounds a day.
CERTIFIED_MIN_PAIRS = 10_000


def _certifies(
    orders: OrderArrays, routes: RouteArrays, weights: DispatchWeights, dense: bool
) -> bool:
    """Whether a pass runs ``_pass_certified``: not asked to price densely, host arrays, a round
    of at least ``CERTIFIED_MIN_PAIRS`` pairs, every pair eligible, and the compiled builds
    loaded (while they load, the array loops price densely)."""
    return (
        not dense
        and routes.xp is np
        and routes.shape[0] * len(orders) >= CERTIFIED_MIN_PAIRS
        and weights.candidate_riders is None
        and not compiled.warming()
    )


def solve_round(
    arrays: RoundArrays,
    weights: DispatchWeights,
    *,
    etr_floor: Any = None,
    improve_routes: bool = True,
    checkpoint: Callable[[], None] | None = None,
    dense: bool = False,
) -> Assigned:
    """The solve stage: price, assign, insert, re-price and repeat (k passes), then improve.

    etr_floor : float32[O] earliest credible drop-off per order (seconds since now) from the
        ETR model, or None.
    checkpoint : called between steps (and between blocks of a big pricing, ``_price``); what
        it raises ends the solve (a replica whose caller has given up stops computing).
    dense : price every pair and solve the dense assignment on the host in every pass, on
        either backend (the reference the certified passes are held to; benchmarks run it
        side by side).
    Each pass gives the exact assignment of its open orders to its open riders: on the host
    by ``certified_assign`` (only the pairs that can win are priced), on a GPU by pricing every
    pair and sending the host the few that can win. ``candidate_riders`` restricts each order
    to its nearest riders instead (priced densely).
    Runs on the arrays' device; returns host NumPy (``Assigned``, its timings ``SOLVE_STEPS``).
    """
    routes, orders, owner = arrays.routes, arrays.orders, arrays.owner
    xp = routes.xp
    times = StageTimes(*SOLVE_STEPS, device=device_clock(xp))
    w = weights.late_weight
    base_travel, base_lateness = route_totals(routes)[1:]
    n_routes, n_orders = routes.shape[0], len(orders)
    floor_all = None if etr_floor is None else xp.asarray(etr_floor, dtype=xp.float32)
    rider_of = np.full(n_orders, -1, np.int64)
    assigned_cost = np.zeros(n_orders)
    ever_feasible = np.zeros(n_orders, bool)
    taken = np.zeros(n_routes, np.int64)
    for step in range(weights.max_orders_per_rider if n_routes else 0):
        open_orders = np.nonzero(rider_of < 0)[0]
        open_riders = np.nonzero(taken < weights.max_orders_per_rider)[0]
        if open_orders.size == 0 or open_riders.size == 0:
            break
        if checkpoint is not None:
            checkpoint()
        if step == 0:
            sub_routes, sub_orders, sub_floor = routes, orders, floor_all
        else:
            riders_at, orders_at = to_device([open_riders, open_orders], xp)
            sub_routes = routes.take(riders_at)
            sub_orders = orders.take(orders_at)
            sub_floor = None if floor_all is None else floor_all[orders_at]
        if weights.max_route_stops is not None:
            sub_routes = _full_routes_closed(sub_routes, weights.max_route_stops)
        picks = None
        if _certifies(sub_orders, sub_routes, weights, dense):
            picks = _pass_certified(sub_routes, sub_orders, sub_floor, weights, checkpoint, times)
        if picks is None:
            picks = _pass_dense(
                sub_routes, sub_orders, sub_floor, weights, checkpoint, times, reference=dense
            )
        ever_feasible[open_orders] |= picks.ever_feasible
        if picks.order.size == 0:
            break
        with times("insert_ms"):
            rows, order_idx = open_riders[picks.rider], open_orders[picks.order]
            assigned_cost[order_idx] = picks.cost
            # The picks cross to the device in one copy.
            at_rows, at_orders, pickup_pos, dropoff_pos, keys = to_device(
                [
                    rows,
                    order_idx,
                    picks.pickup_pos.astype(np.int32),
                    picks.dropoff_pos.astype(np.int32),
                    order_idx.astype(np.int32),
                ],
                xp,
            )
            routes, owner = insert_orders(
                routes,
                owner,
                at_rows,
                orders,
                pickup_pos,
                dropoff_pos,
                keys,
                n_slots=int(picks.stops.max()) + 2,
                order_index=at_orders,
            )
            rider_of[order_idx] = rows
            taken[rows] += 1
    changed = np.unique(rider_of[rider_of >= 0])
    if checkpoint is not None:
        checkpoint()
    (rows,) = to_device([changed], xp)
    with times("improve_ms"):
        if improve_routes and changed.size:
            routes, owner, _ = improve(routes, owner, late_weight=w, rows=rows)
    changed_routes = routes.take(rows)
    arrival, travel, lateness = route_totals(changed_routes)
    # The answer crosses to the host in one copy: the changed routes, their owners and
    # arrivals, and what they add (two device scalars, not two syncs).
    answer = to_host(
        [
            *changed_routes.arrays(),
            owner[rows],
            arrival,
            travel.sum() - base_travel[rows].sum(),
            lateness.sum() - base_lateness[rows].sum(),
        ],
        xp,
    )
    n_fields = len(answer) - 4
    return Assigned(
        rider_of=rider_of,
        cost=assigned_cost,
        ever_feasible=ever_feasible,
        changed=changed,
        routes=changed_routes.with_arrays(answer[:n_fields]),
        owner=answer[n_fields],
        arrival=answer[n_fields + 1],
        added_travel_s=float(answer[n_fields + 2]),
        added_lateness_s=float(answer[n_fields + 3]),
        timings_ms=times.ms,
        backend="numpy" if xp is np else "cupy",
    )


def etr_floor_seconds(created_at: np.ndarray, now: float, minutes: np.ndarray) -> np.ndarray:
    """float32[O]: each order's ``created_at`` (float64[O], seconds) + its ETR minutes, as
    seconds since ``now``."""
    created = np.asarray(created_at, np.float64).reshape(-1)
    return (created + 60.0 * np.asarray(minutes, np.float64) - now).astype(np.float32)


def dispatch_round(
    round_: DispatchRound,
    *,
    backend: str | None = None,
    improve_routes: bool = True,
    etr_minutes: np.ndarray | None = None,
    dense: bool = False,
) -> DispatchPlan:
    """Plan a round.

    backend : "numpy", "cupy", "auto" or None (``ORML_BACKEND``, default auto); "auto" keeps a
        round under ``ORML_GPU_MIN_PAIRS`` rider x order pairs on NumPy.
    improve_routes : relocate-improve the routes that received orders.
    etr_minutes : float[O] ETR predictions (minutes from creation to delivery) for the new
        orders; when given, each candidate's drop-off is priced no earlier than its prediction
        and the plan reports ``etr_arrival``.
    dense : solve every pass densely (``solve_round``), the reference.
    Returns a ``DispatchPlan``; every new order is assigned once or listed as unassigned.
    Raises RuntimeError if "cupy" is forced without a working GPU, ValueError if etr_minutes
    has the wrong length.
    """
    times = StageTimes()
    with times("total_ms"):
        with times("pack_ms"):
            # Only the library entry reads the process's settings (the served path never
            # comes here): importing them at module level would load them into the pipeline.
            from config import backend_for, get_settings

            name, settings = backend_for(backend), get_settings()
            chosen = backend_for_round(
                name, len(round_.riders), len(round_.orders), settings.gpu_min_pairs
            )
            xp = module_for(chosen)
            packed, arrays = round_arrays(round_)
            floor = None
            if etr_minutes is not None:
                if len(etr_minutes) != len(round_.orders):
                    raise ValueError(
                        f"etr_minutes has {len(etr_minutes)} values for {len(round_.orders)} orders"
                    )
                created = [o.created_at for o in round_.orders]
                floor = etr_floor_seconds(np.array(created), round_.now, etr_minutes)
        with times("solve_ms"):
            assigned = solve_round(
                arrays.to(xp),
                round_.weights,
                etr_floor=floor,
                improve_routes=improve_routes,
                dense=dense,
            )
        with times("unpack_ms"):
            plan = build_plan(packed, assigned, round_.weights.late_weight, floor)
    timings = {"pack_ms": times.ms["pack_ms"], "solve_ms": times.ms["solve_ms"]}
    timings |= assigned.timings_ms
    timings |= {"unpack_ms": times.ms["unpack_ms"], "total_ms": times.ms["total_ms"]}
    return replace(plan, timings_ms=timings)


def build_plan(
    packed: PackedRound,
    assigned: Assigned,
    late_weight: float,
    etr_floor: np.ndarray | None = None,
) -> DispatchPlan:
    """Turn the assignment stage's arrays back into domain types (``late_weight`` as the
    round's ``DispatchWeights``; ``etr_floor`` float32[O] seconds since now, or None)."""
    changed_routes, changed = assigned.routes, assigned.changed
    rider_of, assigned_cost = assigned.rider_of, assigned.cost
    now, rider_ids, order_ids = packed.now, packed.rider_ids, packed.order_ids
    new_ids = order_ids[: len(rider_of)]
    # Every stop of the changed routes at once, routes in order, slots in order: its order's id
    # by key, its kind, the arrival at drop-offs; the routes are those columns, cut by offsets
    # (``RouteTable`` builds a rider's ``Stop`` objects only when asked for them).
    n_stops = changed_routes.n_stops.astype(np.int64)
    filled = np.arange(assigned.owner.shape[1])[None, :] < n_stops[:, None]
    keys = assigned.owner[filled]
    at_pickup = changed_routes.stop_load[filled] > 0
    ids = np.asarray(order_ids, dtype=object)
    new_routes = RouteTable(
        [rider_ids[r] for r in changed.tolist()],
        [0, *np.cumsum(n_stops).tolist()],
        ids[keys].tolist(),
        at_pickup.tolist(),
    )
    dropoff = ~at_pickup
    arrives = (now + assigned.arrival[filled][dropoff].astype(np.float64)).tolist()
    arrival = dict(zip(ids[keys[dropoff]].tolist(), arrives, strict=True))
    travel, late = assigned.added_travel_s, assigned.added_lateness_s
    riders_of = rider_of.tolist()
    assignments = tuple(
        Assignment(oid, rider_ids[riders_of[k]], float(assigned_cost[k]))
        for k, oid in enumerate(new_ids)
        if riders_of[k] >= 0
    )
    unassigned = []
    for k, oid in enumerate(new_ids):
        if riders_of[k] >= 0:
            continue
        if not rider_ids:
            reason = UnassignedReason.NO_RIDERS
        elif assigned.ever_feasible[k]:
            reason = UnassignedReason.RIDER_LIMIT
        else:
            reason = UnassignedReason.INFEASIBLE
        unassigned.append(Unassigned(oid, reason))
    return DispatchPlan(
        assignments=assignments,
        routes=new_routes,
        predicted_arrival=arrival,
        cost=CostBreakdown(travel_s=travel, lateness_s=late, total=travel + late_weight * late),
        unassigned=tuple(unassigned),
        backend=assigned.backend,
        solved_by=assigned.solved_by,
        etr_arrival=(
            {}
            if etr_floor is None
            else {oid: now + float(etr_floor[k]) for k, oid in enumerate(new_ids)}
        ),
    )
