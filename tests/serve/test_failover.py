"""Failover: retries on other replicas, within the deadline and the retry budget, and a poison
pill (a request whose calls keep making replicas fail) is not handed to replica after replica.

Plain Python: the calls are fakes standing for Serve's DeploymentResponse; what crosses the
process boundary (``DeviceUnhealthy.during_call``) is checked through pickle, as Ray sends it.
"""

from __future__ import annotations

import asyncio
import pickle

import pytest
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError

from actors.errors import Abandoned, DeviceUnhealthy
from serve_app.config import HedgeArgs
from serve_app.error_answers import answer_for
from serve_app.failover import Failover
from serve_app.hedging import HedgePolicy
from serve_app.pipeline import CallContext, DeadlineExceeded, InvalidInput, Unavailable
from serve_app.pipeline.errors import PoisonRequest


class Response:
    """A fake DeploymentResponse: raises ``error`` or returns ``value``."""

    def __init__(self, error: BaseException | None = None, value: object = "ok") -> None:
        self.error, self.value, self.cancelled = error, value, False

    def __await__(self):
        async def answer():
            if self.error is not None:
                raise self.error
            return self.value

        return answer().__await__()

    def cancel(self) -> None:
        self.cancelled = True


def calls(*outcomes):
    """make_call for ``Failover.call``: each call answers the next outcome."""
    seq = iter(outcomes)
    made = []

    def make():
        out = next(seq)
        made.append(out)
        return Response(error=out) if isinstance(out, BaseException) else Response(value=out)

    return make, made


def run(failover: Failover, make, request_id="r-42", timeout_s=5.0):
    return asyncio.run(
        failover.call(
            "OrSolver.solve_round", make, CallContext.start(timeout_s, request_id=request_id)
        )
    )


def test_one_replica_dying_under_a_request_is_retried():
    make, made = calls(RayActorError(), "planned")
    assert run(Failover(60, 30), make) == "planned" and len(made) == 2


def test_a_request_that_kills_two_replicas_is_not_sent_to_a_third():
    make, made = calls(RayActorError(), RayActorError(), "never reached")
    with pytest.raises(PoisonRequest) as err:
        run(Failover(60, 30, max_replica_faults=2), make)
    assert len(made) == 2
    assert "r-42" in str(err.value) and "2 OrSolver.solve_round replicas" in str(err.value)
    assert answer_for(err.value).http_status == 422  # an InvalidInput: do not retry it as is
    assert isinstance(err.value, InvalidInput)


def test_a_device_failing_during_the_call_counts_one_already_failed_does_not():
    during = DeviceUnhealthy("cuda:0", "illegal address", during_call=True)
    before = DeviceUnhealthy("cuda:0", "illegal address", during_call=False)
    make, made = calls(during, before, before, before, during, "x")
    with pytest.raises(PoisonRequest):
        run(Failover(60, 30, max_replica_faults=2), make)
    assert len(made) == 5  # the three refusals of an already-tripped replica were not counted
    make, made = calls(before, before, "answered")
    assert run(Failover(60, 30), make) == "answered"


def test_a_tripped_replica_exiting_under_the_retry_is_one_fault_not_two():
    """The poison drill's race (seen in CI): the call was running when the device failed (one
    fault), its retry landed on the same replica while its process was exiting (Ray: actor
    died). That is still one replica, so the call goes on to a healthy one."""
    tripped = DeviceUnhealthy("cuda:0", "illegal address", during_call=True, replica="aa01")
    make, made = calls(tripped, RayActorError(actor_id="aa01"), "answered")
    assert run(Failover(60, 30, max_replica_faults=2), make) == "answered"
    assert len(made) == 3
    make, made = calls(tripped, RayActorError(actor_id="bb02"), "never reached")
    with pytest.raises(PoisonRequest):  # two replicas failed under it: taken for the cause
        run(Failover(60, 30, max_replica_faults=2), make)


def test_during_call_crosses_the_process_boundary():
    err = pickle.loads(
        pickle.dumps(DeviceUnhealthy("cuda:0", "x", during_call=True, replica="aa01"))
    )
    assert err.during_call is True and err.device == "cuda:0" and err.replica == "aa01"
    poison = pickle.loads(pickle.dumps(PoisonRequest("r", "Etr.predict", 2, "RayActorError")))
    assert poison.request_id == "r" and poison.errors[0].type == "poison_request"


def test_a_replica_that_abandoned_the_call_is_a_deadline_not_a_retry():
    make, made = calls(Abandoned("its deadline passed"), "never")
    with pytest.raises(DeadlineExceeded):
        run(Failover(60, 30), make)
    assert len(made) == 1


def test_retries_end_with_the_budget():
    before = DeviceUnhealthy("cuda:0", "poisoned")
    make, _ = calls(*[before] * 1000)
    with pytest.raises(Unavailable):
        run(Failover(60, retry_budget_s=0.2), make)


class Slow(Response):
    """A fake DeploymentResponse that answers after ``delay_s`` (never, for None)."""

    def __init__(self, delay_s: float | None, **kw) -> None:
        super().__init__(**kw)
        self.delay_s = delay_s

    def __await__(self):
        async def answer():
            if self.delay_s is None:
                await asyncio.Event().wait()
            await asyncio.sleep(self.delay_s)
            if self.error is not None:
                raise self.error
            return self.value

        return answer().__await__()


def hedged(**kw) -> Failover:
    args = HedgeArgs(enabled=True, min_delay_s=0.05, **kw)
    return Failover(60, 30, hedge=HedgePolicy(args))


def test_a_call_stuck_on_a_lost_replica_is_answered_by_its_copy():
    responses = [Slow(None, value="never"), Slow(0.01, value="from the copy")]
    made = []
    failover = hedged()

    def make():
        made.append(responses[len(made)])
        return made[-1]

    assert run(failover, make) == "from the copy"
    assert len(made) == 2 and made[0].cancelled  # the stuck attempt is cancelled
    assert (failover.hedge.sent, failover.hedge.won) == (1, 1)
    assert [e["error"] for e in failover.recent()] == ["Hedged"]


def test_an_attempt_answered_before_the_delay_gets_no_copy():
    make, made = calls("planned")
    failover = hedged()
    assert run(failover, make) == "planned" and len(made) == 1
    assert failover.hedge.sent == 0


def test_a_copy_refused_by_back_pressure_leaves_the_first_attempt_running():
    responses = [
        Slow(0.2, value="first"),
        Slow(0.0, error=BackPressureError(num_queued_requests=1, max_queued_requests=1)),
    ]
    made = []

    def make():
        made.append(responses[len(made)])
        return made[-1]

    assert run(hedged(), make) == "first" and len(made) == 2


def test_without_a_token_an_attempt_gets_no_copy_and_times_out_as_before():
    responses = iter([Slow(None), Slow(0.0, value="retried")])
    failover = Failover(
        0.2, 30, hedge=HedgePolicy(HedgeArgs(enabled=True, min_delay_s=0.05, burst=1, budget=0))
    )
    failover.hedge.take()  # the only token is spent
    assert run(failover, lambda: next(responses)) == "retried"
    assert failover.hedge.sent == 1 and [e["error"] for e in failover.recent()] == ["TimeoutError"]


def test_the_delay_is_the_recent_quantile_and_copies_are_rationed():
    policy = HedgePolicy(
        HedgeArgs(enabled=True, min_delay_s=0.1, quantile=0.95, budget=0.5, burst=2)
    )
    assert policy.delay_s("a") == 0.1  # too few answered calls to trust a quantile
    for k in range(100):
        policy.answered("a", 0.01 * (k + 1))  # 0.01 .. 1.00 s
    assert policy.delay_s("a") == pytest.approx(0.96)
    assert policy.delay_s("b") == 0.1  # per kind
    assert [policy.take(), policy.take(), policy.take()] == [True, True, False]
    policy.delay_s("a")
    policy.delay_s("a")  # two calls earn one token at budget 0.5
    assert [policy.take(), policy.take()] == [True, False]
    assert HedgePolicy().delay_s("a") is None  # off unless configured
