"""Li & Lim PDPTW: loader errors, an evaluator that catches every violation, a feasible solver."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from planner.pdptw.evaluate import evaluate, read_sintef, write_sintef
from planner.pdptw.instance import PdptwInstanceError, build_instance, load_instance
from planner.pdptw.solve import solve

DATA = Path(__file__).resolve().parents[2] / "data/pdptw/instances"

# Depot at the origin, open [0, 1000]; two requests: 1 -> 2 and 3 -> 4, capacity 10.
TINY = """2\t10\t1
0\t0\t0\t0\t0\t1000\t0\t0\t0
1\t10\t0\t5\t0\t100\t5\t0\t2
2\t20\t0\t-5\t0\t200\t5\t1\t0
3\t0\t10\t6\t0\t300\t5\t0\t4
4\t0\t20\t-6\t0\t400\t5\t3\t0
"""


@pytest.fixture
def tiny(tmp_path: Path):
    path = tmp_path / "tiny.txt"
    path.write_text(TINY)
    return load_instance(path)


def test_a_known_feasible_solution_is_accepted(tiny):
    ev = evaluate(tiny, [[1, 2], [3, 4]])
    assert ev.feasible and ev.vehicles == 2
    assert ev.distance == pytest.approx((10 + 10 + 20) + (10 + 10 + 20))


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ([[1, 2]], "not served"),
        ([[1, 2, 1], [3, 4]], "served twice"),
        ([[2, 1], [3, 4]], "before its pickup"),
        ([[1, 4], [3, 2]], "different routes"),
        ([[1, 3, 2, 4]], "load 11 outside"),
        ([[1, 2], [3, 4], []], None),  # an empty route is not a vehicle
    ],
)
def test_the_evaluator_catches_each_violation(tiny, routes, message):
    ev = evaluate(tiny, routes)
    if message is None:
        assert ev.feasible and ev.vehicles == 2
    else:
        assert not ev.feasible and any(message in v for v in ev.violations), ev.violations


def test_time_windows_depot_and_fleet_are_checked(tmp_path):
    late = TINY.replace("1\t10\t0\t5\t0\t100", "1\t10\t0\t5\t0\t5")
    (tmp_path / "late.txt").write_text(late)
    ev = evaluate(load_instance(tmp_path / "late.txt"), [[1, 2], [3, 4]])
    assert any("after its latest" in v for v in ev.violations)
    closing = TINY.replace("0\t0\t0\t0\t0\t1000", "0\t0\t0\t0\t0\t40")
    (tmp_path / "closing.txt").write_text(closing)
    ev = evaluate(load_instance(tmp_path / "closing.txt"), [[1, 2], [3, 4]])
    assert any("back at the depot" in v for v in ev.violations)
    one_vehicle = TINY.replace("2\t10\t1", "1\t20\t1", 1)
    (tmp_path / "one.txt").write_text(one_vehicle)
    ev = evaluate(load_instance(tmp_path / "one.txt"), [[1, 2], [3, 4]])
    assert any("routes for 1 vehicles" in v for v in ev.violations)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("2\t10\t1\n0\t0\t0\t0\t0\t1000\t0\t0\t0\n1\t10\t0\tx\t0\t100\t5\t0\t2\n", 3, "number"),
        ("2\t10\t1\n0\t0\t0\t0\t0\t1000\t0\t0\t0\n1\t10\t0\t5\t0\t100\t5\t0\n", 3, "9 fields"),
        ("2\t10\t1\n0\t0\t0\t0\t0\t1000\t0\t0\t0\n1\t10\t0\t5\t0\t100\t5\t0\t2\n", 3, "pickup 1"),
        ("x\n", 1, "vehicles capacity"),
    ],
)
def test_malformed_files_name_the_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(PdptwInstanceError, match=rf"bad.txt:{line}: .*{message}"):
        load_instance(path)


def test_cli_errors_are_one_line_and_exit_non_zero(tmp_path, capsys):
    assert main(["solve", str(tmp_path / "missing.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing.txt" in err and "\n" not in err


@pytest.mark.parametrize("name", ["lc101", "lr101", "lc201"])
def test_solutions_are_feasible_and_the_file_matches_the_json(tmp_path, capsys, name):
    out = tmp_path / f"{name}.sol"
    code = main(
        ["solve", str(DATA / f"{name}.txt"), "--time-limit", "2", "--seed", "1", "--out", str(out)]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["feasible"] is True and summary["instance"] == name
    ev = evaluate(load_instance(DATA / f"{name}.txt"), read_sintef(out))
    assert ev.feasible
    assert ev.vehicles == summary["vehicles"]
    assert ev.distance == pytest.approx(summary["distance"], abs=1e-3)


def test_same_seed_and_iterations_same_solution():
    inst = load_instance(DATA / "lr102.txt")
    a = solve(inst, time_limit_s=60, seed=3, iterations=15)
    b = solve(inst, time_limit_s=60, seed=3, iterations=15)
    assert a.routes == b.routes and a.iterations == b.iterations == 15


def test_the_vehicle_phase_reaches_the_best_known_fleet_where_routes_are_tight():
    """lr211: the best known uses 2 vehicles. Keeping a step when the pool of left-over
    requests did not grow stayed at 3 (2,000 steps, seed 0); the ejection pool's penalties
    (a step kept when the left-over requests' summed penalty does not grow) and retries with
    another route reach 2 in 2,000 steps, seeded."""
    inst = load_instance(DATA / "lr211.txt")
    # The limit only bounds a failure: 2,000 steps take about 10 s on the compiled builds.
    sol = solve(inst, time_limit_s=120, seed=0, iterations=2000)
    ev = evaluate(inst, sol.routes)
    assert ev.feasible and not sol.unassigned
    assert sol.vehicles == 2


def test_sintef_round_trip(tmp_path):
    write_sintef([[1, 2], [], [3, 4]], tmp_path / "s.sol")
    assert (tmp_path / "s.sol").read_text() == "Route 1 : 1 2\nRoute 2 : 3 4\n"
    assert read_sintef(tmp_path / "s.sol") == [[1, 2], [3, 4]]


@st.composite
def tiny_instances(draw):
    """1-6 random pickup/delivery pairs, windows wide enough or not."""
    pairs = draw(st.integers(1, 6))
    coord = st.integers(0, 100)
    horizon = draw(st.integers(50, 2000))
    rows = [(0, 50, 50, 0, 0, horizon, 0, 0, 0)]
    for k in range(pairs):
        p, d = 1 + 2 * k, 2 + 2 * k
        demand = draw(st.integers(1, 5))
        e = draw(st.integers(0, horizon // 2))
        rows.append(
            (p, draw(coord), draw(coord), demand, e, draw(st.integers(e, horizon)), 5, 0, d)
        )
        rows.append(
            (d, draw(coord), draw(coord), -demand, e, draw(st.integers(e, horizon)), 5, p, 0)
        )
    return build_instance("tiny", draw(st.integers(1, 4)), draw(st.integers(5, 10)), rows, str)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(inst=tiny_instances(), seed=st.integers(0, 2**32 - 1))
def test_any_small_instance_is_solved_or_reported_never_raises(inst, seed):
    """1-4 pairs raised `low >= high` in the ruin (a 500 over HTTP)."""
    sol = solve(inst, time_limit_s=0.05, seed=seed)
    ev = evaluate(inst, sol.routes)
    placed = sorted(t for r in sol.routes for t in r)
    assert sorted(placed + sol.unassigned) == list(range(1, inst.n_tasks + 1))
    assert ev.feasible or sol.unassigned or not placed


def test_the_time_limit_holds_during_the_first_construction_on_the_array_loops():
    """A warming replica prices on the array loops; 100 pairs at a 0.1 s limit took 25 s
    there when construction ran to its end before the first clock check."""
    from kernels import compiled

    rows = [(0, 50, 50, 0, 0, 10_000, 0, 0, 0)]
    for k in range(100):
        p, d = 1 + 2 * k, 2 + 2 * k
        rows.append((p, k % 97, k // 3, 1, 0, 9000, 1, 0, d))
        rows.append((d, (k * 7) % 89, k // 2, -1, 0, 9000, 1, p, 0))
    inst = build_instance("construction", 100, 10, rows, str)
    compiled.defer()  # tests/conftest.py resumes the compiled builds after the test
    t0 = time.perf_counter()
    sol = solve(inst, time_limit_s=0.1, seed=0)
    took = time.perf_counter() - t0
    print(f"construction at a 0.1 s limit: {took:.3f} s, {len(sol.unassigned)} tasks unplaced")
    assert took < 0.1 + 1.0  # one insertion past the limit at most, on a slow shared core


def test_an_instance_whose_every_task_is_at_the_depot_is_solved():
    """Zero distance everywhere: the annealing's temperature scale was 0 (a 500 over HTTP)."""
    rows = [
        (0, 5, 5, 0, 0, 100, 0, 0, 0),
        (1, 5, 5, 1, 0, 50, 0, 0, 2),
        (2, 5, 5, -1, 0, 50, 0, 1, 0),
    ]
    inst = build_instance("at-depot", 2, 5, rows, str)
    sol = solve(inst, time_limit_s=0.05, seed=0)
    assert sol.routes == [[1, 2]] and sol.distance == 0 and evaluate(inst, sol.routes).feasible
