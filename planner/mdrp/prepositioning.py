"""Prepositioning (the MDRP paper's allowed variant): idle couriers sent where orders come.

A courier free now, at a customer or its start and held by no plan, is sent to the restaurant
within ``reach_min`` whose orders of the last ``demand_window_min`` (the day's past only) per
courier already there or on the way are most; it waits there, and the round sees it at the
restaurant from its arrival. A move is never cut short: MDRP couriers are not diverted.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.mdrp.day import DayState, Move, Replay


@dataclass(frozen=True)
class Prepositioning:
    """reach_min : an idle courier is sent to a restaurant at most this far; demand_window_min :
    how far back a restaurant's orders count; shift_margin_min : a courier needs this long
    left after the move."""

    reach_min: int
    demand_window_min: int
    shift_margin_min: int

    def move(self, day: DayState, t: int, out: Replay) -> None:
        """Send each idle courier (free now, not at a restaurant) to the restaurant within reach
        whose recent orders per courier already there is highest."""
        recent: dict[str, int] = {}
        since = t - self.demand_window_min
        for o in reversed(day.placed):
            if o.placed < since:
                break
            recent[o.restaurant] = recent.get(o.restaurant, 0) + 1
        if not recent:
            return
        supply: dict[str, int] = {}
        idle = []
        for s in day.couriers.values():
            if s.place in day.inst.restaurants:
                supply[s.place] = supply.get(s.place, 0) + 1
            elif (
                s.free_at <= t
                and s.courier.on <= t
                and s.courier.id not in day.planned
                and s.courier.off - t > self.shift_margin_min + self.reach_min
            ):
                idle.append(s)
        for s in idle:
            best, best_key = None, None
            for rid, n in recent.items():
                r = day.inst.restaurants[rid]
                minutes = day.travel((s.x, s.y), (r.x, r.y))
                if minutes > self.reach_min:
                    continue
                key = (n / (1 + supply.get(rid, 0)), -minutes, rid)
                if best_key is None or key > best_key:
                    best, best_key = r, key
            if best is None:
                continue
            minutes = day.travel((s.x, s.y), (best.x, best.y))
            out.moves.append(Move(s.courier.id, t, s.place, best.id))
            s.place, s.x, s.y, s.free_at = best.id, best.x, best.y, t + minutes
            supply[best.id] = supply.get(best.id, 0) + 1
