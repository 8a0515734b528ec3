"""A fleet day's requests: a big city's dispatch zones, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.demand import City, make_arrivals
from fleet.scenario import load_scenario


@pytest.mark.parametrize(
    ("zone_rounds", "offsets"), [("burst", [0.0, 0.1, 0.2]), ("spread", [0.0, 10.0, 20.0])]
)
def test_a_city_of_three_zones_sends_its_rounds_together_or_spread_over_the_period(
    zone_rounds: str, offsets: list[float]
) -> None:
    scenario = load_scenario(
        overrides=[
            f"traffic.zone_rounds={zone_rounds}",
            "traffic.round_period_s=30",
            "traffic.max_round_orders=1000",
        ]
    )
    # 2500 orders at once: every round of the next 40 minutes sees three zones.
    city = City(0, "x", 1.0, 0.0, np.sort(np.linspace(0.0, 0.001, 2500)))
    arr = make_arrivals(scenario, [city], np.random.default_rng(0))
    rounds = np.sort(arr.t_s[arr.kind == 1])
    first = rounds[:3] - rounds[0]
    assert first == pytest.approx(offsets)
    # Each period starts the next three, the same way.
    assert rounds[3:6] - rounds[0] == pytest.approx(np.add(offsets, 30.0))


def test_zones_on_clocks_of_their_own_keep_their_phase_all_day() -> None:
    scenario = load_scenario(overrides=["traffic.zone_rounds=random", "traffic.round_period_s=30"])
    city = City(0, "x", 1.0, 0.0, np.sort(np.linspace(0.0, 0.001, 2500)))
    arr = make_arrivals(scenario, [city], np.random.default_rng(0))
    rounds = np.sort(arr.t_s[arr.kind == 1])
    start = rounds[0]
    phases = np.sort((rounds - start) % 30.0)
    # Three zones, each at one phase in every period: zone 0 on the tick, two others within it.
    distinct = np.unique(np.round(phases, 6))
    assert len(distinct) == 3 and distinct[0] == 0.0 and distinct[-1] < 30.0
