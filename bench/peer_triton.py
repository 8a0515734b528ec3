"""Our ETR endpoint beside Triton Inference Server serving the same model on the same machine.

    python bench/peer_triton.py [--quick] [--rounds 3] [--seconds 8] [--json PATH] [--out DIR]

The peer: ``models/etr/1/model.onnx`` behind Triton (PyTriton from PyPI: Triton's C++ HTTP
front end and dynamic batcher, max batch 256, 0.5 ms queue delay, the model called through
ONNX Runtime in a Python function), in its own virtualenv made with the system Python
(``.venv-triton``, created here on first use: PyTriton's backend stub links the system's
libpython). Triton is sent the 39 features of one order, we the order itself (we compute the
features). Ours: the app as deploy.yaml runs it on the CPU (the ETR model in the ingress,
``etr_placement: auto``), both caches off, one order per request. Beside them, as context,
a no-op route on the same Serve cluster (``bench/noop_app.py``): the ceiling of Serve's
ingress here.

Load: ``hey`` (native), ``--seconds`` per step, each concurrency run against the three in
turn, ``--rounds`` times (the host is shared and noisy: medians of alternating runs). Per
server: the most requests/s with p99 <= 100 ms, and saturated (the most at any concurrency);
hey's own CPU share is reported (the generator shares the two cores). Writes
DIR/peer_triton.csv, DIR/peer_triton.png and (--json) every run.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, run_hey, write_csv

from ops import local, ports
from ops.hostile import order
from serve_app.config import DispatchAppArgs

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-triton"
SYSTEM_PYTHON = "/usr/bin/python3"
P99_TARGET_MS = 100.0
SERVERS = ("ours", "triton", "serve no-op")


def triton_python() -> Path:
    """The PyTriton virtualenv's interpreter, created with the system Python if missing."""
    python = VENV / "bin" / "python"
    if not python.exists():
        log(f"creating {VENV} with {SYSTEM_PYTHON} (PyTriton, ONNX Runtime; a few minutes)")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "nvidia-pytriton", "onnxruntime", "numpy"],
            check=True,
        )
    return python


def start_triton(ports: list[int], log_path: Path) -> subprocess.Popen:
    """The Triton peer on ``ports`` (HTTP, gRPC, metrics), once Triton says it is ready
    (``/v2/health/ready``); its output goes to ``log_path``. RuntimeError if it exits or is
    not ready within 180 s."""
    with log_path.open("w") as out:
        proc = subprocess.Popen(
            [
                str(triton_python()),
                str(ROOT / "bench/triton_etr_server.py"),
                "--model",
                str(ROOT / "models/etr/1/model.onnx"),
                "--http-port",
                str(ports[0]),
                "--grpc-port",
                str(ports[1]),
                "--metrics-port",
                str(ports[2]),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # Asked over HTTP, not read from its output: Triton's own log lines can share a line with
    # the server script's, and a pipe nobody drains would stall it.
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{ports[0]}/v2/health/ready", timeout=2
            ) as got:
                if got.status == 200:
                    return proc
        except OSError:
            pass
        time.sleep(0.5)
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
    raise RuntimeError(f"Triton did not start (its log: {log_path})")


def hey(url: str, body: bytes, concurrency: int, seconds: float) -> dict:
    """One ``hey`` run: requests/s, p50/p99 ms, non-200 answers, hey's CPU share."""
    path = Path("/tmp") / f"orml-peer-body-{os.getpid()}"
    path.write_bytes(body)
    out, cpu = run_hey(url, path, ["-z", f"{seconds}s", "-c", str(concurrency)])

    def pct(p: int) -> float:
        got = re.search(rf"{p}% in ([\d.]+) secs", out)
        return float(got.group(1)) * 1e3 if got else float("nan")

    codes = {int(c): int(n) for c, n in re.findall(r"\[(\d+)\]\s+(\d+) responses", out)}
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "p50_ms": pct(50),
        "p99_ms": pct(99),
        "non_200": sum(n for c, n in codes.items() if c != 200),
        "hey_cpu_share": round(cpu / seconds, 2),
    }


def main() -> None:
    ap = parser(__doc__, "one round, 4 s steps, concurrency 1 and 32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument(
        "--ingress-replicas", type=int, default=1, help="ours: Ingress replicas (processes)"
    )
    ap.add_argument(
        "--no-access-log",
        action="store_true",
        help="ours: the Ingress without Serve's per-request access log (logging_config)",
    )
    ap.add_argument(
        "--serve-listener",
        action="store_true",
        help="ours: every request through Serve's listener (lean_listener off; the before)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rounds, seconds, levels = args.rounds, args.seconds, args.concurrency
    if args.quick:
        rounds, seconds, levels = 1, 4.0, [1, 32]
    triton = start_triton(ports.free_ports(3), args.out / "triton.log")
    runs: list[dict] = []
    try:
        with local.local_serve(num_cpus=4, namespace="bench-peer") as ep:
            from noop_app import Noop
            from ray import serve

            local.run_app(
                DispatchAppArgs(
                    backend="numpy",
                    etr_runtime="onnxruntime",
                    cache={"enabled": False, "responses": False},
                    lean_listener=not args.serve_listener,
                ),
                {
                    "Ingress": {
                        "num_replicas": args.ingress_replicas,
                        **(
                            {"logging_config": {"enable_access_log": False}}
                            if args.no_access_log
                            else {}
                        ),
                    }
                },
            )
            serve.run(Noop.bind(), name="noop", route_prefix="/noop")
            local.wait_ready(ep.http)
            triton_port = re.search(r"--http-port\s+(\d+)", " ".join(triton.args)).group(1)
            order_body = json.dumps({"orders": [order(0)]}).encode()
            from etr import features_from_orders
            from serve_app.schemas import OrderIn

            features = features_from_orders([OrderIn(**order(0)).to_domain()])
            triton_body = json.dumps(
                {
                    "inputs": [
                        {
                            "name": "features",
                            "shape": [1, 39],
                            "datatype": "FP32",
                            "data": features.tolist(),
                        }
                    ]
                }
            ).encode()
            targets = {
                "ours": (f"{ep.http}/v1/etr", order_body),
                "triton": (f"http://127.0.0.1:{triton_port}/v2/models/etr/infer", triton_body),
                "serve no-op": (f"{ep.http}/noop/v1/etr", order_body),
            }
            for url, body in targets.values():  # warm every path
                hey(url, body, 8, 2)
            for r in range(rounds):
                for c in levels:
                    for name in SERVERS:
                        url, body = targets[name]
                        got = {
                            "round": r,
                            "server": name,
                            "concurrency": c,
                            **hey(url, body, c, seconds),
                        }
                        runs.append(got)
                        log(
                            f"  round {r} c={c:<3} {name:<12} {got['rps']:7.0f} req/s "
                            f"p50 {got['p50_ms']:6.1f} p99 {got['p99_ms']:6.1f} ms "
                            f"(hey {got['hey_cpu_share']} CPU)"
                        )
    finally:
        os.killpg(triton.pid, 15)
    write_csv(args.out / "peer_triton.csv", runs)
    table = summarize(runs, levels)
    print_table(table, levels)
    plot(table, levels, args.out / "peer_triton.png")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "summary": table}, indent=1))


def summarize(runs: list[dict], levels: list[int]) -> dict:
    """Medians per server and concurrency; req/s at p99 <= 100 ms and saturated."""
    out: dict = {}
    for name in SERVERS:
        per: dict = {}
        for c in levels:
            mine = [r for r in runs if r["server"] == name and r["concurrency"] == c]
            per[c] = {
                k: statistics.median(r[k] for r in mine)
                for k in ("rps", "p50_ms", "p99_ms", "hey_cpu_share")
            }
            per[c]["non_200"] = sum(r["non_200"] for r in mine)
        within = [per[c]["rps"] for c in levels if per[c]["p99_ms"] <= P99_TARGET_MS]
        out[name] = {
            "by_concurrency": per,
            "rps_at_p99_100ms": max(within, default=0.0),
            "rps_saturated": max(per[c]["rps"] for c in levels),
        }
    return out


def print_table(table: dict, levels: list[int]) -> None:
    print(
        "| concurrency | ours req/s (p50 / p99 ms) | Triton req/s (p50 / p99 ms) | ours / Triton "
        "| Serve no-op req/s | hey CPU |"
    )
    print("|---|---|---|---|---|---|")
    for c in levels:
        o, t, n = (table[s]["by_concurrency"][c] for s in SERVERS)
        print(
            f"| {c} | {o['rps']:.0f} ({o['p50_ms']:.1f} / {o['p99_ms']:.1f}) | "
            f"{t['rps']:.0f} ({t['p50_ms']:.1f} / {t['p99_ms']:.1f}) | "
            f"{o['rps'] / t['rps']:.2f}x | {n['rps']:.0f} | {o['hey_cpu_share']:.2f} |"
        )
    o, t = table["ours"], table["triton"]
    print(
        f"\nreq/s at p99 <= {P99_TARGET_MS:.0f} ms: ours {o['rps_at_p99_100ms']:.0f}, Triton "
        f"{t['rps_at_p99_100ms']:.0f} ({o['rps_at_p99_100ms'] / t['rps_at_p99_100ms']:.2f}x); "
        f"saturated: ours {o['rps_saturated']:.0f}, Triton {t['rps_saturated']:.0f} "
        f"({o['rps_saturated'] / t['rps_saturated']:.2f}x)"
    )


def plot(table: dict, levels: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name in SERVERS:
        per = table[name]["by_concurrency"]
        a.plot(levels, [per[c]["rps"] for c in levels], "o-", label=name)
        b.plot(levels, [per[c]["p99_ms"] for c in levels], "o-", label=name)
    a.set(xlabel="concurrency (hey)", ylabel="requests/s (median)", xscale="log")
    b.set(xlabel="concurrency (hey)", ylabel="p99 ms (median)", xscale="log")
    b.axhline(P99_TARGET_MS, color="grey", lw=0.8, ls="--")
    a.legend()
    fig.suptitle("/v1/etr, one order per request, caches off: ours vs Triton (same model, box)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
