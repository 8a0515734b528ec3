"""``orml k8s``: Kubernetes manifests (KubeRay)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml k8s`` and its options to the command line's subcommands."""
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
    rs.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
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
        env={
            **local.THROUGHPUT_ENV,
            **local.AUTOSCALING_ENV,
            **local.METRICS_ENV,
            **local.PROCESS_ENV,
        },
    )
    text = to_yaml(rayservice(config, options))
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
