"""``pack_round`` against the dispatch rules it states, stop by stop (a unit: nothing runs)."""

from __future__ import annotations

import numpy as np
import pytest

from domain import StopKind
from planner import generate_round, pack_round


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_stop_carries_its_orders_fields_by_kind(seed):
    round_ = generate_round(40, 15, seed=seed, route_stops=(0, 9))
    packed = pack_round(round_)
    routes, now = packed.routes, round_.now
    carried = {o.id: o for r in round_.riders for o in r.orders}
    late = np.float32(round_.weights.max_lateness_s)
    assert any(r.picked_up for r in round_.riders)  # both kinds of stop are exercised
    for row, rider in enumerate(round_.riders):
        assert routes.n_stops[row] == len(rider.route.stops)
        assert routes.load0[row] == np.float32(rider.onboard_load)
        for slot, stop in enumerate(rider.route.stops):
            order = carried[packed.order_ids[packed.owner[row, slot]]]
            assert order.id == stop.order_id
            pickup = stop.kind is StopKind.PICKUP
            where = order.pickup if pickup else order.dropoff
            xy = packed.projection.to_xy(np.array([where.lat]), np.array([where.lng]))[0]
            assert np.array_equal(routes.stop_xy[row, slot], xy.astype(np.float32))
            if pickup:
                assert routes.stop_ready[row, slot] == np.float32(order.ready_at - now)
                assert routes.stop_due[row, slot] == np.inf
                assert routes.stop_service[row, slot] == np.float32(order.pickup_service_s)
                assert routes.stop_load[row, slot] == np.float32(order.size)
            else:
                due = np.float32(order.promised_at - now)
                assert routes.stop_ready[row, slot] == -np.inf
                assert routes.stop_due[row, slot] == due
                assert routes.stop_latest[row, slot] == due + late
                assert routes.stop_service[row, slot] == np.float32(order.dropoff_service_s)
                assert routes.stop_load[row, slot] == -np.float32(order.size)
        assert (packed.owner[row, len(rider.route.stops) :] == -1).all()
    carried_keys = packed.order_ids[len(round_.orders) :]
    assert sorted(carried_keys) == sorted(carried)  # each carried order, once
