"""An emulated device: the real model's answers, a GPU type's call times.

For experiments at a scale this machine's hardware cannot show (batching on a GPU, several
cards): each call computes its answer with a real CPU runtime, then sleeps off the CPU until
the time a profile gives for a call of that many rows has passed (``ModelProfile.latency_ms``
at p50, ``devices.profiles``: measured or assumed). One call at a time per device, as on one
card. Figures measured with it are emulated and must be labelled so.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from etr.runtime import EtrRuntime

PROFILES = Path(__file__).resolve().parents[1] / "profiles"


class EmulatedEtr(EtrRuntime):
    """inner : a real runtime (the answers); profile : a ``devices.profiles.ModelProfile``
    (the times)."""

    device = "cpu"

    def __init__(self, inner: EtrRuntime, profile: Any) -> None:
        super().__init__(inner.n_features, inner.max_batch)
        self.inner, self.profile = inner, profile
        self.name = f"emulated:{profile.device_type}"
        self._device = threading.Lock()

    def _run(self, features: Any) -> Any:
        with self._device:
            start = time.perf_counter()
            out = self.inner.predict(features)
            left = self.profile.latency_ms(len(features), "p50") / 1e3
            left -= time.perf_counter() - start
            if left > 0:
                time.sleep(left)
        return out


def load_emulated(inner: EtrRuntime, spec: str) -> EmulatedEtr:
    """``spec``: a profile JSON file, or a GPU type name (its profile under profiles/etr,
    measured or the scaled estimate). Raises ValueError when neither."""
    from devices.profiles import ProfileSet, load_profile

    path = Path(spec)
    if path.suffix == ".json":
        if not path.is_file():
            raise ValueError(f"emulated ETR profile {spec} does not exist")
        return EmulatedEtr(inner, load_profile(path))
    return EmulatedEtr(inner, ProfileSet.load(PROFILES).get("etr", spec))
