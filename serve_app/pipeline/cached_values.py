"""What a value read from the shared cache must be to be served, per namespace.

Redis is shared, and whoever can write to it can write any value under any key (a seal,
``cache.seal``, stops forgeries; these checks stop everything else: values of another type,
shape or range, values left by another version of this code). A value that fails is a miss,
counted (``CacheStats.rejected``), and computed again; it never reaches an answer.

* ``etr`` (one feature row's prediction): a finite number of minutes in ``[0, MAX_MINUTES]``.
* ``etr-answer`` (a whole /v1/etr answer): its minutes, each as above, at most ``max_orders``
  of them, and the model version its key names.
* ``solve`` (a static solution): re-evaluated against the request's own instance
  (``planner.pdptw.evaluate``, which shares no code with the solver): every task id real and
  placed once, and vehicles, distance and feasibility what the routes give; only the timing
  is taken as stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from planner.pdptw.evaluate import evaluate
from planner.pdptw.instance import PdptwInstance

#: Minutes from creation to delivery a cached prediction may hold: one day.
MAX_MINUTES = 1440.0
SOLUTION_KEYS = frozenset(
    {"instance", "vehicles", "distance", "feasible", "seconds", "routes", "unassigned"}
)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def is_minutes(value: Any) -> bool:
    """A cached ``etr`` row."""
    return _is_number(value) and 0.0 <= value <= MAX_MINUTES


def etr_answer_check(version: str, orders: int) -> Callable[[Any], bool]:
    """The check of a cached ``etr-answer`` under ``version``'s key, for a request of
    ``orders`` orders: one minute per order."""

    def check(value: Any) -> bool:
        if not isinstance(value, dict) or set(value) != {"minutes", "model_version"}:
            return False
        minutes = value["minutes"]
        return (
            value["model_version"] == version
            and isinstance(minutes, list)
            and len(minutes) == orders
            and all(is_minutes(m) for m in minutes)
        )

    return check


def solution_check(instance: PdptwInstance) -> Callable[[Any], bool]:
    """The check of a cached ``solve`` value for ``instance``."""

    def check(value: Any) -> bool:
        if not isinstance(value, dict) or set(value) != SOLUTION_KEYS:
            return False
        routes, unassigned = value["routes"], value["unassigned"]
        if not (isinstance(routes, list) and all(isinstance(r, list) for r in routes)):
            return False
        if not isinstance(unassigned, list):
            return False
        tasks = [t for r in routes for t in r] + unassigned
        n = instance.n_tasks
        if not all(isinstance(t, int) and not isinstance(t, bool) and 0 < t <= n for t in tasks):
            return False
        if len(set(tasks)) != len(tasks):
            return False
        ev = evaluate(instance, routes)
        return (
            value["instance"] == instance.name
            and value["vehicles"] == ev.vehicles
            and _is_number(value["distance"])
            and math.isclose(value["distance"], ev.distance, rel_tol=1e-9, abs_tol=1e-6)
            and value["feasible"] is (ev.feasible and not unassigned)
            and _is_number(value["seconds"])
            and value["seconds"] >= 0
        )

    return check
