"""The slow and the dead: real requests beside an idle-connection flood, trickled bodies and
killed offline workers, against the same requests alone in the same run.

    python bench/slow_and_dead.py [--quick] [--seconds 20] [--json PATH] [--out DIR]

Starts a local Ray and the app as deploy.yaml runs it on the CPU (behind HAProxy with its
connection budget, ``ops.haproxy_config``), then, for ``--seconds`` each (--quick: 6):

* alone: 300 x 100 dispatch rounds, one caller, one round at a time, a 10 s deadline each;
* the same rounds beside an idle flood: 1.5x a source's connection budget opened from another
  address (127.0.0.2) and held silent;
* the same rounds beside idle floods from five hosts (127.0.0.10-14), each under its share
  but together past half the proxy's budget and past Serve's fixed maxconn of 4,096;
* the same rounds beside trickled bodies: 16 dispatch requests (four times the lane's
  in-flight share) whose 400 KB bodies arrive at 1 KB/s, re-opened whenever dropped;
* static solves (two callers) while the solver's offline child processes are SIGKILLed every
  2 s, beside the same dispatch rounds.

Per scene: calls answered within their deadline, p50 / p99, every status seen; for the
killed children, the static solves' statuses (anything but 200 and 503 is a failure). Writes
DIR/slow_and_dead.csv and DIR/slow_and_dead.png.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import json

from common import log, parser, write_csv

from ops import hostile, local, slow_and_dead
from ops.haproxy_config import CONNECTIONS_PER_SOURCE, FILLING, front_connections
from planner import generate_round
from serve_app.config import DispatchAppArgs
from serve_app.http.routes import lane_capacities
from serve_app.schemas import DispatchRequest, EtrRequest, OrderIn

DEADLINE_S = 10.0
ETR_DEADLINE_S = 1.0


def scene_row(
    name: str, tally: slow_and_dead.RequestTally, path: str = "/v1/dispatch", **extra
) -> dict:
    p50, p99 = tally.percentile_ms(50), tally.percentile_ms(99)
    return {
        "scene": name,
        "path": path,
        "rounds": tally.sent,
        "within_deadline": round(tally.within_deadline(), 4),
        "p50_ms": None if p50 is None else round(p50, 1),
        "p99_ms": None if p99 is None else round(p99, 1),
        "statuses": dict(tally.statuses),
        **extra,
    }


def main() -> None:
    ap = parser(__doc__, "6 s per scene")
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = 6.0 if args.quick else args.seconds
    body = DispatchRequest.from_domain(generate_round(300, 100, seed=3)).model_dump_json()
    round_body = body.encode()

    etr_bodies = [
        EtrRequest(orders=[OrderIn.from_domain(generate_round(1, 1, seed=k).orders[0])])
        .model_dump_json()
        .encode()
        for k in range(256)
    ]

    def solve_body(k: int) -> bytes:  # a new instance each time: no cached solution answers
        return json.dumps(hostile.solve_body(60 + k % 40, time_limit_s=1.0, seed=k)).encode()

    app_args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime")
    lanes = lane_capacities(app_args.admission)
    rows: list[dict] = []
    with local.local_serve(num_cpus=4, namespace="bench-slow-and-dead", haproxy_lanes=lanes) as ep:
        local.run_app(app_args)
        local.wait_ready(ep.http)
        port = urlsplit(ep.http).port
        assert port is not None

        def rounds() -> slow_and_dead.RequestTally:
            return slow_and_dead.real_requests(
                ep.http, "/v1/dispatch", round_body, seconds, deadline_s=DEADLINE_S
            )

        log("alone ...")
        rows.append(scene_row("alone (baseline)", rounds()))
        flood_n = CONNECTIONS_PER_SOURCE * 3 // 2
        log(f"beside {flood_n} idle connections from one host ...")
        with slow_and_dead.idle_flood(port, flood_n) as flood:
            tally = rounds()
        rows.append(scene_row(f"beside {flood_n} idle connections", tally, attack=flood))
        hosts = [f"127.0.0.{k}" for k in range(10, 15)]
        per_host = min(CONNECTIONS_PER_SOURCE - 24, int(front_connections() * FILLING) // 4)
        log(f"beside {per_host} idle connections from each of {len(hosts)} hosts ...")
        with contextlib.ExitStack() as stack:
            floods = [
                stack.enter_context(slow_and_dead.idle_flood(port, per_host, h)) for h in hosts
            ]
            tally = rounds()
        attack = {k: sum(f[k] for f in floods) for k in floods[0]}
        rows.append(
            scene_row(
                f"beside {per_host * len(hosts)} idle connections from {len(hosts)} hosts",
                tally,
                attack=attack,
            )
        )
        log("beside 16 trickled dispatch bodies ...")
        with slow_and_dead.trickled_bodies(port, "/v1/dispatch", 16) as trickle:
            tally = rounds()
        rows.append(scene_row("beside 16 trickled bodies (1 KB/s)", tally, attack=trickle))

        def etr_calls() -> slow_and_dead.RequestTally:
            return slow_and_dead.real_requests(
                ep.http,
                "/v1/etr",
                lambda k: etr_bodies[k % len(etr_bodies)],
                seconds,
                deadline_s=ETR_DEADLINE_S,
            )

        log("ETR calls alone ...")
        rows.append(scene_row("alone (baseline)", etr_calls(), "/v1/etr"))
        loris = [f"127.0.0.{k}" for k in range(20, 25)]
        scene = f"beside slowloris headers from {len(loris)} hosts ({per_host} each)"
        for path, calls in (("/v1/etr", etr_calls), ("/v1/dispatch", rounds)):
            log(f"{path} {scene} ...")
            with slow_and_dead.slow_headers(port, path, loris, per_host) as slow:
                tally = calls()
            rows.append(scene_row(scene, tally, path, attack=slow))
        log("static solves while the offline children are killed every 2 s ...")
        solves: list[slow_and_dead.RequestTally] = []

        def static_solves() -> None:
            solves.append(
                slow_and_dead.real_requests(
                    ep.http, "/v1/routes/solve", solve_body, seconds, deadline_s=30.0, clients=2
                )
            )

        with slow_and_dead.killing_offline_children(every_s=2.0) as killing:
            solver_thread = threading.Thread(target=static_solves)
            solver_thread.start()
            tally = rounds()
            solver_thread.join()
        solve = solves[0]
        failed = sum(n for s, n in solve.statuses.items() if s not in ("200", "503"))
        rows.append(
            scene_row(
                "beside static solves, offline children killed every 2 s",
                tally,
                attack=killing,
                static_solves=dict(solve.statuses),
                static_solves_failed=failed,
            )
        )
    write_csv(args.out / "slow_and_dead.csv", rows)
    plot(rows, args.out / "slow_and_dead.png")
    print("| calls | scene | sent | within deadline | p50 ms | p99 ms | statuses | attack |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        attack = r.get("attack", "")
        if "static_solves" in r:
            solves, failed = r["static_solves"], r["static_solves_failed"]
            attack = f"{attack}; static solves {solves}, failed {failed}"
        print(
            f"| {r['path']} | {r['scene']} | {r['rounds']} | {r['within_deadline']:.3f} | "
            f"{r['p50_ms']} | {r['p99_ms']} | {r['statuses']} | {attack} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "deadline_s": {"/v1/dispatch": DEADLINE_S, "/v1/etr": ETR_DEADLINE_S},
                    "scenes": rows,
                },
                indent=1,
            )
        )


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    names = [f"{r['path']} {r['scene']}" for r in rows]
    ax.barh(names, [r["p99_ms"] or 0 for r in rows], color="tab:red", label="p99")
    ax.barh(names, [r["p50_ms"] or 0 for r in rows], color="tab:blue", label="p50")
    ax.set_xlabel("ms (/v1/dispatch: a 300 x 100 round; /v1/etr: one order)")
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
