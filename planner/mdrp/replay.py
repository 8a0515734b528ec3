"""A day of MDRP dispatch, replayed round by round through our dispatch (``dispatch_round``).

Discrete time in the instance's integer minutes. ``DayClock`` runs the day: every
``round_min`` minutes the orders placed and not yet committed, and the couriers that are (or
soon will be) on shift with time left to pick up, become a ``DispatchRound``: a courier is a
rider at the place and time it will be free (MDRP couriers cannot be diverted, so only their
last drop-off and its time matter); an order is due at the earliest arrival at its door still
possible (a courier waiting at the restaurant when the food is ready, or leaving now if that
has passed), so the dispatch prices each assignment by the minutes of click-to-door it adds
(``late_weight`` minutes of driving each). MDRP's pickup is the middle of the pickup service,
so the dispatch's service may start half a service before the food is ready; lateness counts
at the door, before the drop-off service (``planner.mdrp.day``). Up to ``max_bundle`` orders
per courier per plan.

What a decision becomes is up to the policy objects the clock runs, each in its own module,
built from ``ReplayPolicy``'s settings; only what must be final now is made final:

* which plan a round executes (``plan_choice.PlanChoice``: weight variants within the round's
  budget, judged by rollouts of the next minutes);
* what it makes final (``commitment.LateCommitment``: commit late, and
  ``commitment.RestaurantBundling``: the MDRP's one-restaurant bundles, formed at commitment);
* where idle couriers wait (``prepositioning.Prepositioning``, the paper's allowed variant).

The clock itself keeps two rules:

* **Shifts.** No pickup after a courier's off time: a courier is offered only while
  ``shift_margin_min`` is left, and one whose pickup would fall after its off time is left
  out and the round planned again without it.
* **Sunk lateness.** Each round re-bases an order's due time on what is still possible
  (``DayState.due_now``), so an order that has waited costs no more to assign than a fresh
  one (priced against its original promise, a waiting order is the dearest to assign, and
  with couriers short the assignment would leave it out round after round).

Travel in the decisions is the dispatch model's (straight line at the instance's speed); the
simulation itself uses MDRP's exact rule (ceil of distance / speed, whole minutes). The ETR
model is not used (``etr_floor`` off): in MDRP the delivery time is the schedule's, known
exactly, and the model was trained on another market's deliveries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from domain import DispatchRound, DispatchWeights, Rider, bounds
from planner.dispatch_round import dispatch_round
from planner.mdrp.commitment import LateCommitment, RestaurantBundling
from planner.mdrp.day import UNPLANNED_MIN, DayState, Replay, latlng
from planner.mdrp.instance import MdrpInstance, MdrpOrder
from planner.mdrp.plan_choice import Committed, PlanChoice
from planner.mdrp.prepositioning import Prepositioning

SHIFT_RETRIES = 3
#: No hard limit within a day: the most the served API accepts, so a served replay plans alike.
NO_HARD_LATENESS_S = bounds.MAX_LATENESS_S[1]


@dataclass(frozen=True)
class ReplayPolicy:
    """round_min : minutes between rounds; late_weight : minutes of driving one minute of
    added click-to-door is worth; max_bundle : orders per bundle (and planned per courier), at
    most; bundle_wait_min : how long past the planned pickup a mate's food may be ready;
    bundle_delay_min : how much a mate may delay each order of a bundle, at most;
    courier_worth_min : what a courier a bundle frees is worth, in minutes of click-to-door,
    in a round whose plan leaves some order late (``commitment.RestaurantBundling``);
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
    ``PlanChoice.plan_cost`` (0: no rollouts; see ``plan_choice.Rollouts``);
    round_budget_ms : stop planning variants once this much wall time is spent in a round
    (None: no limit; at least one plan always; decisions then depend on the machine's speed,
    so a served replay equals the in-process one only without it); defer_min : where
    ``plans`` > 1, plan the round once more without the orders whose food is ready more than
    this many minutes from now (0: not; ``plan_choice.plan_rounds``)."""

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
    defer_min: int = 0

    def __post_init__(self) -> None:
        if self.round_min < 1:
            raise ValueError(f"round_min must be >= 1, got {self.round_min}")
        if self.max_bundle < 1:
            raise ValueError(f"max_bundle must be >= 1, got {self.max_bundle}")
        if self.plans < 1:
            raise ValueError(f"plans must be >= 1, got {self.plans}")
        if self.round_budget_ms is not None and not self.round_budget_ms > 0:
            raise ValueError(f"round_budget_ms must be > 0, got {self.round_budget_ms}")
        for name in ("reposition_min", "short_commit_min", "rollout_min", "defer_min"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


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


class DayClock:
    """Replays ``instance`` under ``policy``'s objects; ``decide`` plans each round.

    day : the ``DayState`` to run from (a fork's copy), else the day's start."""

    def __init__(
        self,
        instance: MdrpInstance,
        policy: ReplayPolicy = ReplayPolicy(),
        decide: Decide = decide_in_process,
        day: DayState | None = None,
    ) -> None:
        self.policy, self.decide = policy, decide
        self.day = DayState(instance) if day is None else day
        self.choice = PlanChoice(
            policy.plans,
            policy.rollout_min,
            policy.round_budget_ms,
            policy.late_weight,
            policy.defer_min,
        )
        self.commitment = LateCommitment(
            policy.round_min,
            policy.short_commit_min,
            RestaurantBundling(
                policy.max_bundle,
                policy.bundle_wait_min,
                policy.bundle_delay_min,
                policy.courier_worth_min,
            ),
        )
        self.prepositioning = (
            Prepositioning(policy.reposition_min, policy.demand_window_min, policy.shift_margin_min)
            if policy.reposition_min
            else None
        )

    def run(self, progress: Callable[[int, int], None] | None = None) -> Replay:
        inst, day = self.day.inst, self.day
        out = Replay(inst.name)
        pending = list(inst.orders)  # by placement time
        open_: dict[str, MdrpOrder] = {}
        last_off = max(c.off for c in inst.couriers)
        t = min((o.placed for o in inst.orders), default=0)
        nxt = 0
        while t <= last_off and (nxt < len(pending) or open_):
            while nxt < len(pending) and pending[nxt].placed <= t:
                open_[pending[nxt].id] = pending[nxt]
                day.placed.append(pending[nxt])
                nxt += 1
            if open_:
                self.round(t, open_, out)
                out.rounds += 1
            self._tick(t, out)
            if progress is not None:
                progress(t, last_off)
            t += self.policy.round_min
            if not open_ and nxt < len(pending):
                t = max(t, pending[nxt].placed)  # nothing to decide until the next order
        out.undelivered = sorted(open_) + [o.id for o in pending[nxt:]]
        out.bundles.sort(key=lambda b: (b.assigned_at, b.courier))
        return out

    def _tick(self, t: int, out: Replay) -> None:
        """The end of minute ``t``'s round: idle couriers prepositioned, the plan forgotten."""
        if self.prepositioning is not None:
            self.prepositioning.move(self.day, t, out)
        self.day.planned.clear()

    # ---- one round ------------------------------------------------------------------------
    def _riders(self, t: int) -> list[Rider]:
        policy = self.policy
        riders = []
        for s in self.day.couriers.values():
            c = s.courier
            start = max(t, s.free_at, c.on)
            if c.on > t + policy.lookahead_min or c.off - start < policy.shift_margin_min:
                continue
            riders.append(
                Rider(
                    id=c.id,
                    position=latlng(s.x, s.y),
                    speed_mps=self.day.speed_mps,
                    capacity=float(policy.max_bundle),
                    available_at=start * 60.0 if start > t else None,
                )
            )
        return riders

    def round(self, t: int, open_: dict[str, MdrpOrder], out: Replay) -> None:
        """Plan round ``t`` and make final what must be."""
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
        self.day.short = len(open_) > sum(r.available_at is None for r in riders)
        weights = DispatchWeights(
            late_weight=self.policy.late_weight,
            max_lateness_s=NO_HARD_LATENESS_S,
            max_orders_per_rider=self.policy.max_bundle,
            candidate_riders=self.policy.candidate_riders,
            etr_floor=False,  # travel here is exact geometry; see docs/mdrp.md
        )
        due = self.day.due_now if self.policy.rebase_promise else None
        round_ = DispatchRound(
            now=t * 60.0,
            riders=tuple(riders),
            orders=tuple(
                self.day.domain_orders[oid] if due is None else due(oid, t) for oid in open_
            ),
            weights=weights,
        )
        chosen = self.choice.choose(self, t, round_, open_, out)
        return self.commit_plan(t, round_, chosen, open_, out)

    def commit_plan(
        self,
        t: int,
        round_: DispatchRound,
        chosen: dict[str, str],
        open_: dict[str, MdrpOrder],
        out: Replay,
    ) -> set[str]:
        """Note ``chosen`` (order id -> courier id) on the day and make final what it needs
        final at ``t``; the couriers whose pickup would fall after their shift."""
        due_min = self.day.due_minutes(round_)
        self.day.note_plan(t, due_min, chosen, open_)
        return self.commitment.commit_plan(self.day, t, chosen, open_, out)

    # ---- rollouts (``plan_choice.Rollouts``) ----------------------------------------------
    def fork(self) -> DayClock:
        """This day as it stands, for a rollout: its state copied (``DayState.fork``), the
        policy without variants or rollouts, and decisions made at once (``Decide``: a paced
        client's ``unpaced``)."""
        return DayClock(
            self.day.inst,
            replace(self.policy, plans=1, rollout_min=0, round_budget_ms=None),
            getattr(self.decide, "unpaced", self.decide),
            self.day.fork(),
        )

    def commit_on_fork(
        self, t: int, round_: DispatchRound, chosen: dict[str, str], open_: dict[str, MdrpOrder]
    ) -> tuple[DayClock, dict[str, MdrpOrder], Replay, tuple]:
        """A copy of the day with ``chosen`` committed at ``t`` and its idle couriers
        prepositioned: (the copy, its open orders, what it made final, the signature of what
        ``chosen`` does now). The signature is all of ``chosen`` the rest of the day can see:
        the bundles and moves made final (prepositioning's among them: the couriers a plan
        holds stay where they are) and the couriers it found past their shift (the round
        plans again without them). The copy forgets the plan's expected drop-offs, so what
        follows depends on the signature alone."""
        fork = self.fork()
        still_open, seen = dict(open_), Replay(self.day.inst.name)
        late = fork.commit_plan(t, round_, chosen, still_open, seen)
        fork._tick(t, seen)
        fork.day.drop_in_plan = {}
        return fork, still_open, seen, (tuple(seen.bundles), tuple(seen.moves), frozenset(late))

    def roll_out(
        self, t: int, committed: Committed, due_min: dict[str, float]
    ) -> tuple[float, Replay]:
        """A plan judged by what follows it: the copy of the day that committed it
        (``commit_on_fork``) replays the next ``rollout_min`` minutes with one plan a round and
        no rollouts, knowing only the orders placed by ``t`` (the day's future is never looked
        at). Returns the minutes past the earliest still possible (``due_min``) summed over the
        orders open now: at their drop-off where the copy made one, else at the drop-off the
        copy's last plan expected (unplanned, or no round planned after ``t``:
        ``UNPLANNED_MIN`` late); and what the copy decided. Touches nothing but the copy, so
        rollouts of one round may run side by side."""
        fork, still_open, seen = committed
        step, end = self.policy.round_min, t + self.policy.rollout_min
        for now in range(t + step, end + 1, step):
            if still_open:
                fork.round(now, still_open, seen)
            fork._tick(now, seen)
        drops = {o: d for b in seen.bundles for o, d in zip(b.orders, b.dropoffs, strict=True)}
        cost = 0.0
        for oid, due in due_min.items():
            if oid in drops:
                cost += drops[oid] - due
            else:
                cost += fork.day.drop_in_plan.get(oid, due + UNPLANNED_MIN) - due
        return cost, seen


def replay(
    instance: MdrpInstance,
    policy: ReplayPolicy = ReplayPolicy(),
    decide: Decide = decide_in_process,
    progress: Callable[[int, int], None] | None = None,
) -> Replay:
    """Replay one day; see the module docstring. decide : plans a round (in process by
    default; ``ops.replay_client.ServedDecider`` sends it to a running app);
    progress(minute, last_minute) : called after every round."""
    return DayClock(instance, policy, decide).run(progress)
