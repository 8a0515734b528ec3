"""Where the CPU of one ``/v1/etr`` request goes: flame graphs of every Serve process under load.

    python bench/flame.py [--quick] [--seconds 10] [--concurrency 32] [--label after]
                          [--json PATH] [--out DIR]

Starts the app as ``bench/peer_triton.py`` does (deploy.yaml's CPU placement, both caches
off), drives ``/v1/etr`` with ``hey`` (one order per request) and, while it runs, samples every
Serve process (HTTP proxy, Ingress, Etr replicas) with ``py-spy record`` (native frames off,
idle frames off). Writes ``DIR/flame-etr-LABEL-<process>.svg`` and prints a table: per
process, CPU seconds and CPU milliseconds per answered request (read from /proc before and
after, so it counts native code too), and requests/s.

Run it on an older commit to get the "before" graphs: from a worktree of that commit, with
this file copied into its ``bench/`` (it only needs ``ops.local.local_serve``,
``run_app``, ``wait_ready`` and ``DispatchAppArgs``, which are older than the edge work).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from common import log, parser, run_hey

from ops import local
from serve_app.config import DispatchAppArgs

# The order bench/peer_triton.py sends (ops.hostile.order(0)), spelled out so this
# file also runs on commits older than that module.
ORDER = {
    "id": "o-0",
    "pickup": {"lat": 31.23, "lng": 121.47},
    "dropoff": {"lat": 31.24, "lng": 121.48},
    "created_at": 1767225600.0,
    "ready_at": 1767226200.0,
    "promised_at": 1767227700.0,
}
# py-spy comes with the dev extra, beside this interpreter (its venv need not be activated).
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
ROLES = {"ProxyActor": "proxy", "Ingress": "ingress", "Etr": "etr"}


def serve_processes() -> dict[str, psutil.Process]:
    """Serve's processes by role (``proxy``, ``ingress``, ``etr``, numbered past the first)."""
    found: dict[str, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        title = " ".join(proc.info["cmdline"] or ())
        if not title.startswith("ray::"):
            continue
        for marker, role in ROLES.items():
            if marker in title and "Controller" not in title:
                name, n = role, 1
                while name in found:
                    n += 1
                    name = f"{role}{n}"
                found[name] = proc
    return found


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = parser(__doc__, "4 s of load")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--label", default="after", help="names the SVGs: flame-etr-LABEL-*.svg")
    ap.add_argument("--svg-dir", type=Path, default=Path(__file__).parents[1] / "docs")
    args = ap.parse_args()
    seconds = 4.0 if args.quick else args.seconds
    body = Path(f"/tmp/orml-flame-body-{args.label}.json")
    body.write_text(json.dumps({"orders": [ORDER]}))
    with local.local_serve(num_cpus=4, namespace="bench-flame") as ep:
        local.run_app(
            DispatchAppArgs(
                backend="numpy",
                etr_runtime="onnxruntime",
                cache={"enabled": False, "responses": False},
            )
        )
        local.wait_ready(ep.http)
        url = f"{ep.http}/v1/etr"
        run_hey(url, body, ["-z", "3s", "-c", "8"])  # warm
        procs = serve_processes()
        log(f"sampling {', '.join(f'{k} ({p.pid})' for k, p in procs.items())}")
        spies = {
            role: subprocess.Popen(
                [
                    PY_SPY,
                    "record",
                    "--pid",
                    str(p.pid),
                    "--duration",
                    str(int(seconds)),
                    "--rate",
                    "200",
                    "--format",
                    "flamegraph",
                    "--output",
                    str(args.svg_dir / f"flame-etr-{args.label}-{role}.svg"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for role, p in procs.items()
        }
        time.sleep(0.5)  # py-spy attaches
        before = {role: cpu_s(p) for role, p in procs.items()}
        out, _ = run_hey(url, body, ["-z", f"{seconds}s", "-c", str(args.concurrency)])
        after = {role: cpu_s(p) for role, p in procs.items()}
        for role, spy in spies.items():
            if spy.wait() != 0:
                log(f"py-spy on {role}: {spy.stderr.read().strip()[-300:]}")
    answered = sum(int(n) for n in re.findall(r"\[200\]\s+(\d+) responses", out))
    rps = answered / seconds
    rows = [
        {
            "process": role,
            "cpu_s": round(after[role] - before[role], 2),
            "cpu_ms_per_request": round((after[role] - before[role]) * 1e3 / max(answered, 1), 3),
        }
        for role in procs
    ]
    total = sum(r["cpu_ms_per_request"] for r in rows)
    print(f"{args.label}: {rps:.0f} req/s at c={args.concurrency}\n")
    print("| process | CPU s | CPU ms / request |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r['process']} | {r['cpu_s']} | {r['cpu_ms_per_request']} |")
    print(f"| all Serve processes | | {total:.3f} |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"label": args.label, "rps": rps, "answered": answered, "processes": rows}, indent=1
            )
        )


if __name__ == "__main__":
    main()
