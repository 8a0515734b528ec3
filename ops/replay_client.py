"""A served replay's decision maker: every round of ``planner.mdrp`` through ``/v1/dispatch``.

``ServedDecider(url, speedup)`` is a ``planner.mdrp.replay.Decide``: it posts each round as the
JSON API takes it and reads back who got which order. With ``speedup`` the rounds are paced at
that many times the day's real time (round at minute t leaves t x 60 / speedup seconds after the
first), so a replayed day is also a realistic load on the app; without it they go as fast as
they are answered. A rollout's rounds (minutes still to come, planned now to judge a plan) go
at once through ``unpaced``. A shed round (503/429) is sent again after its Retry-After:
nothing is lost.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType

import httpx
import orjson

from domain import DispatchRound
from serve_app.schemas import DispatchRequest

MAX_RETRIES = 20
MAX_SIDE_BY_SIDE = 16  # calls in flight at once (a round's variants, its rollouts' rounds)


class ServedDecider:
    def __init__(self, url: str, speedup: float | None = None, timeout_s: float = 60.0) -> None:
        if speedup is not None and speedup <= 0:
            raise ValueError(f"speedup must be > 0, got {speedup}")
        self.endpoint = url.rstrip("/") + "/v1/dispatch"
        self.speedup = speedup
        self.client = httpx.Client(timeout=timeout_s)
        self._t0: tuple[float, float] | None = None  # (first round's day time, wall time)
        self.retries = 0
        self.latencies_ms: list[float] = []  # per dispatch call, retries included
        self.late_s = 0.0  # how far behind the paced schedule rounds were sent, at most
        self.paced = 0  # calls sent at their round's time (the day's own rounds)
        self._pool = ThreadPoolExecutor(MAX_SIDE_BY_SIDE, thread_name_prefix="replay-call")

    def __call__(self, round_: DispatchRound) -> dict[str, str]:
        """order id -> rider id, sent at the round's time when paced; raises
        httpx.HTTPStatusError on an answer other than 200 (after retrying shed rounds)."""
        if self.speedup is not None:
            self._pace(round_.now)
            self.paced += 1
        return self.unpaced(round_)

    def many(self, rounds: list[DispatchRound]) -> list[dict[str, str]]:
        """Rounds of one minute (a round's variants) sent side by side, paced as one."""
        if self.speedup is not None:
            self._pace(rounds[0].now)
            self.paced += len(rounds)
        return list(self._pool.map(self.unpaced, rounds))

    def unpaced(self, round_: DispatchRound) -> dict[str, str]:
        """As a call, sent at once: for a round that is not the day's own (a rollout's, at a
        minute still to come; paced, it would hold the day's next rounds back)."""
        body = DispatchRequest.from_domain(round_).model_dump_json().encode()
        t0 = time.perf_counter()
        for _ in range(MAX_RETRIES):
            resp = self.client.post(
                self.endpoint, content=body, headers={"content-type": "application/json"}
            )
            if resp.status_code in (429, 503):
                self.retries += 1
                time.sleep(float(resp.headers.get("retry-after", "1")))
                continue
            resp.raise_for_status()
            self.latencies_ms.append((time.perf_counter() - t0) * 1e3)
            return {a["order_id"]: a["rider_id"] for a in orjson.loads(resp.content)["assignments"]}
        resp.raise_for_status()
        raise RuntimeError(f"{self.endpoint}: still shed after {MAX_RETRIES} tries")

    def _pace(self, day_s: float) -> None:
        if self._t0 is None:
            self._t0 = (day_s, time.monotonic())
        due = self._t0[1] + (day_s - self._t0[0]) / self.speedup
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        else:
            self.late_s = max(self.late_s, -wait)

    def summary(self) -> dict[str, float]:
        """Dispatch calls sent (a round sends one per plan variant, a rollout one per round it
        replays), those paced, their latency p50/p99 (ms), shed-and-retried count, worst
        pacing lag."""
        lat = sorted(self.latencies_ms)

        def pct(q: float) -> float:
            return round(lat[min(len(lat) - 1, int(q * len(lat)))], 1) if lat else 0.0

        return {
            "calls": len(lat),
            "paced": self.paced,
            "p50_ms": pct(0.5),
            "p99_ms": pct(0.99),
            "retries": self.retries,
            "behind_schedule_s": round(self.late_s, 2),
        }

    def __enter__(self) -> ServedDecider:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._pool.shutdown()
        self.client.close()
