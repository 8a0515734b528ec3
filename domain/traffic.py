"""Traffic classes: what may wait for what.

Online work (a dispatch round and its ETR rows) has a rider waiting on it; offline work (static
solves, bulk re-scoring) has a job waiting on it. Every queue serves online first; offline takes
what is left. Defined once here and carried by every call that crosses a queue.
"""

from __future__ import annotations

from enum import StrEnum


class TrafficClass(StrEnum):
    ONLINE = "online"
    OFFLINE = "offline"

    @property
    def rank(self) -> int:
        """Lower is served first."""
        return 0 if self is TrafficClass.ONLINE else 1
