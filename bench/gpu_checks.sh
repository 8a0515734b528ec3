#!/usr/bin/env bash
# Everything a CUDA GPU is needed for, in one pass: whole rounds on both backends (the certified
# passes against the dense reference), the GPU tests (CuPy kernels against their NumPy twins),
# the 5000 x 2000 round, where a CuPy round's host time goes, the OR solver's profile. Each step
# has its own time limit (together under 8 minutes on an H100) and a failed step does not stop
# the next; results go to OUT (default bench/out/gpu), with one log and one tarball of every
# table, JSON, CSV, PNG and profile.
#
#     bash bench/gpu_checks.sh [OUT]
#
# Needs CuPy, Numba and this project's Python requirements for the kernels, the settings and
# the packages' public names (pydantic, pydantic-settings, lazy-loader); no Ray, no Redis.
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

step device 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; python3 -V; python3 -c "import cupy, numpy, numba; print(\"cupy\", cupy.__version__, \"numpy\", numpy.__version__, \"numba\", numba.__version__)"; nproc; git log -1 --format="commit %h %s" 2>/dev/null'
# Whole rounds first: they are what a short lease must not miss. Both backends, the certified
# pass and the dense reference (every pair priced, the dense assignment on the host), without
# and with route improvement.
step rounds 175 python3 bench/kernels.py --round-sizes 300x100,1000x300,2000x800 \
    --json "$out/files/rounds.json" --out "$out/files/rounds"
# The GPU tests only: the nvcc compile checks and host harnesses need no GPU (CI runs them
# wherever nvcc is), and a lease's minutes go to what only a card can show.
step tests 110 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/kernels tests/planner/test_dispatch_round.py
step big_round 150 python3 bench/kernels.py --round-sizes 5000x2000 \
    --json "$out/files/rounds_5000x2000.json" --out "$out/files/big_round"
step gpu_profile 90 python3 bench/gpu_profile.py --json "$out/files/gpu_profile.json" \
    --out "$out/files"
# The round's cost by size on the card and on its host's cores (profiles/ for placement).
sizes=1000x300,2000x800,5000x2000
step or_solver_profile 100 bash -c "python3 -m placement.profiler or_solver --backend cupy \
    --repeats 20 --sizes $sizes && python3 -m placement.profiler or_solver --backend numpy \
    --repeats 20 --sizes $sizes"
cp -r profiles/or_solver "$out/files/profiles_or_solver" 2>/dev/null
tar -czf "$out/gpu_results.tgz" -C "$out" files && rm -rf "$out/files"
echo "=== done $(date -u +%H:%M:%S)" | tee -a "$log"
