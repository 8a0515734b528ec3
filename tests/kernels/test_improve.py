"""improve: relocating orders never makes a route worse or infeasible, and keeps every stop."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kernels.improve import improve, route_cost
from kernels.schedule import schedule
from planner import generate_round, pack_round


def precedence_ok(routes, owner) -> bool:
    for r in range(routes.shape[0]):
        seen_drop = set()
        for q in range(int(routes.n_stops[r])):
            key = int(owner[r, q])
            if routes.stop_load[r, q] > 0 and key in seen_drop:
                return False
            if routes.stop_load[r, q] < 0:
                seen_drop.add(key)
    return True


@given(seed=st.integers(0, 10_000), w=st.sampled_from([0.0, 4.0]))
def test_improve_never_worse_never_infeasible(seed, w):
    packed = pack_round(generate_round(40, 0, seed=seed, route_stops=(2, 12)))
    owner = packed.owner
    before = route_cost(packed.routes, w)
    feasible_before = schedule(packed.routes).feasible
    routes, new_owner, _moves = improve(packed.routes, owner, late_weight=w)
    after = route_cost(routes, w)
    assert np.all(after <= before + 1e-3)
    assert np.all(schedule(routes).feasible | ~feasible_before)
    assert np.array_equal(routes.n_stops, packed.routes.n_stops)
    assert sorted(new_owner[new_owner >= 0].tolist()) == sorted(owner[owner >= 0].tolist())
    assert precedence_ok(routes, new_owner)


def test_improve_finds_moves_on_nearest_neighbour_routes():
    """Greedy routes leave room: some relocations should pay off."""
    packed = pack_round(generate_round(200, 0, seed=3, route_stops=(6, 12)))
    owner = packed.owner
    routes, _, moves = improve(packed.routes, owner, late_weight=4.0)
    assert moves > 0
    assert float(route_cost(routes, 4.0).sum()) < float(route_cost(packed.routes, 4.0).sum())
