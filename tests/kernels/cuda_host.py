"""Build and run the host harnesses (``insertion_host_harness.cu``, ``improve_host_harness.cu``):
the CUDA kernels' source, run on the CPU."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np

from kernels.arrays import STOP_ARRAYS, OrderArrays, RouteArrays
from kernels.insertion_costs import route_context
from kernels.insertion_types import CUDA_SOURCE, Insertions

HARNESS = Path(__file__).with_name("insertion_host_harness.cu")


def nvcc() -> str | None:
    return shutil.which("nvcc")


#: The GPU generations we place on, oldest and newest (T4 .. H100).
ARCHES = ("sm_75", "sm_90")


def compile_ptx(source: Path, out_dir: Path) -> dict[str, str]:
    """PTX of ``source`` per ``ARCHES`` with the kernels' rounding (no fused multiply-add);
    raises CalledProcessError naming nvcc's complaint."""
    ptx = {}
    for arch in ARCHES:
        out = out_dir / f"{source.stem}_{arch}.ptx"
        subprocess.run(
            [
                nvcc() or "nvcc",
                "--fmad=false",
                f"-arch={arch}",
                "-ptx",
                str(source),
                "-o",
                str(out),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        ptx[arch] = out.read_text()
    return ptx


def _build(source: Path, out_dir: Path) -> Path:
    """A host harness built with the kernels' rounding (no fused multiply-add)."""
    exe = out_dir / source.stem
    subprocess.run(
        [
            nvcc() or "nvcc",
            "-O2",
            "--fmad=false",
            "-I",
            str(CUDA_SOURCE.parent),
            "-o",
            str(exe),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return exe


def build_harness(out_dir: Path) -> Path:
    return _build(HARNESS, out_dir)


def run_harness(
    exe: Path, work: Path, routes: RouteArrays, orders: OrderArrays, late_weight: float, pairs: bool
) -> Insertions:
    ctx = route_context(routes)
    work.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(ctx, name) for name in ctx.__dataclass_fields__}
    for name in ("speed", "capacity", "n_stops", "insert_limit"):
        arrays[name] = getattr(routes, name)
    for name in orders.__dataclass_fields__:
        arrays[name] = getattr(orders, name)
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(work / f"{name}.bin")
    n_routes, n_slots = routes.shape
    subprocess.run(
        [
            str(exe),
            str(work),
            str(n_routes),
            str(n_slots),
            str(len(orders)),
            str(int(pairs)),
            repr(float(late_weight)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    shape = (n_routes,) if pairs else (n_routes, len(orders))

    def read(name: str, dtype: type) -> np.ndarray:
        return np.fromfile(work / f"out_{name}.bin", dtype=dtype).reshape(shape)

    return Insertions(
        cost=read("cost", np.float32),
        pickup_pos=read("pickup_pos", np.int32),
        dropoff_pos=read("dropoff_pos", np.int32),
        travel=read("travel", np.float32),
        lateness=read("lateness", np.float32),
        dropoff_arrival=read("dropoff_arrival", np.float32),
    )


IMPROVE_HARNESS = Path(__file__).with_name("improve_host_harness.cu")


def build_improve_harness(out_dir: Path) -> Path:
    """``improve_host_harness.cu``: ``improve.cu``'s route search, run on the CPU."""
    return _build(IMPROVE_HARNESS, out_dir)


def run_improve_harness(
    exe: Path,
    work: Path,
    routes: RouteArrays,
    owner: np.ndarray,
    rows: np.ndarray,
    late_weight: float,
    max_passes: int = 2,
    tol_s: float = 1e-2,
) -> tuple[RouteArrays, np.ndarray, np.ndarray]:
    """(routes, owner, moves per row) as the CUDA source computes them."""
    work.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(routes, name) for name in routes.__dataclass_fields__}
    arrays["owner"] = np.asarray(owner, np.int32)
    arrays["rows"] = np.asarray(rows, np.int64)
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(work / f"{name}.bin")
    n_routes, n_slots = routes.shape
    subprocess.run(
        [
            str(exe),
            str(work),
            str(n_routes),
            str(n_slots),
            str(len(rows)),
            repr(float(late_weight)),
            str(max_passes),
            repr(float(tol_s)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )

    def read(name: str, like: np.ndarray) -> np.ndarray:
        return np.fromfile(work / f"out_{name}.bin", dtype=like.dtype).reshape(like.shape)

    edited = {name: read(name, getattr(routes, name)) for name in STOP_ARRAYS}
    return (
        replace(routes, **edited),
        read("owner", arrays["owner"]),
        read("moves", np.zeros(len(rows), np.int32)),
    )


ROUTE_EDIT_HARNESS = Path(__file__).with_name("route_edit_host_harness.cu")


def build_route_edit_harness(out_dir: Path) -> Path:
    """``route_edit_host_harness.cu``: ``route_edit.cu``'s insertion, run on the CPU."""
    return _build(ROUTE_EDIT_HARNESS, out_dir)


def run_route_edit_harness(
    exe: Path, work: Path, routes: RouteArrays, owner: np.ndarray, values: dict[str, np.ndarray]
) -> tuple[RouteArrays, np.ndarray]:
    """(routes, owner) as the CUDA source edits them; ``values`` holds the launch's rows,
    order index, orders, positions and keys by parameter name
    (``_route_edit_cuda.launch_values``)."""
    work.mkdir(parents=True, exist_ok=True)
    arrays = {name: getattr(routes, name) for name in routes.__dataclass_fields__}
    arrays["owner"] = np.asarray(owner, np.int32)
    arrays |= values
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(work / f"{name}.bin")
    n_routes, n_slots = routes.shape
    k, n_orders = len(values["rows"]), len(values["size"])
    subprocess.run(
        [str(exe), str(work), str(n_routes), str(n_slots), str(k), str(n_orders)],
        check=True,
        capture_output=True,
        text=True,
    )

    def read(name: str, like: np.ndarray) -> np.ndarray:
        return np.fromfile(work / f"out_{name}.bin", dtype=like.dtype).reshape(like.shape)

    edited = {
        name: read(name, getattr(routes, name))
        for name in (*STOP_ARRAYS, "n_stops", "insert_limit")
    }
    return replace(routes, **edited), read("owner", arrays["owner"])
