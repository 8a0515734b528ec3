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
import sys

from cli.commands import example, k8s, loadtest, models, plan, replay, serve, simulate, solve
from cli.commands import round as round_  # the module, not the builtin

#: In the order ``orml --help`` lists them.
COMMANDS = (round_, serve, solve, plan, replay, simulate, loadtest, models, k8s, example)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="orml", description="orml-serve command line")
    sub = ap.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(sub)
    args = ap.parse_args(argv)
    try:
        return int(args.run(args))
    except (ValueError, RuntimeError) as exc:
        print(f"orml: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
