"""A day of MDRP dispatch, replayed round by round through our dispatch (``dispatch_round``).

Discrete time in the instance's integer minutes. Every ``round_min`` minutes the orders placed
and not yet committed, and the couriers that are (or soon will be) on shift with time left to
pick up, become a ``DispatchRound``: a courier is a rider at the place and time it will be free
(MDRP couriers cannot be diverted, so only their last drop-off and its time matter); an order
is due at the earliest arrival at its door still possible (a courier waiting at the restaurant
when the food is ready, or leaving now if that has passed), so the dispatch prices each
assignment by the minutes of click-to-door it adds (``late_weight`` minutes of driving each).
The round states MDRP's clock in the dispatch's terms (``_order``): MDRP's pickup is the middle
of the pickup service, so the dispatch's service may start half a service before the food is
ready; lateness counts at the door, before the drop-off service. Up to
``max_bundle`` orders per courier per plan; the MDRP's one-restaurant bundles are formed at
commitment.

What a decision becomes is ``ReplayPolicy``'s, and only what must be final now is made final:

* **Commit late.** A courier's most urgent planned order is committed only when the courier
  is free now and must leave within this round to reach the restaurant by the food's ready
  time (or the food is ready); with couriers short, ``short_commit_min`` earlier (a courier
  held idle for a later order is re-planned round after round while orders queue; measured,
  3 min pays, see docs/mdrp.md). Otherwise the order stays open: the next round may find a
  better courier (one finishing a drop-off nearby) or a bundle partner, and the courier stays
  free for other orders.
* **Prepositioning** (the paper's allowed variant). A courier free now, at a customer or its
  start and planned for nothing, is sent to the restaurant within ``reposition_min`` whose
  orders of the last ``demand_window_min`` (the day's past only) per courier already there
  or on the way are most; it waits there, and the round sees it at the restaurant from its
  arrival. A move is never cut short: MDRP couriers are not diverted.
* **Plans sampled within the round's budget.** The round is planned under up to ``plans``
  weight variants (``plan_variants``: other late weights, one or two orders per courier,
  wider or narrower candidate sets), stopping at ``round_budget_ms``. Plans that make
  different decisions now are judged by **rollouts** (``rollout_min``, 5): a copy of the day
  commits each and replays the next minutes on the orders placed so far, one plan a round;
  the plan whose open orders reach their doors earliest, in sum, is executed (without
  rollouts, the one whose schedule costs least on MDRP's own clock, ``_plan_cost``). One
  dispatch call per variant and per rollout round: each plan is the dispatch's, the choice
  between them the replay's. Rollouts buy a shorter click-to-door for a few times the replay's
  time (``bench/mdrp.py``; the figures are in docs/mdrp.md).
* **Bundle one restaurant's orders when it pays.** A committed order takes along open orders
  of its restaurant whose food is ready by the pickup (plus ``bundle_wait_min``), one at a time,
  while the bundle gains: a mate joins when the minutes it gains (its drop-off in the bundle
  against its drop-off in the round's plan: the courier the plan gave it, or, unplanned, the
  earliest still possible plus ``UNPLANNED_MIN``), plus ``courier_worth_min`` when the round's
  plan leaves some order late (the courier the mate no longer needs is worth that much), exceed
  the minutes it adds to the bundle's orders, none of which it may delay by more than
  ``bundle_delay_min``. Drop-offs nearest first. (The rule before took mates whenever couriers
  were short by a count of open orders against free couriers, which was true through most of
  a busy lunch on days with couriers to spare: docs/mdrp.md.)
* **Shifts.** No pickup after a courier's off time: a courier is offered only while
  ``shift_margin_min`` is left, and one whose pickup would fall after its off time is left
  out and the round planned again without it.
* **Sunk lateness.** Each round re-bases an order's due time on what is still possible, so an
  order that has waited costs no more to assign than a fresh one (priced against its original
  promise, a waiting order is the dearest to assign, and with couriers short the assignment
  would leave it out round after round).

Travel in the decisions is the dispatch model's (straight line at the instance's speed); the
simulation itself uses MDRP's exact rule (ceil of distance / speed, whole minutes). The ETR
model is not used (``etr_floor`` off): in MDRP the delivery time is the schedule's, known
exactly, and the model was trained on another market's deliveries.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from domain import DispatchRound, DispatchWeights, LatLng, Order, Rider, bounds
from domain.geo import EARTH_RADIUS_M
from planner.dispatch_round import dispatch_round
from planner.mdrp.instance import Courier, MdrpInstance, MdrpOrder, Restaurant

_DEG_PER_M = 180.0 / (math.pi * EARTH_RADIUS_M)
SHIFT_RETRIES = 3
UNPLANNED_MIN = 10.0  # late minutes an order the plan leaves open is priced at (_plan_cost)
#: (candidate riders, orders per courier (None: max_bundle), late-weight factor), in the order
#: ``plan_variants`` tries them: the cheapest changes to the plain plan first.
VARIANT_GRID: tuple[tuple[int | str | None, int | None, float], ...] = tuple(
    (cand, per_rider, factor)
    for cand in ("same", None, 16)
    for per_rider in (None, 1, 2)
    for factor in (1.0, 2.0, 0.5, 4.0, 0.25)
    if (cand, per_rider, factor) != ("same", None, 1.0)
)
#: No hard limit within a day: the most the served API accepts, so a served replay plans alike.
NO_HARD_LATENESS_S = bounds.MAX_LATENESS_S[1]


def _latlng(x: float, y: float) -> LatLng:
    # MDRP positions are metres on a plane; about (0, 0) the round's local projection maps these
    # degrees back to the same metres (to ~1e-5 relative), so distances are the instance's.
    return LatLng(y * _DEG_PER_M, x * _DEG_PER_M)


@dataclass(frozen=True)
class ReplayPolicy:
    """round_min : minutes between rounds; late_weight : minutes of driving one minute of
    added click-to-door is worth; max_bundle : orders per bundle (and planned per courier), at
    most; bundle_wait_min : how long past the planned pickup a mate's food may be ready;
    bundle_delay_min : how much a mate may delay each order of a bundle, at most;
    courier_worth_min : what a courier a bundle frees is worth, in minutes of click-to-door,
    in a round whose plan leaves some order late (see the module docstring);
    shift_margin_min : a courier is offered only with this long left before its off time;
    lookahead_min : a courier coming on shift this soon is offered already (it can be held
    for); candidate_riders : each order priced against its nearest K couriers (None: all);
    rebase_promise : due times re-based each round (see the module docstring);
    reposition_min : an idle courier is sent to a restaurant at most this far (0: never);
    demand_window_min : how far back a restaurant's orders count for prepositioning;
    short_commit_min : with couriers short, commit this much before the courier must leave;
    plans : weight variants the round is planned under, at most (1: the plain dispatch);
    rollout_min : judge each variant's plan by replaying the next this many minutes from the
    state it leaves (the orders placed so far only, one plan a round) instead of by
    ``_plan_cost`` (0: no rollouts; see ``_rollout_cost`` and ``_Rollouts``);
    round_budget_ms : stop planning variants once this much wall time is spent in a round
    (None: no limit; at least one plan always; decisions then depend on the machine's speed,
    so a served replay equals the in-process one only without it)."""

    round_min: int = 1
    late_weight: float = 4.0
    max_bundle: int = 3
    bundle_wait_min: int = 0
    shift_margin_min: int = 5
    lookahead_min: int = 10
    candidate_riders: int | None = 48
    rebase_promise: bool = True
    bundle_delay_min: float = 10.0
    courier_worth_min: float = 7.0
    reposition_min: int = 20
    demand_window_min: int = 60
    short_commit_min: int = 3
    plans: int = 5
    rollout_min: int = 5
    round_budget_ms: float | None = None

    def __post_init__(self) -> None:
        if self.round_min < 1:
            raise ValueError(f"round_min must be >= 1, got {self.round_min}")
        if self.max_bundle < 1:
            raise ValueError(f"max_bundle must be >= 1, got {self.max_bundle}")
        if self.plans < 1:
            raise ValueError(f"plans must be >= 1, got {self.plans}")
        if self.round_budget_ms is not None and not self.round_budget_ms > 0:
            raise ValueError(f"round_budget_ms must be > 0, got {self.round_budget_ms}")
        if self.reposition_min < 0 or self.short_commit_min < 0 or self.rollout_min < 0:
            raise ValueError("reposition_min, short_commit_min and rollout_min must be >= 0")


@dataclass
class CourierState:
    courier: Courier
    place: str  # "0" (its start), a restaurant id or an order id (that order's customer)
    x: float
    y: float
    free_at: int  # minute it can leave ``place``


@dataclass(frozen=True)
class Bundle:
    """One instruction: ``courier`` picks up ``orders`` (drop-off order) at ``restaurant``."""

    assigned_at: int
    courier: str
    restaurant: str
    orders: tuple[str, ...]
    pickup: int
    dropoffs: tuple[int, ...]


@dataclass(frozen=True)
class Move:
    courier: str
    depart: int
    origin: str
    destination: str


@dataclass
class Replay:
    """What a replayed day decided: bundles and moves in time order, undelivered order ids."""

    instance: str
    bundles: list[Bundle] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    undelivered: list[str] = field(default_factory=list)
    rounds: int = 0
    plans: int = 0  # dispatch calls (a round plans again without couriers past their shift)
    rollouts: int = 0  # rollouts run (one per thing a round's plans do now)
    rollout_plans: int = 0  # the rollouts' dispatch calls (counted in plans too)
    dispatch_ms: float = 0.0
    plan_ms: list[float] = field(default_factory=list)  # per plan: every variant, the pricing


#: A round's decision maker: the in-process ``dispatch_round`` or a served endpoint's client.
#: One that waits for a round's time (a paced client) offers ``unpaced``, the same decisions
#: at once: a rollout's rounds are at minutes still to come and must not wait for them. One
#: whose calls wait on I/O (a served client) offers ``many(rounds) -> plans``, the rounds
#: decided side by side: a round's variants are then sent at once and its rollouts run side
#: by side, the decisions unchanged (without ``round_budget_ms``: a budget stops variants as
#: they come).
Decide = Callable[[DispatchRound], dict[str, str]]


def decide_in_process(round_: DispatchRound) -> dict[str, str]:
    """order id -> rider id, from ``dispatch_round`` on the NumPy backend."""
    plan = dispatch_round(round_, backend="numpy", improve_routes=False)
    return {a.order_id: a.rider_id for a in plan.assignments}


class DaySimulator:
    """Replays ``instance`` under ``policy``; ``decide`` plans each round."""

    def __init__(
        self,
        instance: MdrpInstance,
        policy: ReplayPolicy = ReplayPolicy(),
        decide: Decide = decide_in_process,
    ) -> None:
        self.inst, self.policy, self.decide = instance, policy, decide
        p = instance.params
        self.half_pickup, self.half_dropoff = p.pickup_service / 2, p.dropoff_service / 2
        self.speed_mps = p.meters_per_minute / 60.0
        self.couriers = {c.id: CourierState(c, "0", c.x, c.y, c.on) for c in instance.couriers}
        self.orders = {o.id: o for o in instance.orders}
        self._domain_orders = {o.id: self._order(o) for o in instance.orders}
        self._short = False  # this round has more open orders than free couriers
        self._placed: list[MdrpOrder] = []  # orders seen so far, by placement time
        self._planned: set[str] = set()  # couriers this round's plan holds an order for
        self._drop_in_plan: dict[str, float] = {}  # see _plan_drops
        self._plan_late = False

    def travel(self, a: tuple[float, float], b: tuple[float, float]) -> int:
        return self.inst.travel_minutes(a, b)

    def _order(self, o: MdrpOrder) -> Order:
        r = self.inst.restaurants[o.restaurant]
        return Order(
            id=o.id,
            pickup=_latlng(r.x, r.y),
            dropoff=_latlng(o.x, o.y),
            created_at=o.placed * 60.0,
            # The dispatch starts a pickup's service once the food is ready; MDRP picks up at
            # the service's middle, so its service may start half a service earlier. Given
            # MDRP's ready time, the dispatch saw a courier on time leave half a service later
            # than it does and a late one exactly: it underrated lateness (docs/mdrp.md).
            ready_at=(o.ready - self.half_pickup) * 60.0,
            promised_at=self._earliest_arrival(o) * 60.0,
            pickup_service_s=self.inst.params.pickup_service * 60.0,
            dropoff_service_s=self.inst.params.dropoff_service * 60.0,
        )

    def _due_now(self, order: Order, t: int) -> Order:
        """The order as round ``t`` prices it: due at the earliest arrival still possible.

        Lateness already built up is sunk: priced against the original promise, an order that
        has waited would cost more to assign than a fresh one whatever courier takes it, and
        with couriers short (the assignment leaves the dearest orders out) it would keep
        waiting: starvation. Re-based, every order is priced by the delay a courier adds."""
        if not self.policy.rebase_promise:
            return order
        ride = order.promised_at - order.ready_at  # pickup service + ride + half a drop-off
        due = max(order.promised_at, t * 60.0 + ride)
        return order if due == order.promised_at else replace(order, promised_at=due)

    def _earliest_arrival(self, o: MdrpOrder) -> float:
        """The minute a courier waiting at the restaurant when the food is ready reaches the door
        (before the drop-off service), on the dispatch's clock (straight-line travel, not
        rounded up): due then, every minute later is a minute of click-to-door the plan added,
        priced at ``late_weight`` minutes of driving. Lateness counted at the door, as the
        dispatch measures it (counted after the drop-off service, every plan had half a
        service of free lateness, and a late courier looked 2 min better than it was)."""
        r = self.inst.restaurants[o.restaurant]
        ride = math.hypot(r.x - o.x, r.y - o.y) / self.inst.params.meters_per_minute
        return o.ready + self.half_pickup + ride

    def run(self, progress: Callable[[int, int], None] | None = None) -> Replay:
        inst, policy = self.inst, self.policy
        out = Replay(inst.name)
        pending = list(inst.orders)  # by placement time
        open_: dict[str, MdrpOrder] = {}
        last_off = max(c.off for c in inst.couriers)
        t = min((o.placed for o in inst.orders), default=0)
        nxt = 0
        while t <= last_off and (nxt < len(pending) or open_):
            while nxt < len(pending) and pending[nxt].placed <= t:
                open_[pending[nxt].id] = pending[nxt]
                self._placed.append(pending[nxt])
                nxt += 1
            if open_:
                self._round(t, open_, out)
                out.rounds += 1
            if policy.reposition_min:
                self._reposition(t, out)
            self._planned.clear()
            if progress is not None:
                progress(t, last_off)
            t += policy.round_min
            if not open_ and nxt < len(pending):
                t = max(t, pending[nxt].placed)  # nothing to decide until the next order
        out.undelivered = sorted(open_) + [o.id for o in pending[nxt:]]
        out.bundles.sort(key=lambda b: (b.assigned_at, b.courier))
        return out

    # ---- one round ------------------------------------------------------------------------
    def _riders(self, t: int) -> list[Rider]:
        policy = self.policy
        riders = []
        for s in self.couriers.values():
            c = s.courier
            start = max(t, s.free_at, c.on)
            if c.on > t + policy.lookahead_min or c.off - start < policy.shift_margin_min:
                continue
            riders.append(
                Rider(
                    id=c.id,
                    position=_latlng(s.x, s.y),
                    speed_mps=self.speed_mps,
                    capacity=float(policy.max_bundle),
                    available_at=start * 60.0 if start > t else None,
                )
            )
        return riders

    def _reposition(self, t: int, out: Replay) -> None:
        """Send each idle courier (free now, not at a restaurant) to the restaurant within
        ``reposition_min`` whose recent orders per courier already there is highest."""
        recent: dict[str, int] = {}
        since = t - self.policy.demand_window_min
        for o in reversed(self._placed):
            if o.placed < since:
                break
            recent[o.restaurant] = recent.get(o.restaurant, 0) + 1
        if not recent:
            return
        supply: dict[str, int] = {}
        idle = []
        for s in self.couriers.values():
            if s.place in self.inst.restaurants:
                supply[s.place] = supply.get(s.place, 0) + 1
            elif (
                s.free_at <= t
                and s.courier.on <= t
                and s.courier.id not in self._planned
                and s.courier.off - t > self.policy.shift_margin_min + self.policy.reposition_min
            ):
                idle.append(s)
        for s in idle:
            best, best_key = None, None
            for rid, n in recent.items():
                r = self.inst.restaurants[rid]
                minutes = self.travel((s.x, s.y), (r.x, r.y))
                if minutes > self.policy.reposition_min:
                    continue
                key = (n / (1 + supply.get(rid, 0)), -minutes, rid)
                if best_key is None or key > best_key:
                    best, best_key = r, key
            if best is None:
                continue
            minutes = self.travel((s.x, s.y), (best.x, best.y))
            out.moves.append(Move(s.courier.id, t, s.place, best.id))
            s.place, s.x, s.y, s.free_at = best.id, best.x, best.y, t + minutes
            supply[best.id] = supply.get(best.id, 0) + 1

    def _round(self, t: int, open_: dict[str, MdrpOrder], out: Replay) -> None:
        # The dispatch does not know shift ends: a courier it picks that would reach the
        # restaurant after its off time is left out and the round planned again without it
        # (else the order would be held for that courier round after round).
        excluded: set[str] = set()
        for _ in range(SHIFT_RETRIES):
            riders = [r for r in self._riders(t) if r.id not in excluded]
            if not riders or not open_:
                return
            late = self._plan_and_commit(t, riders, open_, out)
            if not late:
                return
            excluded |= late

    def _plan_and_commit(
        self, t: int, riders: list[Rider], open_: dict[str, MdrpOrder], out: Replay
    ) -> set[str]:
        """One plan of round ``t``; commits what must be final now. Returns the couriers whose
        pickup would fall after their shift."""
        self._short = len(open_) > sum(r.available_at is None for r in riders)
        weights = DispatchWeights(
            late_weight=self.policy.late_weight,
            max_lateness_s=NO_HARD_LATENESS_S,
            max_orders_per_rider=self.policy.max_bundle,
            candidate_riders=self.policy.candidate_riders,
            etr_floor=False,  # travel here is exact geometry; see docs/mdrp.md
        )
        round_ = DispatchRound(
            now=t * 60.0,
            riders=tuple(riders),
            orders=tuple(self._due_now(self._domain_orders[oid], t) for oid in open_),
            weights=weights,
        )
        chosen = self._best_plan(t, round_, open_, out)
        return self._commit_plan(t, round_, chosen, open_, out)

    def _commit_plan(
        self,
        t: int,
        round_: DispatchRound,
        chosen: dict[str, str],
        open_: dict[str, MdrpOrder],
        out: Replay,
    ) -> set[str]:
        """Make final what ``chosen`` (order id -> courier id) needs final at ``t``; the
        couriers whose pickup would fall after their shift."""
        self._planned |= set(chosen.values())
        self._plan_drops(t, round_, chosen, open_)
        planned: dict[str, list[MdrpOrder]] = {}
        for oid, cid in chosen.items():
            if oid in open_:
                planned.setdefault(cid, []).append(open_[oid])
        # Per courier, its most urgent order leads; the courier whose lead's food is ready
        # first commits (and bundles) first.
        leads = {cid: min(orders, key=lambda o: (o.ready, o.id)) for cid, orders in planned.items()}
        late: set[str] = set()
        for cid in sorted(leads, key=lambda c: (leads[c].ready, leads[c].id)):
            lead = leads[cid]
            if lead.id not in open_:  # taken along in an earlier bundle of this round
                continue
            if self._maybe_commit(t, lead, self.couriers[cid], open_, out) == "late":
                late.add(cid)
        return late

    def _best_plan(
        self, t: int, round_: DispatchRound, open_: dict[str, MdrpOrder], out: Replay
    ) -> dict[str, str]:
        """The round planned under up to ``plans`` variants of its weights (``plan_variants``),
        within ``round_budget_ms``; the plan whose schedule ``_plan_cost`` (or a rollout) prices
        lowest wins (the first on a tie: one plan is the plain dispatch).

        Variants often agree (on a half-size day three rounds in four get one plan from all
        five): a plan seen before is not priced again, and one that no other plan differs from
        is not priced at all. Both only skip work: a repeated plan costs the same, so it never
        wins a tie it lost."""
        distinct: list[dict[str, str]] = []
        best: dict[str, str] = {}
        best_cost = math.inf
        start = time.perf_counter()
        # _plan_cost's drop-offs are MDRP's (after half the service): so are the due times.
        due_min = {o.id: o.promised_at / 60.0 + self.half_dropoff for o in round_.orders}
        budget_s = (
            None if self.policy.round_budget_ms is None else self.policy.round_budget_ms / 1e3
        )
        judge = _Rollouts(self, t, round_, open_, due_min, out) if self.policy.rollout_min else None

        def price(chosen: dict[str, str]) -> float:
            if judge is not None:
                return judge.cost(chosen)
            return self._plan_cost(t, chosen, open_, due_min)

        variants = plan_variants(round_.weights, self.policy.plans)
        many = getattr(self.decide, "many", None) if budget_s is None else None
        if many is not None:  # side by side (see Decide); the loop below then only chooses
            t0 = time.perf_counter()
            answers = many([round_, *(replace(round_, weights=w) for w in variants[1:])])
            out.dispatch_ms += (time.perf_counter() - t0) * 1e3
            if judge is not None:
                judge.roll_out_side_by_side(answers)
        for k, weights in enumerate(variants):
            if k and budget_s is not None and time.perf_counter() - start >= budget_s:
                break
            if many is not None:
                chosen = answers[k]
            else:
                t0 = time.perf_counter()
                chosen = self.decide(replace(round_, weights=weights) if k else round_)
                out.dispatch_ms += (time.perf_counter() - t0) * 1e3
            out.plans += 1
            if chosen in distinct:
                continue
            if judge is not None and not judge.differs(chosen):
                continue  # does now what the first plan does: the same day follows
            distinct.append(chosen)
            if len(distinct) == 1:
                continue  # priced once another plan differs from it
            if len(distinct) == 2:
                best, best_cost = distinct[0], price(distinct[0])
            cost = price(chosen)
            if cost < best_cost - 1e-9:
                best, best_cost = chosen, cost
        out.plan_ms.append((time.perf_counter() - start) * 1e3)
        return best if len(distinct) > 1 else distinct[0]

    def _commit_on_fork(
        self, t: int, round_: DispatchRound, chosen: dict[str, str], open_: dict[str, MdrpOrder]
    ) -> tuple[DaySimulator, dict[str, MdrpOrder], Replay, tuple]:
        """A copy of the day with ``chosen`` committed at ``t`` and its idle couriers
        prepositioned: (the copy, its open orders, what it made final, the signature of what
        ``chosen`` does now). The signature is all of ``chosen`` the rest of the day can see:
        the bundles and moves made final (prepositioning's among them: the couriers a plan
        holds stay where they are) and the couriers it found past their shift (the round
        plans again without them). The copy forgets the plan's expected drop-offs, so what
        follows depends on the signature alone."""
        fork = self._fork()
        still_open, seen = dict(open_), Replay(self.inst.name)
        late = fork._commit_plan(t, round_, chosen, still_open, seen)
        if self.policy.reposition_min:
            fork._reposition(t, seen)
        fork._planned.clear()
        fork._drop_in_plan = {}
        return fork, still_open, seen, (tuple(seen.bundles), tuple(seen.moves), frozenset(late))

    def _rollout_cost(
        self,
        t: int,
        committed: tuple[DaySimulator, dict[str, MdrpOrder], Replay],
        due_min: dict[str, float],
        out: Replay,
    ) -> float:
        """A plan judged by what follows it: the copy of the day that committed it
        (``_commit_on_fork``) replays the next ``rollout_min`` minutes under the policy with
        one plan a round and no rollouts, knowing only the orders placed by ``t`` (the day's
        future is never looked at). Returns the minutes past the earliest still possible
        (``due_min``) summed over the orders open now: at their drop-off where the copy made
        one, else at the drop-off the copy's last plan expected (unplanned, or no round
        planned after ``t``: ``UNPLANNED_MIN`` late). The copy's dispatch calls count in
        ``out.plans``."""
        cost, seen = self._roll_out(t, committed, due_min)
        self._count_rollout(seen, out)
        return cost

    @staticmethod
    def _count_rollout(seen: Replay, out: Replay) -> None:
        out.rollouts += 1
        out.plans += seen.plans
        out.rollout_plans += seen.plans
        out.dispatch_ms += seen.dispatch_ms

    def _roll_out(
        self,
        t: int,
        committed: tuple[DaySimulator, dict[str, MdrpOrder], Replay],
        due_min: dict[str, float],
    ) -> tuple[float, Replay]:
        """``_rollout_cost``'s cost and what the copy did, touching nothing but the copy (so
        rollouts of one round may run side by side)."""
        fork, still_open, seen = committed
        step, end = self.policy.round_min, t + self.policy.rollout_min
        for now in range(t + step, end + 1, step):
            if still_open:
                fork._round(now, still_open, seen)
            if self.policy.reposition_min:
                fork._reposition(now, seen)
            fork._planned.clear()
        drops = {o: d for b in seen.bundles for o, d in zip(b.orders, b.dropoffs, strict=True)}
        cost = 0.0
        for oid, due in due_min.items():
            if oid in drops:
                cost += drops[oid] - due
            else:
                cost += fork._drop_in_plan.get(oid, due + UNPLANNED_MIN) - due
        return cost, seen

    def _fork(self) -> DaySimulator:
        """This day as it stands, for a rollout: its couriers and plans copied, the instance
        and the orders seen so far shared (read only), the policy without variants or
        rollouts, and decisions made at once (``Decide``: a paced client's ``unpaced``)."""
        fork = copy.copy(self)
        fork.decide = getattr(self.decide, "unpaced", self.decide)
        fork.policy = replace(self.policy, plans=1, rollout_min=0, round_budget_ms=None)
        fork.couriers = {  # field by field: dataclasses.replace is slow on a rollout's hot path
            cid: CourierState(s.courier, s.place, s.x, s.y, s.free_at)
            for cid, s in self.couriers.items()
        }
        fork._planned = set(self._planned)
        fork._drop_in_plan = {}
        return fork

    def _plan_cost(
        self,
        t: int,
        chosen: dict[str, str],
        open_: dict[str, MdrpOrder],
        due_min: dict[str, float],
    ) -> float:
        """What a plan would cost, in minutes of driving, on MDRP's own clock and travel.

        Each courier does its planned orders one by one, the earliest-ready first, from where
        and when it is free: every minute an order's drop-off lands past the earliest still
        possible (``due_min``: the round's re-based due times, minutes) costs ``late_weight``,
        every minute driven one; an order left unplanned costs ``UNPLANNED_MIN`` late minutes
        (it waits at least a round for another chance). A bundle's shared pickup is not
        credited: the score ranks plans, it does not replay them."""
        w = self.policy.late_weight
        planned = self._plan_schedule(t, chosen, open_)
        cost = w * UNPLANNED_MIN * (len(open_) - len(planned))
        for oid, drop, driven in planned:
            cost += w * max(0.0, drop - due_min[oid]) + driven
        return cost

    def _plan_schedule(
        self, t: int, chosen: dict[str, str], open_: dict[str, MdrpOrder]
    ) -> list[tuple[str, float, int]]:
        """(order id, drop-off minute, minutes driven for it) per planned order, on MDRP's
        clock: each courier does its planned orders one by one, the earliest-ready first, from
        where and when it is free."""
        by_courier: dict[str, list[MdrpOrder]] = {}
        for oid, cid in chosen.items():
            if oid in open_:
                by_courier.setdefault(cid, []).append(open_[oid])
        out = []
        for cid, orders in by_courier.items():
            state = self.couriers[cid]
            when = max(t, state.free_at, state.courier.on)
            here = (state.x, state.y)
            for o in sorted(orders, key=lambda o: (o.ready, o.id)):
                rest = self.inst.restaurants[o.restaurant]
                to_rest = self.travel(here, (rest.x, rest.y))
                ride = self.travel((rest.x, rest.y), (o.x, o.y))
                pickup = max(o.ready, when + to_rest + self.half_pickup)
                drop = pickup + self.half_pickup + ride + self.half_dropoff
                out.append((o.id, drop, to_rest + ride))
                when, here = drop + self.half_dropoff, (o.x, o.y)
        return out

    def _plan_drops(
        self, t: int, round_: DispatchRound, chosen: dict[str, str], open_: dict[str, MdrpOrder]
    ) -> None:
        """What a bundle is weighed against: each open order's drop-off minute in the chosen
        plan (unplanned: the earliest still possible plus ``UNPLANNED_MIN``), and whether the
        plan leaves some order late (more than a minute past the earliest still possible)."""
        due = {o.id: o.promised_at / 60.0 + self.half_dropoff for o in round_.orders}
        self._drop_in_plan = {oid: d + UNPLANNED_MIN for oid, d in due.items()}
        self._drop_in_plan |= {oid: drop for oid, drop, _ in self._plan_schedule(t, chosen, open_)}
        self._plan_late = any(self._drop_in_plan[oid] > d + 1.0 for oid, d in due.items())

    def _maybe_commit(
        self,
        t: int,
        order: MdrpOrder,
        state: CourierState,
        open_: dict[str, MdrpOrder],
        out: Replay,
    ) -> str:
        """ "committed", "held" (decide again next round) or "late" (after the shift's end)."""
        c = state.courier
        if state.free_at > t or c.on > t:
            return "held"  # the courier is not free yet: the order may wait for it
        rest = self.inst.restaurants[order.restaurant]
        to_rest = self.travel((state.x, state.y), (rest.x, rest.y))
        early = self.policy.short_commit_min if self._short else 0
        if order.ready - to_rest - self.half_pickup > t + self.policy.round_min - 1 + early:
            return "held"  # no need to leave yet
        arrive = t + to_rest
        pickup = max(order.ready, arrive + self.half_pickup)
        if pickup > c.off:
            return "late"
        bundle = self._bundle(order, rest, pickup, open_)
        if max(self.orders[o].ready for o in bundle) > c.off:  # a mate's food: after the shift
            bundle = [order.id]
        pickup = max([pickup] + [self.orders[o].ready for o in bundle])
        here, when, drops, moves = (rest.x, rest.y), pickup + self.half_pickup, [], []
        if state.place != rest.id:  # a prepositioned courier waits there already
            moves.append(Move(c.id, t, state.place, rest.id))
        place = rest.id
        for oid in bundle:
            o = self.orders[oid]
            moves.append(Move(c.id, _minute(when), place, oid))
            arrive = when + self.travel(here, (o.x, o.y))
            drops.append(_minute(arrive + self.half_dropoff))
            when, here, place = arrive + 2 * self.half_dropoff, (o.x, o.y), oid
            del open_[oid]
        out.moves.extend(moves)
        out.bundles.append(Bundle(t, c.id, rest.id, tuple(bundle), _minute(pickup), tuple(drops)))
        state.place, (state.x, state.y), state.free_at = place, here, _minute(when)
        return "committed"

    def _bundle(
        self, first: MdrpOrder, rest: Restaurant, pickup: float, open_: dict[str, MdrpOrder]
    ) -> list[str]:
        """``first`` plus the open orders of its restaurant that pay for joining it (see the
        module docstring), in drop-off order. pickup : the planned pickup minute of ``first``."""
        xy = (rest.x, rest.y)
        worth = self.policy.courier_worth_min if self._plan_late else 0.0
        bundle = [first.id]
        mates = sorted(
            (
                o
                for o in open_.values()
                if o.restaurant == first.restaurant
                and o.id != first.id
                and o.ready <= pickup + self.policy.bundle_wait_min
            ),
            key=lambda o: (o.placed, o.id),
        )
        for mate in mates:
            if len(bundle) >= self.policy.max_bundle:
                break
            before = self._drops(bundle, xy, pickup)
            trial = self._drop_order([*bundle, mate.id], xy)
            after = self._drops(trial, xy, pickup)
            delays = [after[o] - before[o] for o in bundle]
            gain = self._drop_in_plan[mate.id] - after[mate.id]
            if max(delays) <= self.policy.bundle_delay_min and sum(delays) < gain + worth:
                bundle = trial
        return bundle

    def _drops(self, ids: list[str], start: tuple[float, float], pickup: float) -> dict[str, float]:
        """Drop-off minute of each of ``ids`` (in that order) picked up together at ``start``
        no earlier than ``pickup`` (and once every one's food is ready)."""
        when = max([pickup] + [self.orders[o].ready for o in ids]) + self.half_pickup
        here, out = start, {}
        for oid in ids:
            o = self.orders[oid]
            arrive = when + self.travel(here, (o.x, o.y))
            out[oid] = arrive + self.half_dropoff
            when, here = arrive + 2 * self.half_dropoff, (o.x, o.y)
        return out

    def _drop_order(self, ids: list[str], start: tuple[float, float]) -> list[str]:
        left, order, here = list(ids), [], start
        while left:
            best = min(
                left, key=lambda o: (self.travel(here, (self.orders[o].x, self.orders[o].y)), o)
            )
            order.append(best)
            left.remove(best)
            here = (self.orders[best].x, self.orders[best].y)
        return order


class _Rollouts:
    """One round's rollouts (``ReplayPolicy.rollout_min``). What a plan changes now is all a
    rollout sees of it: the bundles and moves it makes final, prepositioning's too (see
    ``DaySimulator._commit_on_fork``). Plans alike in that lead to the same copy of the day,
    so each such signature is rolled out once, and a plan that does now what the round's
    first plan does is not judged at all (the first wins ties): the day is the one rolling
    out every plan gives. Most distinct plans differ only in orders not due yet."""

    def __init__(
        self,
        day: DaySimulator,
        t: int,
        round_: DispatchRound,
        open_: dict[str, MdrpOrder],
        due_min: dict[str, float],
        out: Replay,
    ) -> None:
        self.day, self.t, self.round_, self.open_ = day, t, round_, open_
        self.due_min, self.out = due_min, out
        self._committed: dict[tuple, tuple] = {}  # a plan's items -> _commit_on_fork's answer
        self._first: tuple | None = None  # the round's first plan's signature
        self._costs: dict[tuple, float] = {}  # signature -> its rollout's cost

    def _commit(self, plan: dict[str, str]) -> tuple:
        key = tuple(sorted(plan.items()))
        if key not in self._committed:
            self._committed[key] = self.day._commit_on_fork(self.t, self.round_, plan, self.open_)
        return self._committed[key]

    def differs(self, plan: dict[str, str]) -> bool:
        """Whether ``plan`` does anything now that the round's first plan does not. The first
        plan asked about is that reference, and is kept."""
        signature = self._commit(plan)[3]
        if self._first is None:
            self._first = signature
            return True
        return signature != self._first

    def cost(self, plan: dict[str, str]) -> float:
        fork, still_open, seen, signature = self._commit(plan)
        if signature not in self._costs:
            self._costs[signature] = self.day._rollout_cost(
                self.t, (fork, still_open, seen), self.due_min, self.out
            )
        return self._costs[signature]

    def roll_out_side_by_side(self, plans: list[dict[str, str]]) -> None:
        """Run, side by side in threads, the rollouts ``cost`` will be asked for: one per
        signature of ``plans`` when they have two or more (for a decider whose calls wait on
        I/O; see ``Decide``). The costs and their accounting are the same as one by one."""
        signatures: dict[tuple, tuple] = {}
        for plan in plans:
            *committed, signature = self._commit(plan)
            signatures.setdefault(signature, tuple(committed))
        if len(signatures) < 2:
            return  # no plan differs from the first: none is priced
        todo = {sig: c for sig, c in signatures.items() if sig not in self._costs}
        if not todo:
            return
        with ThreadPoolExecutor(len(todo)) as pool:
            done = list(
                pool.map(lambda c: self.day._roll_out(self.t, c, self.due_min), todo.values())
            )
        for signature, (cost, seen) in zip(todo, done, strict=True):
            self._costs[signature] = cost
            self.day._count_rollout(seen, self.out)


def plan_variants(weights: DispatchWeights, n: int) -> list[DispatchWeights]:
    """The first ``n`` weight variants a round is planned under: ``weights`` itself, then late
    weights x2, x0.5, x4, x0.25, one order per courier, two, and the candidate set widened to
    every courier and narrowed to 16 (``VARIANT_GRID``), each combination once."""
    out = [weights]
    for cand, per_rider, factor in VARIANT_GRID:
        if len(out) >= n:
            break
        variant = replace(
            weights,
            late_weight=weights.late_weight * factor,
            max_orders_per_rider=min(
                per_rider or weights.max_orders_per_rider, weights.max_orders_per_rider
            ),
            candidate_riders=weights.candidate_riders if cand == "same" else cand,
        )
        if variant not in out:
            out.append(variant)
    return out[:n]


def _minute(t: float) -> int:
    # Service halves of odd service times are fractional; MDRP times are whole minutes.
    return math.ceil(t - 1e-9)


def replay(
    instance: MdrpInstance,
    policy: ReplayPolicy = ReplayPolicy(),
    decide: Decide = decide_in_process,
    progress: Callable[[int, int], None] | None = None,
) -> Replay:
    """Replay one day; see the module docstring. decide : plans a round (in process by
    default; ``ops.replay_client.ServedDecider`` sends it to a running app);
    progress(minute, last_minute) : called after every round."""
    return DaySimulator(instance, policy, decide).run(progress)
