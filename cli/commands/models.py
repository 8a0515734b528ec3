"""``orml models``: ETR versions: in the repository, served, rolled live (explicit control)."""

from __future__ import annotations

import argparse
import json
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml models`` and its options to the command line's subcommands."""
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
        p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
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
