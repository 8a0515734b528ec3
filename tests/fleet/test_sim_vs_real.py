"""The fleet simulator held to a recorded real cluster.

``data/fleet_vs_real.json``: three runs of ``bench/fleet_vs_real.py --quick`` on 2026-11-24 (a
real Ray cluster of three simulated nodes, the app, emulated 100 ms solver calls, a
5 -> 16 -> 5 rounds/s step), each with the times its requests were sent, its edge, device time
per call and replica start, and each phase's measured p99. Offered the same arrivals, the
simulation must give every phase's p99 within 20% of the real one (medians over the runs): a
change to ``fleet.engine`` that breaks its agreement with the measured cluster fails here.
Re-record with ``python bench/fleet_vs_real.py --quick --json PATH`` and
``tests/fleet/data/trim.py PATH``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).parent / "data" / "fleet_vs_real.json"


@pytest.fixture(scope="module")
def bench():
    sys.path.append(str(ROOT / "bench"))  # appended: bench/cache.py must not shadow `cache`
    import fleet_vs_real

    return fleet_vs_real


def test_the_simulation_gives_the_recorded_clusters_p99_in_every_phase(bench) -> None:
    reals = json.loads(RECORDED.read_text())["real_runs"]
    ratios = []
    for real in reals:  # as the bench compares: the median of its simulated seeds per run
        sims = [bench.sim_run(True, seed, real) for seed in range(bench.SIM_SEEDS)]
        ratios.append(
            [
                statistics.median(s["phases"][k]["p99_ms"] for s in sims) / r["p99_ms"]
                for k, r in enumerate(real["phases"])
            ]
        )
    medians = [statistics.median(phase) for phase in zip(*ratios, strict=True)]
    assert len(medians) == 3
    for phase, ratio in zip(("before the surge", "surge", "after it"), medians, strict=True):
        assert 0.8 <= ratio <= 1.2, f"{phase}: simulated p99 {ratio:.2f}x the real one"
