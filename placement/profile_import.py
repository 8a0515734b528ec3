"""Measurements made on a lent device, written as the profiles the planner reads.

    python -m placement.profile_import --device-type H100 --host-cores 16 \\
        --etr ETR.json --or-solver OR.json --rounds ROUNDS.json [ROUNDS.json ...] \\
        --source DIR [--out profiles]

A device is lent for minutes and measures with the project's own tools: ``bench/etr.py
--profiles`` (the ETR model by batch), ``python -m placement.profiler or_solver`` (the solver's
memory and one round) and ``bench/kernels.py --round-sizes`` (whole dispatch rounds by size, on
the card and on the same host's CPU cores, in one run). Those files keep what each tool saw;
this turns them into ``devices.profiles`` profiles, naming the card (``bench/etr.py`` records
the host's architecture, not the card), the source folder and the command, and marks what was
not measured:

- ``profiles/etr/<type>-<runtime>.json``: the ETR model's points as measured; its device
  memory is the CUDA context the solver's profile measured on the same card (NVML) plus the
  model's weights and the pool's growth with the batch.
- ``profiles/or_solver/<type>-<backend>.json``: the solver's memory from its profile, and
  ``round_sizes`` from the rounds runs (the certified round with route improvement, the
  production path); its one point is the rounds runs' 300 x 100 round, which supersedes the
  profiler's own (an older build of the solver, when the profile is older).
- ``profiles/or_solver/cpu<n>-numpy.json`` (``--cpu``): the same rounds on the host's ``n``
  cores, a CPU node as a placement target. Memory there was not measured: it takes the 2-core
  profile's process figures (the same code and round), said in its ``basis``.

The rounds runs keep medians only: a round size's p99 is left unset (None), and the one
point's p99 is its median, said in the ``basis``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from devices.profiles import ModelProfile, load_profile

ROOT = Path(__file__).resolve().parents[1]


def round_sizes(runs: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    """Per round size, the median ms of ``backend``'s certified round with improvement
    (the last run of a size wins: later files are newer)."""
    by_size: dict[str, float] = {}
    for run in runs:
        for r in run.get("round", []):
            if r["backend"] == backend and r["solver"] == "certified" and r["improve"]:
                by_size[r["round"]] = float(r["median_ms"])
    order = sorted(by_size, key=lambda s: tuple(int(x) for x in s.split("x")))
    return [{"round": s, "p50_ms": round(by_size[s], 3), "p99_ms": None} for s in order]


def etr_profile(raw: dict[str, Any], device_type: str, context_mb: float, meta: dict) -> dict:
    """``bench/etr.py``'s GPU profile on ``device_type``; ``context_mb``: the card's CUDA
    context as NVML measured it for the solver on the same card."""
    pts = sorted(raw["points"], key=lambda p: p["batch"])
    first, last = pts[0], pts[-1]
    per_row = max(0, last["memory_bytes"] - first["memory_bytes"]) / max(
        1, last["batch"] - first["batch"]
    )
    return {
        "model": "etr",
        "device_type": device_type,
        "runtime": raw["runtime"],
        "measured": raw["measured"],
        "basis": "bench/etr.py --profiles (model calls by batch); context: the CUDA context "
        "NVML measured for the OR solver on the same card",
        "context_mb": context_mb,
        "weights_mb": round(raw["weights_bytes"] / 2**20, 4),
        "workspace_mb": round(first["memory_bytes"] / 2**20, 4),
        "per_row_kb": round(per_row / 1024, 4),
        "points": [
            {"batch": p["batch"], "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"]} for p in pts
        ],
        **meta,
    }


def import_measurements(
    device_type: str,
    host_cores: int,
    etr: Path,
    or_solver: Path,
    rounds: list[Path],
    source: str,
    command: str,
    cpu: bool = True,
) -> dict[str, dict[str, Any]]:
    """{relative path under profiles/: profile dict} for the card and (``cpu``) its host's
    CPU cores."""
    solver = load_profile(or_solver)
    if solver.device_type != device_type:
        raise ValueError(f"{or_solver}: measured on {solver.device_type}, not {device_type}")
    runs = [json.loads(p.read_text()) for p in rounds]
    meta = {"host": f"{host_cores} host cores ({source})", "command": command}
    card = device_type.lower()
    card_rounds = round_sizes(runs, solver.runtime)
    out = {
        f"etr/{card}-{json.loads(etr.read_text())['runtime']}.json": etr_profile(
            json.loads(etr.read_text()), device_type, solver.context_mb, meta
        ),
        f"or_solver/{card}-{solver.runtime}.json": {
            **solver.model_dump(exclude={"round_sizes", "host", "command"}),
            "measured": runs[-1]["meta"]["date"],
            "basis": f"dispatch_round on the card ({solver.runtime}), the certified round with "
            "improvement, medians (p99 not measured: the median stands in); memory: "
            f"placement.profiler of {solver.measured}",
            "points": [_first_point(card_rounds)],
            "round_sizes": card_rounds,
            **meta,
        },
    }
    if not cpu:
        return _checked(out)
    base = load_profile(ROOT / "profiles" / "or_solver" / "cpu-numpy.json")
    cpu_rounds = round_sizes(runs, "numpy")
    if cpu_rounds:
        out[f"or_solver/cpu{host_cores}-numpy.json"] = {
            **base.model_dump(exclude={"round_sizes", "host", "command"}),
            "device_type": f"CPU-{host_cores}core",
            "measured": runs[-1]["meta"]["date"],
            "basis": f"dispatch_round on the {device_type}'s host, {host_cores} cores (NumPy, "
            "compiled builds), the certified round with improvement, medians; p99 not "
            "measured: the median stands in; memory not measured there: the CPU-2core "
            "profile's process figures (the same code and round)",
            "points": [_first_point(cpu_rounds)],
            "round_sizes": cpu_rounds,
            **meta,
        }
    return _checked(out)


def _first_point(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The 300 x 100 round (the profiles' unit of work) as a batch-1 point, p99 its median;
    ValueError when the runs have none."""
    for r in rounds:
        if r["round"] == "300x100":
            return {"batch": 1, "p50_ms": r["p50_ms"], "p99_ms": r["p50_ms"]}
    raise ValueError("the rounds runs have no 300x100 round (the profiles' unit of work)")


def _checked(out: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    for profile in out.values():
        ModelProfile.model_validate(profile)  # refuse to write what the planner cannot read
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device-type", required=True, help="a name from devices/gpu_types.yaml")
    ap.add_argument("--host-cores", type=int, required=True)
    ap.add_argument("--etr", type=Path, required=True, help="bench/etr.py --profiles output")
    ap.add_argument("--or-solver", type=Path, required=True, help="placement.profiler output")
    ap.add_argument("--rounds", type=Path, nargs="+", required=True, help="bench/kernels.py")
    ap.add_argument("--source", required=True, help="where the measurements are kept")
    ap.add_argument(
        "--cpu",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also write the host's CPU profile from the NumPy rounds",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "profiles")
    args = ap.parse_args()
    command = "python -m placement.profile_import " + shlex.join(sys.argv[1:])
    written = import_measurements(
        args.device_type,
        args.host_cores,
        args.etr,
        args.or_solver,
        args.rounds,
        args.source,
        command,
        args.cpu,
    )
    for name, profile in written.items():
        path = args.out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(profile, indent=2) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
