"""The discrete-event core: requests, replicas on cards, routing, autoscaling, failures.

Time is simulated seconds; nothing sleeps. The objects deciding are the app's own, fed by the
simulated clock: each replica batches with ``actors.scheduling.BatchQueue`` and paces offline
rows with ``OfflinePacing`` (the ETR batcher's rules), measures itself with ``BusyTracker``s
(device and per class), is picked by ``actors.scheduling.rank`` (``BusyRouter``'s ranking) and
sized by ``desired_replicas`` (``BusyAutoscalingPolicy``). The baselines stand where Serve's
defaults stand: power of two choices on queue length, ``target_ongoing_requests``, one FIFO.
Serve's own wrapping of any policy is modelled here too (``ServeDelay``): decisions act only
after holding for ``upscale_delay_s`` / ``downscale_delay_s``, the policy called every
``interval_s`` on the replicas' last Busy reports (pushed every ``routing_stats_period_s``).

A replica serves one call at a time with a ``share`` of its card: a call takes the call-cost
model's time / share, times a log-normal jitter. A card is billed while any replica (starting,
serving or draining) is on it. A failed node takes its replicas' calls down: their requests
are retried at once on the others, and the replicas restart on fresh cards of the same type.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from actors.scheduling import (
    BatchQueue,
    BusyPolicy,
    BusyTracker,
    OfflinePacing,
    ReplicaView,
    RoutingPolicy,
    desired_replicas,
    rank,
)
from devices.catalog import GpuType
from domain import TrafficClass
from serve_app.pipeline.admission import LaneCore, Waiter
from serve_app.pipeline.errors import Overloaded

Router = Literal["ours", "pow2"]
Scaler = Literal["busy", "ongoing", "fixed"]


@dataclass(frozen=True)
class Slot:
    """Where a replica may run: a card (id, node, type) and the replica's config on it.
    batch : rows per call; share : of the card's compute (0..1]."""

    deployment: str
    card: int
    node: str
    gpu: GpuType
    batch: int
    share: float


@dataclass(frozen=True)
class SimDeployment:
    """slots : where its replicas may run, in the order they are started (the packer's plan);
    model : the call-cost model's key; slo_s : an online request's target; timeout_s : a
    caller's patience; batch_wait_s : as the ETR batcher's ``batch_wait_timeout_s``, from the
    oldest queued request."""

    name: str
    model: str
    slo_s: float
    timeout_s: float
    slots: tuple[Slot, ...]
    batch_wait_s: float = 0.0  # a batch short of ``Slot.batch`` rows waits to fill this long


@dataclass(frozen=True)
class Policy:
    """What decides: ``router`` ours (rank) or pow2 (Serve's default); ``scaler`` busy (ours),
    ongoing (Serve's ``target_ongoing_requests``) or fixed (every slot all day); ``classes``:
    online before offline in the batch queue and the offline pacing (False: one FIFO)."""

    name: str
    router: Router = "ours"
    scaler: Scaler = "busy"
    classes: bool = True
    admission: bool = True  # the app's admission lanes (SimSettings.lanes) in front of each
    # deployment; False: every request goes straight to the handle (Serve's default)
    target_busy: float = 0.6
    band: float = 0.15
    target_ongoing: float = 2.0
    # Per deployment, a Busy target other than ``target_busy`` (deployment, target) pairs: what
    # deploy.yaml's per-deployment ``policy_kwargs`` can say (``fleet.tune`` chooses them).
    targets: tuple[tuple[str, float], ...] = ()

    def target_of(self, deployment: str) -> float:
        return dict(self.targets).get(deployment, self.target_busy)


@dataclass(frozen=True)
class SimSettings:
    replica_start_s: float = 30.0
    busy_window_s: float = 30.0
    routing_stats_period_s: float = 1.0
    interval_s: float = 10.0
    upscale_delay_s: float = 30.0
    downscale_delay_s: float = 300.0
    look_back_s: float = 30.0  # Serve averages the autoscaling metrics over this
    min_replicas: int = 1
    offline_aging_s: float = 600.0
    offline_rows_while_online: int = 256
    offline_concurrency: int = 8  # a bulk job's requests in flight per deployment, at most
    jitter_sigma: float = 0.1
    bucket_s: float = 3600.0  # the report's time bucket
    drain_s: float = 1800.0  # after the last arrival, work in flight may finish this long
    max_ongoing_requests: int | None = None  # Serve's cap per replica; the rest wait at the
    # caller's handle until a replica has room (None: no cap)
    # The order the handle's waiting requests get a replica in. "random": what a real cluster
    # showed (bench/fleet_vs_real.py: in a surge's backlog, requests sent a second apart were
    # answered up to 6 s out of order; Serve's router queue is FIFO, but a request a full
    # replica rejects backs off and retries, so who is next is close to chance); "fifo": the
    # queue's own order.
    handle_order: Literal["fifo", "random"] = "random"
    record_requests: bool = False  # keep (arrival s, kind, latency s) of every online request
    # The app's admission lanes (serve_app.pipeline.admission.LaneCore), per deployment:
    # (deployment, max_in_flight, max_queued); none: no lanes.
    lanes: tuple[tuple[str, int, int], ...] = ()
    offline_max_share: float = 0.5
    # OfflinePacing.short_call_s: an offline-only call this short runs beside online traffic
    offline_short_call_s: float = 0.0


class ServeDelay:
    """Serve's delays around an autoscaling policy (``ray.serve.autoscaling_policy.
    _apply_delay_logic``, held equal by a test): a change is made once the policy has wanted
    that direction for ``up_s`` / ``down_s`` since the first call that wanted it; a call
    wanting the target as it is, or the other direction, restarts the clock; the change made
    is what the policy wants at that call."""

    EPS_S = 1e-6  # Serve's _DELAY_ELAPSED_EPS_S

    def __init__(self, up_s: float, down_s: float) -> None:
        self.up_s, self.down_s = up_s, down_s
        self._wish: tuple[int, float] | None = None  # direction (+1 up, -1 down), since (s)

    def decide(self, wanted: int, target: int, now: float) -> int:
        """The replicas to run from now: ``target`` or, once its delay has passed, ``wanted``."""
        direction = (wanted > target) - (wanted < target)
        if direction == 0:
            self._wish = None
            return target
        if self._wish is None or self._wish[0] != direction:
            self._wish = (direction, now)
        delay = self.up_s if direction > 0 else self.down_s
        if now - self._wish[1] + self.EPS_S < delay:
            return target
        self._wish = None
        return wanted if direction > 0 else max(1, wanted)


@dataclass(frozen=True)
class SimFailure:
    at_s: float
    down_s: float


@dataclass(eq=False)
class Request:
    """rows : queue units (ETR rows; a round is one); work : cost units of all its rows."""

    deployment: str
    traffic_class: TrafficClass
    rows: int
    work: float
    arrival: float
    kind: int
    deadline: float
    done_rows: int = 0
    replica: SimReplica | None = None
    key: int = -1
    lane_since: float | None = None  # holding a slot of its lane since (None: no slot)
    waiter: Waiter[Request] | None = None  # queued in its lane


@dataclass(eq=False)
class SimReplica:
    """index : which of its deployment's slots it holds; card, node : where it runs now (a
    failed card's slot moves to a fresh one)."""

    id: int
    slot: Slot
    index: int
    card: int
    node: str
    speed: float  # for the router: card speed x share, relative to the reference
    clock: Callable[[], float]
    window_s: float
    aging_s: float
    rows_while_online: int
    short_call_s: float = 0.0  # OfflinePacing.short_call_s
    offline_call_s: float = math.inf  # an offline-only call of rows_while_online rows here
    state: str = "starting"  # starting -> ready -> draining -> gone; or dead
    outstanding: int = 0
    running: bool = False
    generation: int = 0
    hold_at: float = math.inf  # a wake-up is scheduled for then
    failed_at: float | None = None
    busy_seen: float = 0.0  # Busy as the router last saw it
    # (online, offline) Busy over the look-back window as of the last report: what Serve's
    # autoscaler sees (replicas push every routing_stats_period_s; the policy reads the last;
    # None until the first report: Serve averages over the replicas that have reported)
    busy_reported: tuple[float, float] | None = None
    pending: dict[int, Request] = field(default_factory=dict)
    busy_s: float = 0.0  # seconds of calls started, summed

    def __post_init__(self) -> None:
        self.queue = BatchQueue(self.aging_s)
        self.pacing = OfflinePacing(self.rows_while_online, short_call_s=self.short_call_s)
        self.device = BusyTracker(self.window_s, self.clock)
        self.by_class = {c: BusyTracker(self.window_s, self.clock) for c in TrafficClass}


@dataclass
class SimOutcome:
    """Per request kind and bucket: counts; per bucket: card-seconds and cost by type, replica
    seconds by deployment. Latencies (s) of online requests by kind, for percentiles."""

    ok: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    late: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    shed: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    card_s: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    cost: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    replica_s: dict[tuple[int, str], float] = field(default_factory=lambda: defaultdict(float))
    latencies: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    offline_rows_done: int = 0
    offline_rows: int = 0
    retried: int = 0
    replicas_timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)  # target
    running_timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)  # ready
    requests: list[tuple[float, int, float]] = field(default_factory=list)
    end_s: float = 0.0
    # Every Busy autoscaler call: deployment -> its policy and (ready, online Busy, offline
    # Busy, requests, replicas wanted) per tick (``same_run_at``).
    busy_policies: dict[str, BusyPolicy] = field(default_factory=dict)
    busy_calls: dict[str, list[tuple[int, float, float, int, int]]] = field(
        default_factory=lambda: defaultdict(list)
    )


def same_run_at(outcome: SimOutcome, deployment: str, target_busy: float) -> bool:
    """Whether ``deployment``'s autoscaler at ``target_busy`` would have wanted what it wanted
    at every tick of ``outcome``'s run. The target reaches nothing else, and the run is
    deterministic under its seed, so a yes means the run at that target is this very run."""
    policy = outcome.busy_policies.get(deployment)
    if policy is None:
        return False
    other = replace(policy, target_busy=target_busy)
    return all(
        desired_replicas(ready, on, off, other, requests).replicas == wanted
        for ready, on, off, requests, wanted in outcome.busy_calls[deployment]
    )


class FleetSim:
    """One policy's run over a stream of requests.

    arrivals : (time s, deployment, traffic class, rows, work, kind) in time order;
    call_ms : (model, GpuType, work) -> ms of one call on a whole card;
    speed_of : GpuType -> speed relative to the reference (for the router's view);
    call_sigma : (model, GpuType, work) -> the log-normal sigma of such a call, ``call_ms``
    then its median (a profile's p50 and p99); None: ``settings.jitter_sigma`` around a mean
    of ``call_ms``.
    """

    def __init__(
        self,
        deployments: Sequence[SimDeployment],
        policy: Policy,
        settings: SimSettings,
        call_ms: Callable[[str, GpuType, float], float],
        speed_of: Callable[[GpuType], float],
        failures: Sequence[SimFailure] = (),
        seed: int = 0,
        call_sigma: Callable[[str, GpuType, float], float] | None = None,
    ) -> None:
        self.deployments = {d.name: d for d in deployments}
        self.policy, self.settings = policy, settings
        self.call_ms, self.speed_of, self.call_sigma = call_ms, speed_of, call_sigma
        self.failures = sorted(failures, key=lambda f: f.at_s)
        self.rng = random.Random(seed)
        self.now = 0.0
        self._events: list[tuple[float, int, Callable, tuple]] = []
        self._seq = itertools.count()
        self._ids = itertools.count()
        self.replicas: dict[str, list[SimReplica]] = {d: [] for d in self.deployments}
        self.backlog: dict[str, list[Request]] = {d: [] for d in self.deployments}
        # Offline work comes from jobs that keep a bounded number of requests in flight (as a
        # batch client does): the rest waits at the client, not in the replicas' queues.
        self.jobs: dict[str, deque[Request]] = {d: deque() for d in self.deployments}
        self.jobs_in_flight: dict[str, int] = defaultdict(int)
        self.out = SimOutcome()
        self._card_users: dict[int, int] = defaultdict(int)  # replicas on a card now
        self._card_since: dict[int, float] = {}  # when a billed card was opened
        self._card_type: dict[int, GpuType] = {}
        self._fresh_cards = itertools.count(10**6)
        self._moved: dict[int, tuple[int, str]] = {}  # failed card -> (fresh card, its node)
        self._delay = {
            d.name: ServeDelay(settings.upscale_delay_s, settings.downscale_delay_s)
            for d in deployments
        }
        self._ongoing: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.lanes: dict[str, LaneCore[Request]] = {
            name: LaneCore(name, n, q, settings.offline_max_share, self._displaced)
            for name, n, q in (settings.lanes if policy.admission else ())
            if name in self.deployments
        }
        self._busy_policy = {
            d.name: BusyPolicy(
                target_busy=policy.target_of(d.name),
                band=policy.band,
                min_replicas=min(settings.min_replicas, len(d.slots)),
                max_replicas=len(d.slots),
            )
            for d in deployments
        }

    # ---- the loop -------------------------------------------------------------------------
    def clock(self) -> float:
        return self.now

    def at(self, t: float, fn: Callable, *args: object) -> None:
        heapq.heappush(self._events, (t, next(self._seq), fn, args))

    def run(self, arrivals, end_s: float) -> SimOutcome:
        """arrivals : iterable of (t_s, deployment, class, rows, work, kind), time-ordered."""
        s = self.settings
        for d in self.deployments.values():
            first = len(d.slots) if self.policy.scaler == "fixed" else s.min_replicas
            for _ in range(min(first, len(d.slots))):
                self._start_replica(d, ready_now=True)
        if self.policy.scaler != "fixed":
            self.at(s.interval_s, self._autoscale_tick)
        self.at(s.routing_stats_period_s, self._stats_tick)
        for f in self.failures:
            self.at(f.at_s, self._fail_node, f)
        feed = iter(arrivals)
        nxt = next(feed, None)
        while self._events or nxt is not None:
            if nxt is not None and (not self._events or nxt[0] <= self._events[0][0]):
                self.now = nxt[0]
                self._arrive(*nxt)
                nxt = next(feed, None)
                continue
            t, _, fn, args = heapq.heappop(self._events)
            if t > end_s + self.settings.drain_s:
                break  # what is still queued or running was not answered in the day
            if t > end_s and nxt is None and not self._work_left():
                break
            self.now = t
            fn(*args)
        self.now = max(self.now, end_s)
        self._close_books()
        return self.out

    def _work_left(self) -> bool:
        return (
            any(self.jobs.values())
            or any(self.backlog.values())
            or any(r.pending for reps in self.replicas.values() for r in reps if r.state != "dead")
        )

    # ---- requests -------------------------------------------------------------------------
    def _arrive(self, t, deployment, cls, rows, work, kind) -> None:
        d = self.deployments.get(deployment)
        online = cls is TrafficClass.ONLINE
        if d is None:  # the plan has no replica of it (planned on days without its traffic)
            req = Request(deployment, cls, int(rows), float(work), t, int(kind), t)
            if online:
                self._count(self.out.shed, req)
            else:
                self.out.offline_rows += req.rows
            return
        deadline = t + d.timeout_s if online else math.inf
        req = Request(deployment, cls, int(rows), float(work), t, int(kind), deadline)
        if not online:
            self.out.offline_rows += req.rows
            self.jobs[deployment].append(req)
            self._feed_jobs(deployment)
            return
        self._admit(req)

    def _feed_jobs(self, deployment: str) -> None:
        jobs = self.jobs[deployment]
        while jobs and self.jobs_in_flight[deployment] < self.settings.offline_concurrency:
            self.jobs_in_flight[deployment] += 1
            self._admit(jobs.popleft())

    # ---- admission: the app's lanes, driven on the simulated clock ---------------------------
    def _admit(self, req: Request) -> None:
        lane = self.lanes.get(req.deployment)
        if lane is None:
            self._route(req)
            return
        try:
            waiter = lane.admit(req.traffic_class, req.deadline - self.now, req)
        except Overloaded as exc:
            self._refused(req, exc.retry_after_s)
            return
        if waiter is None:
            req.lane_since = self.now
            self._route(req)
        else:
            req.waiter = waiter
            if math.isfinite(req.deadline):
                self.at(req.deadline, self._lane_deadline, req)

    def _refused(self, req: Request, retry_after_s: float) -> None:
        """Shed by its lane: an online request is answered 503; a bulk job's client retries
        after Retry-After."""
        if req.traffic_class is TrafficClass.ONLINE:
            self._count(self.out.shed, req)
        else:
            self.at(self.now + retry_after_s, self._admit, req)

    def _displaced(self, waiter: Waiter[Request], exc: Overloaded) -> None:
        waiter.token.waiter = None
        self._refused(waiter.token, exc.retry_after_s)

    def _lane_deadline(self, req: Request) -> None:
        if req.waiter is None:
            return  # started (or displaced) before its deadline
        queued, granted = self.lanes[req.deployment].drop(req.waiter)
        req.waiter = None
        if queued:
            self._count(self.out.shed, req)
        self._lane_start(granted)

    def _lane_release(self, req: Request) -> None:
        if req.lane_since is None:
            return
        lane = self.lanes[req.deployment]
        granted = lane.release(req.traffic_class, self.now - req.lane_since)
        req.lane_since = None
        self._lane_start(granted)

    def _lane_start(self, granted: list[Waiter[Request]]) -> None:
        for w in granted:
            req = w.token
            req.waiter, req.lane_since = None, self.now
            self._route(req)

    def _route(self, req: Request) -> None:
        cap = self.settings.max_ongoing_requests
        ready = [
            r
            for r in self.replicas[req.deployment]
            if r.state == "ready" and (cap is None or r.outstanding < cap)
        ]
        if not ready:
            self.backlog[req.deployment].append(req)  # Serve's handle holds it for a replica
            return
        if self.policy.router == "ours":
            views = [
                ReplicaView(str(r.id), r.node, r.outstanding, r.busy_seen, r.speed, r.failed_at)
                for r in ready
            ]
            best = rank(views, None, self.now, self.rng, RoutingPolicy())[0][0]
            rep = next(r for r in ready if str(r.id) == best.replica_id)
        else:
            a, b = self.rng.choice(ready), self.rng.choice(ready)
            rep = a if a.outstanding <= b.outstanding else b
        cls = req.traffic_class if self.policy.classes else TrafficClass.ONLINE
        if req.traffic_class is TrafficClass.ONLINE:
            rep.pacing.saw_online(self.now)
        req.replica = rep
        req.key = rep.queue.put(req.rows - req.done_rows, cls, self.now, req.deadline)
        rep.pending[req.key] = req
        rep.outstanding += 1
        self._try_start(rep)

    def _try_start(self, rep: SimReplica) -> None:
        if rep.running or rep.state not in ("ready", "draining") or not len(rep.queue):
            return
        cap = None
        if self.policy.classes:
            hold = rep.pacing.hold_s(rep.queue, self.now, rep.offline_call_s)
            if hold > 0:
                if rep.hold_at > self.now + hold:
                    rep.hold_at = self.now + hold
                    self.at(rep.hold_at, self._wake, rep, rep.generation)
                return
            cap = rep.pacing.offline_cap(self.now, rep.slot.batch)
        wait_s = self.deployments[rep.slot.deployment].batch_wait_s
        if wait_s > 0 and rep.queue.rows_waiting() < rep.slot.batch:
            full_at = rep.queue.oldest_enqueued_at() + wait_s
            if full_at > self.now + 1e-12:  # not full, and the oldest may wait on
                if rep.hold_at > full_at:
                    rep.hold_at = full_at
                    self.at(full_at, self._wake, rep, rep.generation)
                return
        batch = rep.queue.next_batch(rep.slot.batch, self.now, cap)
        for key in batch.expired:
            req = rep.pending.pop(key)
            rep.outstanding -= 1
            self._count(self.out.shed, req)
            self._lane_release(req)
        if not batch.slices:
            if len(rep.queue):
                self._try_start(rep)
            elif rep.state == "draining" and not rep.pending:
                self._retire(rep)
            return
        reqs = [rep.pending[s.key] for s in batch.slices]
        work = sum(s.rows * r.work / r.rows for s, r in zip(batch.slices, reqs, strict=True))
        model = self.deployments[rep.slot.deployment].model
        dt = self.call_ms(model, rep.slot.gpu, work) / 1e3 / rep.slot.share
        if self.call_sigma is not None:
            dt *= self.rng.lognormvariate(0.0, self.call_sigma(model, rep.slot.gpu, work))
        elif self.settings.jitter_sigma:
            sigma = self.settings.jitter_sigma
            dt *= self.rng.lognormvariate(-sigma * sigma / 2, sigma)
        online = any(r.traffic_class is TrafficClass.ONLINE for r in reqs)
        cls = TrafficClass.ONLINE if online else TrafficClass.OFFLINE
        rep.running = True
        rep.busy_s += dt
        rep.device.begin()
        rep.by_class[cls].begin()
        self.at(self.now + dt, self._call_done, rep, rep.generation, batch.slices, cls)

    def _wake(self, rep: SimReplica, generation: int) -> None:
        if generation == rep.generation and rep.hold_at <= self.now:
            rep.hold_at = math.inf
            self._try_start(rep)

    def _call_done(self, rep: SimReplica, generation: int, slices, cls: TrafficClass) -> None:
        if generation != rep.generation:
            return  # the replica died during the call
        rep.running = False
        rep.device.end()
        rep.by_class[cls].end()
        for s in slices:
            req = rep.pending.get(s.key)
            if req is None:
                continue
            req.done_rows += s.rows
            if req.traffic_class is TrafficClass.OFFLINE:
                self.out.offline_rows_done += s.rows
            if req.done_rows >= req.rows:
                del rep.pending[s.key]
                rep.outstanding -= 1
                self._finish(req)
                self._drain_backlog(rep.slot.deployment)
        if rep.state == "draining" and not rep.pending:
            self._retire(rep)
            return
        self._try_start(rep)

    def _finish(self, req: Request) -> None:
        self._lane_release(req)
        if req.traffic_class is TrafficClass.OFFLINE:
            self.jobs_in_flight[req.deployment] -= 1
            self._feed_jobs(req.deployment)
            return
        latency = self.now - req.arrival
        slo = self.deployments[req.deployment].slo_s
        self._count(self.out.ok if latency <= slo else self.out.late, req)
        self.out.latencies[req.kind].append(latency)
        if self.settings.record_requests:
            self.out.requests.append((req.arrival, req.kind, latency))

    def _count(self, table: dict, req: Request) -> None:
        if req.traffic_class is TrafficClass.ONLINE:
            table[(self._bucket(req.arrival), req.kind)] += 1

    def _bucket(self, t: float) -> int:
        return int(t // self.settings.bucket_s)

    # ---- replicas and cards -----------------------------------------------------------------
    def _live(self, name: str) -> list[SimReplica]:
        """Replicas that count towards the target: starting or ready."""
        return [r for r in self.replicas[name] if r.state in ("starting", "ready")]

    def _start_replica(self, d: SimDeployment, ready_now: bool = False) -> bool:
        held = {
            r.index for r in self.replicas[d.name] if r.state in ("starting", "ready", "draining")
        }
        index = next((i for i in range(len(d.slots)) if i not in held), None)
        if index is None:
            return False
        slot = d.slots[index]
        card, node = self._moved.get(slot.card, (slot.card, slot.node))
        rep = SimReplica(
            next(self._ids),
            slot,
            index,
            card,
            node,
            self.speed_of(slot.gpu) * slot.share,
            self.clock,
            self.settings.busy_window_s,
            self.settings.offline_aging_s,
            self.settings.offline_rows_while_online,
            self.settings.offline_short_call_s,
            # What the replica's profile says such a call takes (a row is a unit of work
            # for the batched models whose offline rows these are).
            self.call_ms(
                d.model, slot.gpu, min(self.settings.offline_rows_while_online, slot.batch)
            )
            / 1e3
            / slot.share,
        )
        self.replicas[d.name].append(rep)
        self._card_type[card] = slot.gpu
        self._card_users[card] += 1
        self._card_since.setdefault(card, self.now)
        if ready_now or self.settings.replica_start_s == 0:
            self._ready(rep)
        else:
            self.at(self.now + self.settings.replica_start_s, self._ready, rep)
        return True

    def _ready(self, rep: SimReplica) -> None:
        if rep.state != "starting":
            return
        rep.state = "ready"
        self._drain_backlog(rep.slot.deployment)

    def _drain_backlog(self, deployment: str) -> None:
        """Requests held at the handle go out, in ``handle_order``, while a replica has room."""
        backlog, cap = self.backlog[deployment], self.settings.max_ongoing_requests
        fifo = self.settings.handle_order == "fifo"
        while backlog and any(
            r.state == "ready" and (cap is None or r.outstanding < cap)
            for r in self.replicas[deployment]
        ):
            self._route(backlog.pop(0 if fifo else self.rng.randrange(len(backlog))))

    def _stop_replica(self, rep: SimReplica) -> None:
        """Scale-down: no new requests; the queue drains, then the card is released."""
        if rep.state == "starting":
            rep.state = "gone"
            self._release_card(rep.card)
            return
        rep.state = "draining"
        if not rep.pending and not rep.running:
            self._retire(rep)

    def _retire(self, rep: SimReplica) -> None:
        rep.state = "gone"
        self._release_card(rep.card)

    def _release_card(self, card: int) -> None:
        self._card_users[card] -= 1
        if self._card_users[card] == 0:
            self._bill(card, self._card_since.pop(card), self.now)

    def _bill(self, card: int, start: float, end: float) -> None:
        """Card-seconds and cost of ``card`` over [start, end), split into report buckets."""
        gpu, b = self._card_type[card], self.settings.bucket_s
        t = start
        while t < end:
            stop = min(end, (math.floor(t / b) + 1) * b)
            self.out.card_s[(self._bucket(t), gpu.name)] += stop - t
            self.out.cost[(self._bucket(t), gpu.name)] += (stop - t) / 3600 * gpu.price_per_hour
            t = stop

    def _fail_node(self, failure: SimFailure) -> None:
        """The node with the most live replicas fails: they die, their requests are retried
        elsewhere, the slots move to fresh cards, and replacements start at once."""
        live = [
            r
            for reps in self.replicas.values()
            for r in reps
            if r.state in ("starting", "ready", "draining")
        ]
        if not live:
            return
        by_node: dict[str, int] = defaultdict(int)
        for r in live:
            by_node[r.node] += 1
        node = max(by_node, key=lambda n: (by_node[n], n))
        fresh_node = f"{node}-replacement-{next(self._seq)}"
        victims = [r for r in live if r.node == node]
        for card in {r.card for r in victims}:
            self._moved[self._logical(card)] = (next(self._fresh_cards), fresh_node)
        orphans = []
        for rep in victims:
            rep.state, rep.generation = "dead", rep.generation + 1
            rep.running = False
            orphans += rep.pending.values()
            rep.pending.clear()
            self._release_card(rep.card)
        for rep in victims:
            self._start_replica(self.deployments[rep.slot.deployment])
        for req in orphans:
            self.out.retried += 1
            req.replica = None
            self._route(req)

    def _logical(self, card: int) -> int:
        for logical, (physical, _) in self._moved.items():
            if physical == card:
                return logical
        return card

    # ---- the control loops -----------------------------------------------------------------
    def _stats_tick(self) -> None:
        """Serve's routing stats period: the router sees each replica's Busy this often;
        the ongoing-requests samples of Serve's default autoscaler are taken too."""
        for name, reps in self.replicas.items():
            ongoing = len(self.backlog[name])
            for r in reps:
                if r.state == "ready":
                    r.busy_seen = r.device.busy()
                    r.busy_reported = (
                        r.by_class[TrafficClass.ONLINE].busy(self.settings.look_back_s),
                        r.by_class[TrafficClass.OFFLINE].busy(self.settings.look_back_s),
                    )
                if r.state in ("ready", "draining"):
                    ongoing += r.outstanding
            samples = self._ongoing[name]
            samples.append((self.now, ongoing))
            horizon = self.now - self.settings.look_back_s
            while samples and samples[0][0] < horizon:
                samples.pop(0)
        self.at(self.now + self.settings.routing_stats_period_s, self._stats_tick)

    def _autoscale_tick(self) -> None:
        s = self.settings
        counts, running = {}, {}
        for name, d in self.deployments.items():
            live = self._live(name)
            current = len(live)
            wanted = self._wanted(d, live)
            counts[name] = current
            running[name] = sum(r.state == "ready" for r in live)
            self.out.replica_s[(self._bucket(self.now), name)] += current * s.interval_s
            decided = self._delay[name].decide(wanted, current, self.now)
            if decided > current:
                for _ in range(decided - current):
                    if not self._start_replica(d):
                        break
            elif decided < current:
                for rep in sorted(live, key=lambda r: r.id)[decided:]:
                    self._stop_replica(rep)
        self.out.replicas_timeline.append((self.now, counts))
        self.out.running_timeline.append((self.now, running))
        self.at(self.now + s.interval_s, self._autoscale_tick)

    def _wanted(self, d: SimDeployment, live: list[SimReplica]) -> int:
        bounds = self._busy_policy[d.name]
        if self.policy.scaler == "ongoing":
            samples = self._ongoing[d.name]
            mean = sum(n for _, n in samples) / len(samples) if samples else 0.0
            want = math.ceil(mean / self.policy.target_ongoing - 1e-9)
            return max(bounds.min_replicas, min(bounds.max_replicas, want))
        ready = [r for r in live if r.state == "ready"]
        reports = [r.busy_reported for r in ready if r.busy_reported is not None]
        if reports:
            on = sum(online for online, _ in reports) / len(reports)
            off = sum(offline for _, offline in reports) / len(reports)
        else:
            on = off = 0.0
        requests = len(self.backlog[d.name]) + sum(r.outstanding for r in ready)
        # As Serve calls the policy: the replicas running (starting ones are only in the target
        # the wish is compared with), Busy the mean of those that have reported.
        wanted = desired_replicas(len(ready), on, off, bounds, requests).replicas
        self.out.busy_policies[d.name] = bounds
        self.out.busy_calls[d.name].append((len(ready), on, off, requests, wanted))
        return wanted

    def _close_books(self) -> None:
        for card, since in list(self._card_since.items()):
            self._bill(card, since, self.now)
        self.out.end_s = self.now
        for name, reps in self.replicas.items():
            for r in reps:
                if r.state in ("ready", "draining", "starting"):
                    for req in r.pending.values():
                        self._count(self.out.shed, req)  # never answered
            for req in self.backlog[name]:
                self._count(self.out.shed, req)
