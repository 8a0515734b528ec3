"""The edge of the largest round: a dispatch at the configured limits over HTTP vs in-process.

    python bench/big_round.py [--quick] [--repeat 5] [--json PATH] [--out DIR]

One 5000-rider x 2000-order round (deploy.yaml's limits; --quick: 2000 x 800), planned
``--repeat`` times in this process (``dispatch_round``) and over HTTP by the app as deploy.yaml
runs it on the CPU, the two alternating (the host is shared and noisy: medians). Reports both
medians, their ratio, and the served round's stages (``timings_ms``: decode, ETR, pack, the
solver hop, unpack). Writes DIR/big_round.csv and (--json) every run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from common import log, parser, write_csv

from ops import local
from planner import dispatch_round, generate_round
from serve_app.config import DispatchAppArgs
from serve_app.schemas import DispatchRequest


def main() -> None:
    ap = parser(__doc__, "a 2000 x 800 round, three repeats")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    riders, orders = (2000, 800) if args.quick else (5000, 2000)
    repeat = 3 if args.quick else args.repeat
    round_ = generate_round(riders, orders, seed=5)
    body = DispatchRequest.from_domain(round_).model_dump_json().encode()
    log(f"round {riders} x {orders}: {len(body) / 2**20:.1f} MiB of JSON")
    dispatch_round(generate_round(8, 4, seed=1))  # load the compiled kernels here too
    rows = []
    headers = {"content-type": "application/json", "x-timeout-ms": "120000"}
    with local.local_serve(num_cpus=4, namespace="bench-big") as ep:
        local.run_app(DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime"))
        local.wait_ready(ep.http)
        with httpx.Client(base_url=ep.http, timeout=180) as client:
            client.post("/v1/dispatch", content=body, headers=headers).raise_for_status()
            for k in range(repeat):
                t0 = time.perf_counter()
                dispatch_round(round_)
                in_process = time.perf_counter() - t0
                t0 = time.perf_counter()
                got = client.post("/v1/dispatch", content=body, headers=headers)
                over_http = time.perf_counter() - t0
                got.raise_for_status()
                stages = got.json()["timings_ms"]
                rows.append({"run": k, "in_process_s": in_process, "http_s": over_http, **stages})
                log(f"  run {k}: in-process {in_process:.2f} s, HTTP {over_http:.2f} s")
    write_csv(args.out / "big_round.csv", rows)
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0] if key != "run"}
    ratio = med["http_s"] / med["in_process_s"]
    print(
        f"| round | in-process s | over HTTP s | ratio |\n|---|---|---|---|\n"
        f"| {riders} x {orders} ({len(body) / 2**20:.1f} MiB) | {med['in_process_s']:.2f} | "
        f"{med['http_s']:.2f} | {ratio:.2f}x |"
    )
    print(
        "\nserved stages (median ms): "
        + ", ".join(
            f"{k.removesuffix('_ms')} {med[k]:.0f}"
            for k in ("decode_ms", "etr_ms", "pack_ms", "solve_ms", "unpack_ms", "total_ms")
        )
    )
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "medians": med, "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
