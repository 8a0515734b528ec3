"""Which plan a replayed round executes: plans sampled within the round's budget, judged by
rollouts or by their schedule's cost. A policy object the day's clock
(``planner.mdrp.replay``) runs.

The round is planned under up to ``plans`` weight variants (``plan_variants``: other late
weights, one or two orders per courier, wider or narrower candidate sets) and once without
the orders whose food is ready later (``plan_rounds``), stopping at ``round_budget_ms``.
Plans that make different decisions now are judged by **rollouts** (``rollout_min``): a copy
of the day commits each and replays the next minutes on the orders placed so far, one plan a
round; the plan whose open orders reach their doors earliest, in sum, is executed (without
rollouts, the one whose schedule costs least on MDRP's own clock, ``PlanChoice.plan_cost``).
One dispatch call per variant and per rollout round: each plan is the dispatch's, the choice
between them the replay's. Rollouts buy a shorter click-to-door for a few times the replay's
time (``bench/mdrp.py``; the figures are in docs/mdrp.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

from domain import DispatchRound, DispatchWeights
from planner.mdrp.day import UNPLANNED_MIN, DayState, Replay
from planner.mdrp.instance import MdrpOrder

#: (candidate riders, orders per courier (None: max_bundle), late-weight factor), in the order
#: ``plan_variants`` tries them: the cheapest changes to the plain plan first.
VARIANT_GRID: tuple[tuple[int | str | None, int | None, float], ...] = tuple(
    (cand, per_rider, factor)
    for cand in ("same", None, 16)
    for per_rider in (None, 1, 2)
    for factor in (1.0, 2.0, 0.5, 4.0, 0.25)
    if (cand, per_rider, factor) != ("same", None, 1.0)
)

#: A fork's committed state: (the copy of the day's clock, its open orders, what it made final).
Committed = tuple[Any, dict[str, MdrpOrder], Replay]


class RollingClock(Protocol):
    """What plan choice needs of the day's clock (``planner.mdrp.replay.DayClock``)."""

    day: DayState
    decide: Callable[[DispatchRound], dict[str, str]]

    def commit_on_fork(
        self, t: int, round_: DispatchRound, chosen: dict[str, str], open_: dict[str, MdrpOrder]
    ) -> tuple[Any, dict[str, MdrpOrder], Replay, tuple]: ...

    def roll_out(
        self, t: int, committed: Committed, due_min: dict[str, float]
    ) -> tuple[float, Replay]: ...


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


def plan_rounds(round_: DispatchRound, plans: int, defer_min: int) -> list[DispatchRound]:
    """The rounds a round is planned as: itself, under its other ``plan_variants`` weights
    (``plans`` in all), and, where there is a choice (``plans`` > 1), the round without the
    orders whose food is ready more than ``defer_min`` minutes from now (0: never; only where
    that leaves some order out).

    The last one is the plan that leaves the best couriers to the food ready first: an order
    ready in 15 minutes planned now, for a courier it will not need for a while, can take
    that courier from an order ready in 2 (its plan is not final, but the nearer order's is
    made final on the courier the plan left it). Judged by the same rollouts as the others."""
    variants = plan_variants(round_.weights, plans)[1:]
    rounds = [round_, *(replace(round_, weights=w) for w in variants)]
    if plans > 1 and defer_min:
        soon = tuple(o for o in round_.orders if o.ready_at - round_.now <= 60 * defer_min)
        if len(soon) < len(round_.orders):
            rounds.append(replace(round_, orders=soon))
    return rounds


@dataclass(frozen=True)
class PlanChoice:
    """plans : weight variants a round is planned under, at most (1: the plain dispatch);
    rollout_min : judge each plan by replaying this many minutes from the state it leaves (0:
    by ``plan_cost``); round_budget_ms : stop planning variants once this much wall time is
    spent in a round (None: no limit); late_weight : minutes of driving one late minute is
    worth, in ``plan_cost``; defer_min : see ``plan_rounds``."""

    plans: int
    rollout_min: int
    round_budget_ms: float | None
    late_weight: float
    defer_min: int

    def choose(
        self,
        clock: RollingClock,
        t: int,
        round_: DispatchRound,
        open_: dict[str, MdrpOrder],
        out: Replay,
    ) -> dict[str, str]:
        """The round planned as ``plan_rounds`` says, within the budget; the plan whose
        schedule ``plan_cost`` (or a rollout) prices lowest wins (the first on a tie: one plan
        is the plain dispatch).

        Variants often agree (on a half-size day three rounds in four get one plan from all
        five): a plan seen before is not priced again, and one that no other plan differs from
        is not priced at all. Both only skip work: a repeated plan costs the same, so it never
        wins a tie it lost."""
        day = clock.day
        distinct: list[dict[str, str]] = []
        best: dict[str, str] = {}
        best_cost = math.inf
        start = time.perf_counter()
        # plan_cost's drop-offs are MDRP's (after half the service): so are the due times.
        due_min = day.due_minutes(round_)
        budget_s = None if self.round_budget_ms is None else self.round_budget_ms / 1e3
        judge = Rollouts(clock, t, round_, open_, due_min, out) if self.rollout_min else None

        def price(chosen: dict[str, str]) -> float:
            if judge is not None:
                return judge.cost(chosen)
            return self.plan_cost(day, t, chosen, open_, due_min)

        rounds = plan_rounds(round_, self.plans, self.defer_min)
        many = getattr(clock.decide, "many", None) if budget_s is None else None
        if many is not None:  # side by side (see Decide); the loop below then only chooses
            t0 = time.perf_counter()
            answers = many(rounds)
            out.dispatch_ms += (time.perf_counter() - t0) * 1e3
            if judge is not None:
                judge.roll_out_side_by_side(answers)
        for k, variant in enumerate(rounds):
            if k and budget_s is not None and time.perf_counter() - start >= budget_s:
                break
            if many is not None:
                chosen = answers[k]
            else:
                t0 = time.perf_counter()
                chosen = clock.decide(variant)
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

    def plan_cost(
        self,
        day: DayState,
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
        w = self.late_weight
        planned = day.plan_schedule(t, chosen, open_)
        cost = w * UNPLANNED_MIN * (len(open_) - len(planned))
        for oid, drop, driven in planned:
            cost += w * max(0.0, drop - due_min[oid]) + driven
        return cost


class Rollouts:
    """One round's rollouts (``PlanChoice.rollout_min``). What a plan changes now is all a
    rollout sees of it: the bundles and moves it makes final, prepositioning's too (see
    ``DayClock.commit_on_fork``). Plans alike in that lead to the same copy of the day, so
    each such signature is rolled out once, and a plan that does now what the round's first
    plan does is not judged at all (the first wins ties): the day is the one rolling out every
    plan gives. Most distinct plans differ only in orders not due yet."""

    def __init__(
        self,
        clock: RollingClock,
        t: int,
        round_: DispatchRound,
        open_: dict[str, MdrpOrder],
        due_min: dict[str, float],
        out: Replay,
    ) -> None:
        self.clock, self.t, self.round_, self.open_ = clock, t, round_, open_
        self.due_min, self.out = due_min, out
        self._committed: dict[tuple, tuple] = {}  # a plan's items -> commit_on_fork's answer
        self._first: tuple | None = None  # the round's first plan's signature
        self._costs: dict[tuple, float] = {}  # signature -> its rollout's cost

    def commit(self, plan: dict[str, str]) -> tuple:
        """``DayClock.commit_on_fork``'s answer for ``plan``, made once."""
        key = tuple(sorted(plan.items()))
        if key not in self._committed:
            self._committed[key] = self.clock.commit_on_fork(self.t, self.round_, plan, self.open_)
        return self._committed[key]

    def differs(self, plan: dict[str, str]) -> bool:
        """Whether ``plan`` does anything now that the round's first plan does not. The first
        plan asked about is that reference, and is kept."""
        signature = self.commit(plan)[3]
        if self._first is None:
            self._first = signature
            return True
        return signature != self._first

    def roll_out(self, committed: Committed) -> float:
        """The cost of one rollout from ``committed``, counted in the round's ``Replay``."""
        cost, seen = self.clock.roll_out(self.t, committed, self.due_min)
        self.out.count_rollout(seen)
        return cost

    def cost(self, plan: dict[str, str]) -> float:
        fork, still_open, seen, signature = self.commit(plan)
        if signature not in self._costs:
            self._costs[signature] = self.roll_out((fork, still_open, seen))
        return self._costs[signature]

    def roll_out_side_by_side(self, plans: list[dict[str, str]]) -> None:
        """Run, side by side in threads, the rollouts ``cost`` will be asked for: one per
        signature of ``plans`` when they have two or more (for a decider whose calls wait on
        I/O; see ``Decide``). The costs and their accounting are the same as one by one."""
        signatures: dict[tuple, tuple] = {}
        for plan in plans:
            *committed, signature = self.commit(plan)
            signatures.setdefault(signature, tuple(committed))
        if len(signatures) < 2:
            return  # no plan differs from the first: none is priced
        todo = {sig: c for sig, c in signatures.items() if sig not in self._costs}
        if not todo:
            return
        with ThreadPoolExecutor(len(todo)) as pool:
            done = list(
                pool.map(lambda c: self.clock.roll_out(self.t, c, self.due_min), todo.values())
            )
        for signature, (cost, seen) in zip(todo, done, strict=True):
            self._costs[signature] = cost
            self.out.count_rollout(seen)
