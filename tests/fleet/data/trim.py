"""Keep of a ``bench/fleet_vs_real.py --json`` file what the simulation needs to be held to it.

python tests/fleet/data/trim.py PATH   (writes tests/fleet/data/fleet_vs_real.json)
"""

import json
import sys
from pathlib import Path

KEEP = ("edge_ms", "device_ms", "replica_start_s", "arrivals", "bounds", "phases")

got = json.loads(Path(sys.argv[1]).read_text())
runs = [{k: run[k] for k in KEEP} for run in got["real_runs"]]
for run in runs:
    run["arrivals"] = [[round(t, 4), k] for t, k in run["arrivals"]]
out = {"date": got["date"], "emulated": True, "real_runs": runs}
(Path(__file__).parent / "fleet_vs_real.json").write_text(json.dumps(out, separators=(",", ":")))
