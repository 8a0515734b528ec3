"""What a call costs in the fleet day: read from the measured profiles in ``profiles/``.

A call's median time on a whole card or CPU node of type T:

- ``or_solver``: one dispatch round, its work the round's rider x order pairs; the time is the
  solver profile's cost by round size on T (``ModelProfile.round_ms``, log-log between the
  measured sizes);
- ``etr``: one batch, its work the batch's rows; the time is the ETR profile's median at that
  batch (``ModelProfile.latency_ms``).

Where T was measured (``profiles/<model>/<type>-*.json``, with device, date and command) that
measurement is used; any other type is derived from the fastest measured device of its kind
(cards from cards, CPU nodes from CPU nodes) by ``devices.profiles``'s scaling rule and marked
an estimate. ``sources`` says which is which. The spread of a call around its median is the
scenario's ``jitter_sigma`` (log-normal): the rounds runs kept medians only.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from devices.catalog import GpuType
from devices.profiles import ModelProfile, ProfileSet

ROOT = Path(__file__).resolve().parents[1]
PROFILES_DIR = ROOT / "profiles"


class ProfileCallCosts:
    """The fleet's call-cost model over a ``ProfileSet``.

    call_ms(model, gpu, work) -> ms of one call on a whole card or node of ``gpu``'s type;
    model "or_solver" (work: rider x order pairs) or "etr" (work: rows).
    Raises DeviceInputError (from the profiles) when a model has no profile at all.
    """

    def __init__(self, profiles: ProfileSet, jitter_sigma: float) -> None:
        self.profiles = profiles
        self.jitter_sigma = jitter_sigma
        # The engine asks once per call; a profile's interpolation is pure, so memoise it.
        self._cached = lru_cache(maxsize=1 << 16)(self._call_ms)

    @classmethod
    def load(cls, root: Path, jitter_sigma: float) -> ProfileCallCosts:
        return cls(ProfileSet.load(root), jitter_sigma)

    def profile(self, model: str, device_type: str) -> ModelProfile:
        """``model``'s profile on ``device_type``: measured, else derived (``estimate``)."""
        return self.profiles.get(model, device_type)

    def call_ms(self, model: str, gpu: GpuType, work: float) -> float:
        return self._cached(model, gpu.name, float(work))

    def _call_ms(self, model: str, device_type: str, work: float) -> float:
        profile = self.profile(model, device_type)
        if model == "or_solver":
            return profile.round_ms(work)
        return profile.latency_ms(max(1, round(work)), "p50")

    def sources(self, models: list[str], types: list[str]) -> list[dict[str, str]]:
        """Per model and type: measured (with date and device) or derived (with its basis)."""
        rows = []
        for model in models:
            for t in types:
                p = self.profile(model, t)
                rows.append(
                    {
                        "model": model,
                        "type": t,
                        "source": "derived" if p.estimate else f"measured {p.measured}",
                        "basis": p.basis,
                        "runtime": p.runtime,
                    }
                )
        return rows
