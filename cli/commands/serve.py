"""``orml serve``: start a local Ray, deploy the app, block until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml serve`` and its options to the command line's subcommands."""
    srv = sub.add_parser("serve", help="start a local Ray, deploy the app, block until Ctrl-C")
    srv.add_argument(
        "--config",
        type=Path,
        default=Path("deploy.yaml"),
        help="the Ray Serve config to deploy (default: deploy.yaml)",
    )
    srv.add_argument(
        "--host",
        default=None,
        help="the address the app's HTTP and gRPC listeners bind (default: the config's, "
        "0.0.0.0 in deploy.yaml; Ray's own ports are not governed by it: docs/deploy.md)",
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
    srv.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import signal

    # A signal before the handlers below are in place (importing Ray's side takes a second
    # or more on a slow machine) is remembered, not the default action's death by SIGTERM.
    early: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: early.append(signum))
    print("starting ...", flush=True)

    from ops import local
    from ops.launch import StartProgress, launch, quiet_ray_start_noise

    quiet_ray_start_noise()

    stop = local.StopRequest()  # not a threading.Event: set from a signal handler

    def on_signal(*_: object) -> None:
        if stop.is_set():
            return  # a repeated signal (a group signal, a forwarding parent): one stop is enough
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
    if early:
        on_signal()
    try:
        launched = launch(
            args.config,
            throughput_mode=not args.ray_default_mode,
            host=args.host,
            port=args.port,
            grpc_port=args.grpc_port,
            dashboard_port=args.dashboard_port,
            metrics_port=args.metrics_port,
            stop=stop,
            progress=StartProgress(lambda line: print(line, flush=True)),
        )
    except BaseException as exc:
        # A signal during start-up: as a stop request (`stop`), inside ray.init as Ray's
        # SystemExit, or as the error of a wait it cut short.
        signalled = stop.is_set() or isinstance(exc, SystemExit | KeyboardInterrupt)
        if not signalled:
            local.stop_if_started()
            raise
        print("stopping during start-up ...", flush=True)
        local.stop_if_started()
        # Ray's core worker, torn down in the middle of ray.init, can crash the interpreter's
        # own finalization afterwards (seen: SIGSEGV after "stopped", a SIGTERM 4 s into a
        # start): everything is stopped and removed by now, so the process ends here.
        return _stopped(cleanly=False)
    ep = launched.endpoints
    for note in launched.notes:
        print(f"sized for this machine: {note}")
    print(f"API        {ep.http}   POST /v1/dispatch, /v1/etr, /v1/etr/bulk, /v1/routes/solve")
    print(f"Health     {ep.http}   GET /healthz (alive), /readyz (warm); /admin/status")
    print(f"KServe v2  {ep.http}   /v2/models/etr[/versions/N]/infer, /config, /stats")
    print(f"OpenAPI    {ep.http}/docs")
    print(f"gRPC       {ep.grpc}   orml.v1.Orml (serve_app/grpc_api/orml.proto)")
    print(f"Dashboard  {ep.dashboard}   (log in with the token `ray get-auth-token` prints)")
    print(f"Metrics    {ep.metrics}   (Prometheus scrape target)")
    print(f"Cache      {launched.cache}")
    print("Ctrl-C or SIGTERM stops.", flush=True)
    while not stop.wait(0.5):
        pass
    # Serve's controller is ended while its own graceful-shutdown task is pending, which Ray
    # reports as a "(raylet) ... graceful_shutdown failed" line: said once, here.
    print("stopping ... (a raylet line about graceful_shutdown may follow: expected)", flush=True)
    return _stopped(local.stop())


def _stopped(cleanly: bool) -> int:
    print("stopped", flush=True)
    if not cleanly:  # Ray's client is left connected to a dying cluster: see local.stop
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
