"""Failover: retry a deployment call on another replica when the replica it hit is failing.

Every call the ingress makes is idempotent, which is what makes retrying safe: the model
replicas are stateless (each call carries the round's arrays, the features or the instance),
and the answer is a pure function of the arguments (same arrays -> same insertion costs and
assignment, same features -> same minutes, same instance and seed -> same offline solution).
A retried call therefore can neither apply anything twice nor answer differently.

But a call can be what kills a replica (a kernel fault on its input, a solve that wedges the
device): retried blindly, one request would go on to kill the next replica inside the retry
budget, and the next. A call that has seen ``max_replica_faults`` distinct replicas fail
while it ran on them (default 2: the first may be chance; replicas told apart by actor id, so a
tripped replica whose process exits under a retry that landed there again counts once) is
answered ``PoisonRequest`` (422 naming the request id) instead of being sent to another.

What is retried: ``DeviceUnhealthy`` (the replica's guard tripped: poisoned or wedged device),
``RayActorError`` (the replica process died or its node went away, including
``ActorUnavailableError``) and, as a last resort, an attempt unanswered after
``call_timeout_s`` (cancelled first). That timeout includes queueing behind other requests, so
it is set well above a busy queue's wait: a retry re-enters the queue at the back, and short
timeouts under load turn into a retry storm. A hung replica is normally caught sooner by its
own watchdog (``actors.device``): Serve then kills it and its requests fail over as
``RayActorError``. Bad input (``ValueError``) and overload
(``BackPressureError``, answered as ``Overloaded``) are not: retrying cannot fix them. Every
attempt is bounded by the request's remaining time, and no retry starts once it is spent.

Serve's router picks a replica at random among the two it samples, so a retry soon lands
elsewhere; the few retries that land on the failing replica again cost one fast refusal each
(a tripped guard answers at once) until Serve takes it out of the routing table.

A replica that stops answering without an error (its node lost, and the cluster slow to say
so) is not waited out: with a ``HedgePolicy`` an attempt older than nearly all recent calls of
its kind gets a second copy on another replica, first answer wins (``serve_app.hedging``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError

from actors.errors import Abandoned, DeadlinePassed, DeviceUnhealthy
from serve_app.hedging import HedgePolicy
from serve_app.ingress_metrics import failover_counter
from serve_app.pipeline.context import CallContext
from serve_app.pipeline.errors import DeadlineExceeded, Overloaded, PoisonRequest, Unavailable

RETRYABLE: tuple[type[BaseException], ...] = (DeviceUnhealthy, RayActorError, TimeoutError)


@dataclass(frozen=True)
class FailoverEvent:
    """One failed attempt that was retried: wall-clock time (s since epoch), call, error."""

    at: float
    target: str
    error: str


class Failover:
    """call_timeout_s : per attempt; retry_budget_s : per call, all attempts together (s);
    max_replica_faults : replicas a call may see fail while it ran there before it is taken
    for the cause and not sent to another (``PoisonRequest``).

    A call's context bounds both: an attempt never outlives the request's deadline, and no
    retry starts after it (``DeadlineExceeded`` then, the attempt cancelled).
    """

    def __init__(
        self,
        call_timeout_s: float,
        retry_budget_s: float,
        max_replica_faults: int = 2,
        history: int = 1024,
        hedge: HedgePolicy | None = None,
    ):
        self.call_timeout_s = call_timeout_s
        self.retry_budget_s = retry_budget_s
        self.max_replica_faults = max_replica_faults
        self.events: deque[FailoverEvent] = deque(maxlen=history)
        self.hedge = hedge  # None: one copy of each attempt

    async def call(
        self,
        target: str,
        make_call: Callable[[], Any],
        ctx: CallContext,
        timeout_s: float | None = None,
    ) -> Any:
        """Await ``make_call()`` (a DeploymentResponse), retrying as the module doc says.

        target : a name for logs and metrics ("OrSolver.solve_round"); timeout_s : this call's
        per-attempt timeout instead of ``call_timeout_s``. Raises DeadlineExceeded when the
        request's deadline passes, Unavailable when every attempt within the retry budget
        failed, Overloaded when the deployment's queue is full, or the call's own
        non-retryable error.
        """
        per_attempt = self.call_timeout_s if timeout_s is None else timeout_s
        budget_end = time.monotonic() + self.retry_budget_s
        delay, attempts = 0.01, 0
        failed: set[str] = set()  # replicas that failed while this call ran there
        while True:
            remaining = ctx.remaining_s()
            if remaining <= 0:
                raise DeadlineExceeded(f"{target}: the request's deadline passed")
            attempts += 1
            try:
                return await self._attempt(target, make_call, min(per_attempt, remaining))
            except BackPressureError as exc:
                raise Overloaded("backpressure", 1.0, f"{target}: {exc}") from exc
            except (DeadlinePassed, Abandoned) as exc:
                raise DeadlineExceeded(f"{target}: {exc}") from exc
            except RETRYABLE as exc:
                if isinstance(exc, TimeoutError) and ctx.expired():
                    raise DeadlineExceeded(
                        f"{target}: no answer before the request's deadline"
                    ) from None
                error = type(exc).__name__
                if isinstance(exc, DeviceUnhealthy):
                    error = "DeviceUnhealthy"  # not Ray's wrapper class name
                self.events.append(FailoverEvent(time.time(), target, error))
                failover_counter().inc(tags={"target": target, "error": error})
                if _failed_during_call(exc):
                    failed.add(_replica_of(exc) or f"attempt {attempts}")
                if len(failed) >= self.max_replica_faults:
                    raise PoisonRequest(ctx.request_id, target, len(failed), error) from exc
                now = time.monotonic()
                if now + delay >= budget_end or delay >= ctx.remaining_s():
                    raise Unavailable(
                        f"{target}: no healthy replica answered in {attempts} attempts "
                        f"(last error: {error})"
                    ) from exc
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.25)

    async def _attempt(self, target: str, make_call: Callable[[], Any], timeout_s: float) -> Any:
        """One attempt: its answer, or its error (TimeoutError after ``timeout_s``, the
        attempt cancelled). With a hedge policy, an attempt still unanswered after the
        policy's delay gets a second copy; the first answer wins and the other is cancelled.
        A copy refused by back-pressure is dropped; a retryable error of one copy leaves the
        other running; the attempt fails only when both have."""
        delay = None if self.hedge is None else self.hedge.delay_s(target)
        first = make_call()
        if delay is None or delay >= timeout_s:  # no copy: the request path's common case
            try:
                return await asyncio.wait_for(_result(first), timeout_s)
            except TimeoutError:
                first.cancel()
                raise
        loop = asyncio.get_running_loop()
        started = loop.time()
        copies = {asyncio.ensure_future(_result(first)): first}
        done, _ = await asyncio.wait(copies, timeout=delay)
        if not done and self.hedge is not None and self.hedge.take():
            self.events.append(FailoverEvent(time.time(), target, "Hedged"))
            failover_counter().inc(tags={"target": target, "error": "Hedged"})
            second = make_call()
            copies[asyncio.ensure_future(_result(second))] = second
        error: BaseException | None = None
        try:
            while copies:
                left = timeout_s - (loop.time() - started)
                done, _ = await asyncio.wait(
                    copies, timeout=max(0.0, left), return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    raise TimeoutError(f"{target}: no answer in {timeout_s:.1f} s")
                for task in done:
                    response = copies.pop(task)
                    exc = task.exception()
                    if exc is None:
                        if self.hedge is not None:
                            self.hedge.answered(
                                target, loop.time() - started, by_copy=response is not first
                            )
                        return task.result()
                    if isinstance(exc, BackPressureError) and response is not first:
                        continue  # no spare replica for the copy: the first goes on
                    if not isinstance(exc, RETRYABLE) or not copies:
                        raise exc
                    error = exc  # the other copy may still answer
            assert error is not None
            raise error
        finally:
            for task, response in copies.items():
                response.cancel()
                task.cancel()

    def recent(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Failover events after ``since`` (s since epoch), oldest first."""
        return [asdict(e) for e in self.events if e.at >= since]


async def _result(response: Any) -> Any:
    return await response


def _replica_of(exc: BaseException) -> str | None:
    """The failed replica's actor id, where the error names it (None: unknown, e.g. a
    timeout; each such attempt counts as a replica of its own)."""
    if isinstance(exc, DeviceUnhealthy):
        return getattr(getattr(exc, "cause", exc), "replica", None)
    return getattr(exc, "actor_id", None)


def _failed_during_call(exc: BaseException) -> bool:
    """Did the replica fail while this call ran there? Its process died (or stopped answering)
    mid-call, or its device failed during the call's own work; a replica already known to be
    unhealthy refusing at once says nothing about the call."""
    if isinstance(exc, DeviceUnhealthy):
        return bool(getattr(getattr(exc, "cause", exc), "during_call", False))
    return True
