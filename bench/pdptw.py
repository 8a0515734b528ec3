"""Li & Lim PDPTW: our solver and OR-Tools under the same time limit, in the same run.

    python bench/pdptw.py [--quick] [--time-limit 10] [--before REF] [--jobs N] [--json PATH]
        [--out DIR]

OR-Tools pins protobuf < 6.34 and Ray needs >= 7.35, so run this in its own environment (the
solver needs no Ray):

    python -m venv .venv-bench
    .venv-bench/bin/pip install numpy scipy numba pydantic pydantic-settings pyyaml msgpack \
        matplotlib ortools==9.15.6755
    .venv-bench/bin/pip install --no-deps -e .
    .venv-bench/bin/python bench/pdptw.py

OR-Tools: a routing model with AddPickupAndDelivery, same-vehicle and precedence constraints,
time (with waiting) and capacity dimensions, a fixed cost per vehicle (fewest vehicles first),
parallel cheapest insertion then guided local search. Its integer arc times are the Euclidean
distances scaled by 1000 and rounded up, so its solutions stay feasible for the exact float
evaluator. Both solutions are scored by ``planner.pdptw.evaluate``, against the best-known
solutions in data/pdptw/bks.csv. ``--before REF`` runs our solver as it was at that git ref
beside the current one, in the same run; ``--jobs N`` solves N instances at once (each solver
is single-threaded: one core each). Writes DIR/pdptw.csv and DIR/pdptw.png.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from planner.pdptw.evaluate import evaluate
from planner.pdptw.instance import PdptwInstance, load_instance
from planner.pdptw.solve import solve

DATA = Path(__file__).resolve().parents[1] / "data/pdptw"
QUICK = ["lc101", "lc201", "lr101", "lr201", "lr105"]
SCALE = 1000


def ortools_solve(inst: PdptwInstance, time_limit_s: float) -> tuple[list[list[int]], float]:
    from ortools.constraint_solver import pywrapcp, routing_enums_pb2

    n, k = inst.n_tasks + 1, inst.vehicles
    manager = pywrapcp.RoutingIndexManager(n, k, 0)
    routing = pywrapcp.RoutingModel(manager)
    dist = [[math.ceil(inst.distance(a, b) * SCALE) for b in range(n)] for a in range(n)]

    def arc(i: int, j: int) -> int:
        return dist[manager.IndexToNode(i)][manager.IndexToNode(j)]

    def elapsed(i: int, j: int) -> int:
        a = manager.IndexToNode(i)
        return dist[a][manager.IndexToNode(j)] + int(inst.service[a] * SCALE)

    routing.SetArcCostEvaluatorOfAllVehicles(routing.RegisterTransitCallback(arc))
    routing.SetFixedCostOfAllVehicles(100 * max(max(r) for r in dist))
    horizon = int(inst.latest[0] * SCALE)
    routing.AddDimension(routing.RegisterTransitCallback(elapsed), horizon, horizon, False, "T")
    tdim = routing.GetDimensionOrDie("T")
    for node in range(n):
        lo, hi = math.ceil(inst.earliest[node] * SCALE), int(inst.latest[node] * SCALE)
        if node:
            tdim.CumulVar(manager.NodeToIndex(node)).SetRange(lo, hi)
    for v in range(k):
        tdim.CumulVar(routing.Start(v)).SetRange(int(inst.earliest[0] * SCALE), horizon)
        tdim.CumulVar(routing.End(v)).SetRange(int(inst.earliest[0] * SCALE), horizon)
    dem = routing.RegisterUnaryTransitCallback(lambda i: int(inst.demand[manager.IndexToNode(i)]))
    routing.AddDimensionWithVehicleCapacity(dem, 0, [inst.capacity] * k, True, "Q")
    solver = routing.solver()
    for p, d in inst.pairs:
        pi, di = manager.NodeToIndex(int(p)), manager.NodeToIndex(int(d))
        routing.AddPickupAndDelivery(pi, di)
        solver.Add(routing.VehicleVar(pi) == routing.VehicleVar(di))
        solver.Add(tdim.CumulVar(pi) <= tdim.CumulVar(di))
    params = pywrapcp.DefaultRoutingSearchParameters()
    params.first_solution_strategy = (
        routing_enums_pb2.FirstSolutionStrategy.PARALLEL_CHEAPEST_INSERTION
    )
    params.local_search_metaheuristic = (
        routing_enums_pb2.LocalSearchMetaheuristic.GUIDED_LOCAL_SEARCH
    )
    params.time_limit.FromMilliseconds(int(time_limit_s * 1000))
    t0 = time.perf_counter()
    sol = routing.SolveWithParameters(params)
    seconds = time.perf_counter() - t0
    routes: list[list[int]] = []
    if sol is None:
        return routes, seconds
    for v in range(k):
        idx, route = sol.Value(routing.NextVar(routing.Start(v))), []
        while not routing.IsEnd(idx):
            route.append(manager.IndexToNode(idx))
            idx = sol.Value(routing.NextVar(idx))
        if route:
            routes.append(route)
    return routes, seconds


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
    x = np.arange(len(rows))
    for off, who in ((-0.2, "ours"), (0.2, "ortools")):
        a1.bar(x + off, [r[f"{who}_vehicles"] - r["bks_vehicles"] for r in rows], 0.4, label=who)
        a2.bar(x + off, [r[f"{who}_gap_pct"] for r in rows], 0.4, label=who)
    a1.set_ylabel("vehicles above BKS")
    a2.set_ylabel("distance gap to BKS (%)")
    a2.set_xticks(x, [r["instance"] for r in rows], rotation=90, fontsize=7)
    a1.legend()
    fig.suptitle("Li & Lim 100-task PDPTW, same time limit per instance")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _solver_at(ref: str) -> str:
    """planner/pdptw/solve.py as it was at git ``ref``, written to a temporary file: the
    solver before a change, run beside the current one in the same run."""
    root = Path(__file__).resolve().parents[1]
    text = subprocess.run(
        ["git", "show", f"{ref}:planner/pdptw/solve.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "solve_before.py"
    path.write_text(text)
    return str(path)


def _load_solver(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("solve_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["solve_before"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.solve


def run_instance(job: tuple[str, float, str | None]) -> dict[str, Any]:
    """One instance by each solver, one after the other: ours, OR-Tools and, where
    ``before`` names a solver file (``_solver_at``), ours as it was."""
    name, limit, before = job
    bks = {r["instance"]: r for r in csv.DictReader((DATA / "bks.csv").open())}
    inst = load_instance(DATA / "instances" / f"{name}.txt")
    b_v, b_d = int(bks[name]["vehicles"]), float(bks[name]["distance"])
    row: dict[str, Any] = {"instance": name, "bks_vehicles": b_v, "bks_distance": b_d}
    solvers = [("ours", solve)] + ([("before", _load_solver(before))] if before else [])
    results = []
    for who, solver in solvers:
        got = solver(inst, time_limit_s=limit, seed=0)
        results.append((who, got.routes, got.seconds, not got.unassigned))
    ort_routes, ort_s = ortools_solve(inst, limit)
    results.append(("ortools", ort_routes, ort_s, True))
    for who, routes, secs, complete in results:
        ev = evaluate(inst, routes)
        row |= {
            f"{who}_feasible": ev.feasible and complete,
            f"{who}_vehicles": ev.vehicles,
            f"{who}_distance": ev.distance,
            f"{who}_gap_pct": 100 * (ev.distance / b_d - 1),
            f"{who}_seconds": secs,
        }
    return row


def main() -> None:
    ap = parser(__doc__, f"{len(QUICK)} instances, 5 s each")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds per instance")
    ap.add_argument(
        "--before",
        default=None,
        help="also run the solver as it was at this git ref, in the same run (e.g. HEAD~1)",
    )
    ap.add_argument(
        "--jobs", type=int, default=1, help="instances at once (each solver is single-threaded)"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    limit = args.time_limit or (5.0 if args.quick else 10.0)
    names = QUICK if args.quick else sorted(p.stem for p in (DATA / "instances").glob("*.txt"))
    before = _solver_at(args.before) if args.before else None
    who_all = ("ours", "ortools") + (("before",) if before else ())
    jobs = [(name, limit, before) for name in names]
    rows = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for k, row in enumerate(pool.map(run_instance, jobs), 1):
            rows.append(row)
            log(
                f"[{k}/{len(names)}] {row['instance']}: "
                + ", ".join(
                    f"{who} {row[f'{who}_vehicles']} / {row[f'{who}_distance']:.1f}"
                    + ("" if row[f"{who}_feasible"] else " INFEASIBLE")
                    for who in who_all
                )
                + f", BKS {row['bks_vehicles']} / {row['bks_distance']:.1f}"
            )

    def better(r: dict) -> bool:
        if not r["ortools_feasible"]:
            return r["ours_feasible"]
        if not r["ours_feasible"]:
            return False
        return (r["ours_vehicles"], r["ours_distance"]) < (
            r["ortools_vehicles"],
            r["ortools_distance"] - 1e-6,
        )

    print(f"\nLi & Lim 100-task set, {limit:.0f} s per instance per solver, same run")
    print(
        f"{'instance':>8} {'BKS':>11} | {'ours':>13} {'gap%':>6} {'s':>5} | "
        f"{'OR-Tools':>13} {'gap%':>6} {'s':>5}"
    )
    for r in rows:
        print(
            f"{r['instance']:>8} {r['bks_vehicles']:>3} {r['bks_distance']:>7.1f} | "
            f"{r['ours_vehicles']:>3} {r['ours_distance']:>9.1f} {r['ours_gap_pct']:>6.2f} "
            f"{r['ours_seconds']:>5.1f} | {r['ortools_vehicles']:>3} "
            f"{r['ortools_distance']:>9.1f} {r['ortools_gap_pct']:>6.2f} "
            f"{r['ortools_seconds']:>5.1f}"
        )
    summary = {}
    for who in who_all:
        feas = [r for r in rows if r[f"{who}_feasible"]]
        same = [r for r in feas if r[f"{who}_vehicles"] == r["bks_vehicles"]]
        summary[who] = {
            "feasible": len(feas),
            "mean_vehicles_above_bks": sum(r[f"{who}_vehicles"] - r["bks_vehicles"] for r in feas)
            / max(1, len(feas)),
            "mean_gap_pct_at_bks_vehicles": sum(r[f"{who}_gap_pct"] for r in same)
            / max(1, len(same)),
            "instances_at_bks_vehicles": len(same),
        }
    wins = sum(better(r) for r in rows)

    def tie(r: dict) -> bool:
        both = r["ours_feasible"] and r["ortools_feasible"]
        ours = (r["ours_vehicles"], round(r["ours_distance"], 3))
        return both and ours == (r["ortools_vehicles"], round(r["ortools_distance"], 3))

    ties = sum(tie(r) for r in rows)
    for who, s in summary.items():
        print(
            f"{who:>8}: feasible {s['feasible']}/{len(rows)}, mean vehicles above BKS "
            f"{s['mean_vehicles_above_bks']:.2f}, mean distance gap "
            f"{s['mean_gap_pct_at_bks_vehicles']:.2f}% on the "
            f"{s['instances_at_bks_vehicles']} instances at BKS vehicles"
        )
    print(
        f"ours strictly better than OR-Tools (vehicles, then distance) on {wins}/{len(rows)}, "
        f"equal on {ties}, worse on {len(rows) - wins - ties}"
    )
    write_csv(args.out / "pdptw.csv", rows)
    plot(rows, args.out / "pdptw.png")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "time_limit_s": limit,
                    "jobs": args.jobs,
                    "before": args.before,
                    "rows": rows,
                    "summary": summary,
                    "wins": wins,
                },
                indent=2,
            )
        )
    log(f"wrote {args.out / 'pdptw.csv'} and {args.out / 'pdptw.png'}")


if __name__ == "__main__":
    main()
