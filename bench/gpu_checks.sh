#!/usr/bin/env bash
# Everything a CUDA GPU is needed for, in one pass: the GPU tests (CuPy kernels against their
# NumPy twins, the priority streams), then the GPU benches and profiles. Each step has its own
# time limit (together under 10 minutes) and a failed step does not stop the next; results go to OUT (default bench/out/gpu),
# with one log and one tarball of every table, JSON, CSV, PNG and profile.
#
#     bash bench/gpu_checks.sh [OUT]
#
# Needs CuPy, nvcc and this project's Python requirements for the kernels (no Ray, no Redis).
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-bench/out/gpu}")
mkdir -p "$out/files"
log="$out/log.txt"
export PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    echo "=== $name (limit ${limit}s) $(date -u +%H:%M:%S)" | tee -a "$log"
    local t0=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    echo "=== $name: exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s" | tee -a "$log"
}

step device 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; python3 -V; python3 -c "import cupy, numpy, numba; print(\"cupy\", cupy.__version__, \"numpy\", numpy.__version__, \"numba\", numba.__version__)"; nproc'
# The stream-priority bench first: it is what a short lease must not miss.
step stream_priority 110 python3 bench/stream_priority.py \
    --json "$out/files/stream_priority.json" --out "$out/files"
step tests 100 python3 -m pytest -q -p no:cacheprovider -m "gpu or nvcc" \
    tests/kernels tests/planner/test_dispatch_round.py tests/etr/test_runtimes.py
# Insertion pricing at small sizes and whole rounds of 300 x 100 and 1000 x 300 on both
# backends (certified and dense passes), then the 5000 x 2000 round in a step of its own.
step kernels 80 python3 bench/kernels.py --quick --json "$out/files/kernels.json" \
    --out "$out/files"
step big_round 120 python3 bench/kernels.py --round-sizes 5000x2000 \
    --json "$out/files/kernels_5000x2000.json" --out "$out/files/big_round"
step gpu_profile 45 python3 bench/gpu_profile.py --json "$out/files/gpu_profile.json" \
    --out "$out/files"
step etr 60 python3 bench/etr.py --quick --json "$out/files/etr.json" --out "$out/files" \
    --profiles "$out/files/profiles"
step or_solver_profile 45 python3 -m placement.profiler or_solver --backend cupy
cp -r profiles/or_solver "$out/files/profiles_or_solver" 2>/dev/null
tar -czf "$out/gpu_results.tgz" -C "$out" files && rm -rf "$out/files"
echo "=== done $(date -u +%H:%M:%S)" | tee -a "$log"
