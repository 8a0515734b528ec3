"""``orml``: command-line entry point.

orml plan --inventory INV.yaml --demand DEMAND.yaml [--profiles DIR] -o deploy.yaml
orml round --riders 1000 --orders 300 [--seed 0] [--backend auto] [--max-orders-per-rider 1]
           [--candidates K] [--no-improve] [--json]
orml replay INSTANCE_DIR [--round-s 60] [--out DIR] [--url http://HOST:PORT [--speedup 60]]
orml loadtest URL [--endpoint dispatch|etr] [--concurrency 1 2 4 | --rate 10 20] [--out DIR]
orml models list|load V|unload V [--address http://DASHBOARD:8265] [--app NAME]
orml k8s rayservice [--config deploy/production.yaml] --image IMAGE [--secret NAME] [-o FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path


def _round(args: argparse.Namespace) -> int:
    from domain import DispatchWeights
    from planner import dispatch_round, generate_round

    weights = DispatchWeights(
        max_orders_per_rider=args.max_orders_per_rider, candidate_riders=args.candidates
    )
    round_ = generate_round(args.riders, args.orders, seed=args.seed, weights=weights)
    # The first round in a process loads the compiled kernels (seconds): do it first, and
    # report it apart, so the round's own timings are what a warm replica pays.
    t0 = time.perf_counter()
    dispatch_round(generate_round(8, 4, seed=1), backend=args.backend)
    warm_up_ms = (time.perf_counter() - t0) * 1e3
    plan = dispatch_round(round_, backend=args.backend, improve_routes=not args.no_improve)
    if args.json:
        out = asdict(plan)
        out["routes"] = {
            rid: [{"order_id": s.order_id, "kind": s.kind.value} for s in route.stops]
            for rid, route in plan.routes.items()
        }
        json.dump(out, sys.stdout, default=str, indent=2)
        print()
        return 0
    reasons = Counter(u.reason.value for u in plan.unassigned)
    print(f"backend            {plan.backend}")
    print(f"riders x orders    {args.riders} x {args.orders}")
    print(f"assigned           {len(plan.assignments)}")
    print(f"unassigned         {len(plan.unassigned)} {dict(reasons) if reasons else ''}")
    print(f"added travel       {plan.cost.travel_s:,.0f} s")
    print(f"added lateness     {plan.cost.lateness_s:,.0f} s")
    print(f"weighted cost      {plan.cost.total:,.0f}")
    print("timings (ms)       " + ", ".join(f"{k}={v:.1f}" for k, v in plan.timings_ms.items()))
    print(f"warm-up (ms)       {warm_up_ms:.1f} (once per process: kernel load, not the round)")
    for a in plan.assignments[:5]:
        stops = " -> ".join(
            f"{s.kind.value[0].upper()}:{s.order_id}" for s in plan.routes[a.rider_id].stops
        )
        print(f"  {a.order_id} -> {a.rider_id} (cost {a.cost:.0f}): {stops}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    import yaml

    from devices.profiles import ProfileSet
    from placement.emit import emit_config
    from placement.inventory import PlacementInputError, load_demand, load_inventory
    from placement.packer import PLANNERS, PlacementInfeasible
    from placement.simulate import simulate

    try:
        inventory = load_inventory(args.inventory)
        demand = load_demand(args.demand)
        profiles = ProfileSet.load(args.profiles)
        planner = PLANNERS[args.method]
        kwargs = {} if args.method == "ffd" else {"objective": args.objective}
        plan = planner(inventory, demand, profiles, **kwargs)
        plan.check()
    except (PlacementInputError, PlacementInfeasible) as exc:
        print(f"orml plan: {exc}", file=sys.stderr)
        return 2
    sim = simulate(plan, demand, profiles, duration_s=20.0)
    base = yaml.safe_load(args.base.read_text())
    args.out.write_text(
        f"# Written by `orml plan` ({plan.method}): {plan.cards_used()} cards, "
        f"${plan.cost_per_hour():.2f}/h, simulated SLO attainment {sim.attainment:.4f}\n"
        + yaml.safe_dump(emit_config(plan, base), sort_keys=False)
    )
    summary = {
        "method": plan.method,
        "cards": plan.cards_used(),
        "cost_per_hour": round(plan.cost_per_hour(), 2),
        "solve_s": round(plan.solve_s, 3),
        "optimal": plan.optimal,
        "notes": plan.notes,
        "simulated_attainment": {d: round(o.attainment, 4) for d, o in sim.deployments.items()},
        "replicas": [
            {
                "deployment": r.config.deployment,
                "card": str(plan.cards[r.card]),
                "share": r.config.share,
                "batch": r.config.batch,
                "memory_mb": round(r.config.memory_mb, 1),
                "p99_est_ms": round(r.config.p99_est_ms, 2),
            }
            for r in plan.replicas
        ],
    }
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0


def _serve(args: argparse.Namespace) -> int:
    import signal
    import threading

    from ops import local
    from ops.launch import start

    stop = threading.Event()

    def on_signal(*_: object) -> None:
        stop.set()
        # A signal to the whole process group takes Ray's processes down with us: a Ray call
        # this process is blocked in may then wait out Ray's 60 s reconnection timeout, so the
        # handler (which Ray's waits run) ends the process itself.
        if local.cluster_going_down():
            print("stopping: the process group got the signal", flush=True)
            local.abandon()
            _stopped(cleanly=False)

    # SIGTERM (systemd, Docker, Kubernetes) stops as cleanly as Ctrl-C, at any moment: the
    # start checks `stop` while it waits, and `local.start` puts these handlers back after
    # ray.init (inside it, Ray's own handler raises SystemExit, caught below).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        launched = start(
            args.config,
            throughput_mode=not args.ray_default_mode,
            port=args.port,
            grpc_port=args.grpc_port,
            dashboard_port=args.dashboard_port,
            metrics_port=args.metrics_port,
            stop=stop,
        )
    except BaseException as exc:
        # A signal during start-up: as a stop request (`stop`), inside ray.init as Ray's
        # SystemExit, or as the error of a wait it cut short.
        signalled = stop.is_set() or isinstance(exc, SystemExit | KeyboardInterrupt)
        if not signalled:
            local.stop_if_started()
            raise
        print("stopping during start-up ...", flush=True)
        return _stopped(local.stop_if_started())
    ep = launched.endpoints
    for note in launched.notes:
        print(f"sized for this machine: {note}")
    print(f"API        {ep.http}   POST /v1/dispatch, /v1/etr, /v1/routes/solve; GET /readyz")
    print(f"OpenAPI    {ep.http}/docs")
    print(f"gRPC       {ep.grpc}   orml.v1.Orml (serve_app/grpc_api/orml.proto)")
    print(f"Dashboard  {ep.dashboard}   (log in with the token `ray get-auth-token` prints)")
    print(f"Metrics    {ep.metrics}   (Prometheus scrape target)")
    print("Ctrl-C or SIGTERM stops.", flush=True)
    while not stop.wait(0.5):
        pass
    print("stopping ...", flush=True)
    return _stopped(local.stop())


def _stopped(cleanly: bool) -> int:
    print("stopped", flush=True)
    if not cleanly:  # Ray's client is left connected to a dying cluster: see local.stop
        sys.stderr.flush()
        os._exit(0)
    return 0


def _example(args: argparse.Namespace) -> int:
    """A valid request body for one endpoint, on stdout."""
    from planner import generate_round
    from serve_app.schemas import DispatchRequest, EtrRequest, OrderIn, SolveRequest

    indent = 1 if args.pretty else None
    if args.what == "dispatch":
        round_ = generate_round(args.riders, args.orders, seed=args.seed)
        print(DispatchRequest.from_domain(round_).model_dump_json(indent=indent))
    elif args.what == "etr":
        orders = generate_round(0, args.orders, seed=args.seed).orders
        req = EtrRequest(orders=[OrderIn.from_domain(o) for o in orders])
        print(req.model_dump_json(indent=indent))
    else:
        from planner.pdptw.instance import InstanceError, load_instance

        try:
            instance = load_instance(args.source)
        except InstanceError as exc:
            print(f"orml example solve: {exc}", file=sys.stderr)
            return 2
        req = SolveRequest.from_instance(instance, args.time_limit, args.seed)
        print(req.model_dump_json(indent=indent))
    return 0


def _solve(args: argparse.Namespace) -> int:
    from planner.pdptw.evaluate import evaluate, write_sintef
    from planner.pdptw.instance import InstanceError, load_instance
    from planner.pdptw.solve import solve

    try:
        inst = load_instance(args.instance)
    except InstanceError as exc:
        print(f"orml solve: {exc}", file=sys.stderr)
        return 2
    sol = solve(inst, time_limit_s=args.time_limit, seed=args.seed, iterations=args.iterations)
    ev = evaluate(inst, sol.routes)
    if args.out:
        write_sintef(sol.routes, args.out)
    out = {
        "instance": inst.name,
        "vehicles": ev.vehicles,
        "distance": round(ev.distance, 4),
        "feasible": ev.feasible and not sol.unassigned,
        "seconds": round(sol.seconds, 3),
        "iterations": sol.iterations,
    }
    print(json.dumps(out))
    return 0


def _replay(args: argparse.Namespace) -> int:
    from planner.mdrp import InstanceError, ReplayPolicy, evaluate, load_instance, replay
    from planner.mdrp.solution import write_solution

    if args.round_s % 60:
        print(
            "orml replay: --round-s must be a whole number of minutes (MDRP's clock)",
            file=sys.stderr,
        )
        return 2
    try:
        inst = load_instance(args.instance)
    except InstanceError as exc:
        print(f"orml replay: {exc}", file=sys.stderr)
        return 2
    policy = ReplayPolicy(
        round_min=args.round_s // 60, max_bundle=args.max_bundle, late_weight=args.late_weight
    )
    t0 = time.perf_counter()
    last = [0.0]

    def progress(t: int, end: int) -> None:
        if not args.quiet and time.perf_counter() - last[0] > 2.0:
            last[0] = time.perf_counter()
            print(f"  minute {t} of {end}", file=sys.stderr, flush=True)

    served = None
    if args.url:
        from ops.replay_client import ServedDecider

        with ServedDecider(args.url, speedup=args.speedup) as decide:
            day = replay(inst, policy, decide, progress=progress)
        served = {"url": args.url, "speedup": args.speedup, **decide.summary()}
    else:
        day = replay(inst, policy, progress=progress)
    seconds = time.perf_counter() - t0
    out = args.out or Path("replay") / inst.name
    write_solution(inst, day, out)
    ev = evaluate(args.instance, out)
    summary = {
        "instance": inst.name,
        "seconds": round(seconds, 2),
        "rounds": day.rounds,
        "dispatch_ms": round(day.dispatch_ms, 1),
        "policy": asdict(policy),
        **({"served": served} if served else {}),
        **ev.as_dict(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0 if ev.feasible else 1


def _models(args: argparse.Namespace) -> int:
    from ops import models

    def say(line: str) -> None:
        sys.stdout.flush()
        print(line, file=sys.stderr, flush=True)

    try:
        if args.action == "list":
            print("| version | test MAE min | parameters | seed | sha256 |")
            print("|---|---|---|---|---|")
            for r in models.repository():
                print(
                    f"| {r['version']} | {r['test_mae_min']:.3f} | {r['parameters']} | "
                    f"{r['seed']} | {r['sha256']} |"
                )
            try:
                details = models.client(args.address).get_serve_details()
            except Exception as exc:  # no app running is a normal answer here
                say(f"no running app to ask ({type(exc).__name__}: {str(exc)[:200]})")
                return 0
            app = models.etr_app(details, args.app)
            print(json.dumps({"app": app, **models.served(details, app)}))
            return 0
        if args.action == "load":
            models.check_in_repository(args.version)

            def change(config: dict, app: str) -> dict:
                return models.with_loaded(config, app, args.version, not args.no_keep)

        else:

            def change(config: dict, app: str) -> dict:
                return models.with_unloaded(config, app, args.version)

        say(f"{args.action} {args.version}: deploying the changed config")
        t0 = time.monotonic()
        state = models.roll(
            models.client(args.address), args.app, change, args.timeout, progress=say
        )
        print(json.dumps({**state, "seconds": round(time.monotonic() - t0, 1)}))
        return 0
    except models.ModelsError as exc:
        print(f"orml models: {exc}", file=sys.stderr)
        return 2


def _k8s(args: argparse.Namespace) -> int:
    import ray
    import yaml

    from ops import local
    from placement.kuberay import RayServiceOptions, rayservice, to_yaml

    config = yaml.safe_load(args.config.read_text())
    options = RayServiceOptions(
        name=args.name,
        namespace=args.namespace,
        image=args.image,
        ray_version=args.ray_version or ray.__version__,
        gpus_per_pod=args.gpus_per_pod,
        secret=args.secret,
        # What `orml serve` gives its local Ray (ops.local), minus the local-only.
        env={**local.THROUGHPUT_ENV, **local.AUTOSCALING_ENV, **local.PROCESS_ENV},
    )
    text = to_yaml(rayservice(config, options))
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32)


def _loadtest(args: argparse.Namespace) -> int:
    from ops import loadtest

    requests = loadtest.requests_for(
        args.endpoint,
        args.url.rstrip("/"),
        count=args.requests,
        riders=args.riders,
        orders=args.orders,
        mdrp_day=args.mdrp_day,
        token=args.token,
        protocol=args.protocol,
    )
    steps = loadtest.sweep(
        args.url,
        requests,
        concurrency=args.concurrency or (() if args.rate else DEFAULT_CONCURRENCY),
        rates=args.rate or (),
        duration_s=args.duration,
        stop_p99_ms=args.stop_p99_ms,
        progress=loadtest.progress_bar,
        protocol=args.protocol,
        endpoint=args.endpoint,
        token=args.token,
    )
    paths = loadtest.write_report(steps, args.out, f"{args.endpoint} at {args.url}")
    print("| step | answered/s | p50 ms | p90 ms | p99 ms | shed | errors | generator CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for s in steps:
        print(
            f"| {s.mode} {s.value:g} | {s.throughput_rps} | {s.p50_ms} | {s.p90_ms} | "
            f"{s.p99_ms} | {s.shed} | {s.errors} | {s.generator_cpu:.0%} |"
        )
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="orml", description="orml-serve command line")
    sub = ap.add_subparsers(dest="command", required=True)
    rnd = sub.add_parser("round", help="plan one generated dispatch round and print the plan")
    rnd.add_argument("--riders", type=int, default=1000)
    rnd.add_argument("--orders", type=int, default=300)
    rnd.add_argument("--seed", type=int, default=0)
    rnd.add_argument(
        "--backend",
        choices=["auto", "numpy", "cupy"],
        default=None,
        help="default: ORML_BACKEND, else auto (CuPy when a GPU works)",
    )
    rnd.add_argument("--max-orders-per-rider", type=int, default=1)
    rnd.add_argument(
        "--candidates",
        type=int,
        default=None,
        help="price each order against its K nearest riders only",
    )
    rnd.add_argument("--no-improve", action="store_true", help="skip route improvement")
    rnd.add_argument("--json", action="store_true", help="print the whole plan as JSON")
    rnd.set_defaults(run=_round)

    srv = sub.add_parser("serve", help="start a local Ray, deploy the app, block until Ctrl-C")
    srv.add_argument(
        "--config",
        type=Path,
        default=Path("deploy.yaml"),
        help="the Ray Serve config to deploy (default: deploy.yaml)",
    )
    srv.add_argument("--port", type=int, default=None, help="HTTP port (default: the config's)")
    srv.add_argument(
        "--grpc-port", type=int, default=None, help="gRPC port (default: the config's)"
    )
    srv.add_argument(
        "--dashboard-port", type=int, default=8265, help="the Ray dashboard (default: 8265)"
    )
    srv.add_argument(
        "--metrics-port",
        type=int,
        default=8080,
        help="Ray's Prometheus export of every process's metrics (default: 8080)",
    )
    srv.add_argument(
        "--ray-default-mode",
        action="store_true",
        help="without Ray Serve's throughput mode (HAProxy ingress, direct gRPC)",
    )
    srv.set_defaults(run=_serve)

    sol = sub.add_parser("solve", help="solve a Li & Lim PDPTW instance, print a JSON summary")
    sol.add_argument("instance", type=Path)
    sol.add_argument("--time-limit", type=float, default=10.0, help="seconds")
    sol.add_argument("--seed", type=int, default=0)
    sol.add_argument("--iterations", type=int, default=None, help="cap improvement steps")
    sol.add_argument("--out", type=Path, default=None, help="SINTEF-format solution file")
    sol.set_defaults(run=_solve)

    pl = sub.add_parser("plan", help="place replicas on GPUs and write the Serve config")
    pl.add_argument("--inventory", type=Path, required=True, help="cards per node (YAML)")
    pl.add_argument("--demand", type=Path, required=True, help="rate and p99 per model (YAML)")
    pl.add_argument("--profiles", type=Path, default=Path("profiles"))
    pl.add_argument("--base", type=Path, default=Path("deploy.yaml"), help="config to rewrite")
    pl.add_argument("--method", choices=["milp", "heuristic", "ffd", "one_per_gpu"], default="milp")
    pl.add_argument("--objective", choices=["cards", "cost"], default="cards")
    pl.add_argument("-o", "--out", type=Path, required=True, help="the Serve config to write")
    pl.set_defaults(run=_plan)

    rp = sub.add_parser(
        "replay", help="replay a real MDRP delivery day through the dispatch, round by round"
    )
    rp.add_argument("instance", type=Path, help="an MDRP instance folder")
    rp.add_argument("--round-s", type=int, default=60, help="seconds between rounds (minutes)")
    rp.add_argument("--max-bundle", type=int, default=3, help="orders per bundle, at most")
    rp.add_argument(
        "--late-weight",
        type=float,
        default=4.0,
        help="minutes of driving a minute of delay is worth",
    )
    rp.add_argument("--out", type=Path, default=None, help="solution folder (default replay/NAME)")
    rp.add_argument("--url", default=None, help="send every round to this app's /v1/dispatch")
    rp.add_argument(
        "--speedup",
        type=float,
        default=None,
        help="with --url: pace rounds at this many x real time (default: as fast as answered)",
    )
    rp.add_argument("--quiet", action="store_true", help="no progress lines")
    rp.set_defaults(run=_replay)

    lt = sub.add_parser(
        "loadtest", help="sweep concurrency or request rate against a running app (HTTP, gRPC)"
    )
    lt.add_argument(
        "url", help="the app's HTTP address (http://localhost:8000) or, with --grpc, host:port"
    )
    lt.add_argument(
        "--grpc",
        dest="protocol",
        action="store_const",
        const="grpc",
        default="http",
        help="call the gRPC API (protobuf) instead of HTTP",
    )
    lt.add_argument("--endpoint", choices=["dispatch", "etr"], default="dispatch")
    mode = lt.add_mutually_exclusive_group()
    mode.add_argument("--concurrency", type=int, nargs="+", help="closed-loop levels, e.g. 1 2 4 8")
    mode.add_argument("--rate", type=float, nargs="+", help="open-loop requests/s, e.g. 10 20 40")
    lt.add_argument("--duration", type=float, default=10.0, help="seconds per step")
    lt.add_argument("--stop-p99-ms", type=float, default=None, help="stop after a step over it")
    lt.add_argument("--requests", type=int, default=64, help="distinct bodies to cycle through")
    lt.add_argument("--riders", type=int, default=100, help="dispatch: riders per round")
    lt.add_argument("--orders", type=int, default=20, help="orders per round / ETR request")
    lt.add_argument("--mdrp-day", type=Path, default=None, help="dispatch: a real day's rounds")
    lt.add_argument("--token", default=None, help="an API key (Authorization: Bearer)")
    lt.add_argument("--out", type=Path, default=Path("loadtest"), help="CSV and PNG go here")
    lt.set_defaults(run=_loadtest)

    md = sub.add_parser(
        "models", help="ETR versions: in the repository, served, rolled live (explicit control)"
    )
    md_sub = md.add_subparsers(dest="action", required=True)
    md_list = md_sub.add_parser("list", help="versions in models/etr and what the app serves")
    md_load = md_sub.add_parser("load", help="serve VERSION: replicas swap, none restarts")
    md_load.add_argument("version")
    md_load.add_argument(
        "--no-keep", action="store_true", help="unload the replaced version (default: keep warm)"
    )
    md_unload = md_sub.add_parser("unload", help="free a warm (not serving) VERSION")
    md_unload.add_argument("version")
    for p in (md_list, md_load, md_unload):
        p.add_argument(
            "--address",
            default=None,
            help="the Ray dashboard (default: $RAY_DASHBOARD_ADDRESS, else http://127.0.0.1:8265)",
        )
        p.add_argument("--app", default=None, help="the application (default: the one with Etr)")
        p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a roll")
        p.set_defaults(run=_models)

    k8s = sub.add_parser("k8s", help="Kubernetes manifests (KubeRay)")
    k8s_sub = k8s.add_subparsers(dest="what", required=True)
    rs = k8s_sub.add_parser("rayservice", help="a KubeRay RayService from a Serve config")
    rs.add_argument(
        "--config",
        type=Path,
        default=Path("deploy/production.yaml"),
        help="a Serve config or plan (default: the production one, API keys on)",
    )
    rs.add_argument("--image", required=True, help="an image with Ray and orml-serve installed")
    rs.add_argument("--ray-version", default=None, help="Ray in the image (default: this one's)")
    rs.add_argument("--name", default="orml")
    rs.add_argument("--namespace", default=None)
    rs.add_argument("--gpus-per-pod", type=int, default=1)
    rs.add_argument(
        "--secret", default=None, help="a Secret with ORML_API_TOKENS, ORML_REDIS_URL, ..."
    )
    rs.add_argument("-o", "--out", type=Path, default=None, help="default: standard output")
    rs.set_defaults(run=_k8s)

    ex = sub.add_parser("example", help="print a valid request body for an endpoint")
    ex_sub = ex.add_subparsers(dest="what", required=True)
    exd = ex_sub.add_parser("dispatch", help="a generated round as /v1/dispatch JSON")
    exd.add_argument("--riders", type=int, default=50)
    exd.add_argument("--orders", type=int, default=20)
    exe = ex_sub.add_parser("etr", help="generated orders as /v1/etr JSON")
    exe.add_argument("--orders", type=int, default=5)
    exs = ex_sub.add_parser("solve", help="a Li & Lim instance as /v1/routes/solve JSON")
    exs.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=Path("data/pdptw/instances/lc101.txt"),
        help="a Li & Lim instance file (default: the bundled lc101)",
    )
    exs.add_argument("--time-limit", type=float, default=5.0, help="solver seconds")
    for p in (exd, exe, exs):
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--pretty", action="store_true", help="indented JSON")
        p.set_defaults(run=_example)
    args = ap.parse_args(argv)
    try:
        return int(args.run(args))
    except (ValueError, RuntimeError) as exc:
        print(f"orml: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
