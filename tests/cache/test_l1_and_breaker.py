"""L1 honours TTL and its byte bound; the breaker opens, probes and closes."""

from __future__ import annotations

import numpy as np
import pytest

from cache.breaker import BreakerState, CircuitBreaker
from cache.l1 import L1Cache


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("policy", ["lru", "tinylfu"])
def test_ttl_expiry(policy):
    clock = Clock()
    l1 = L1Cache(10_000, default_ttl_s=5, policy=policy, clock=clock)
    l1.set("k", b"v")
    assert l1.get("k") == b"v"
    clock.t = 5.1
    assert l1.get("k") is None and len(l1) == 0 and l1.bytes_held == 0


@pytest.mark.parametrize("policy", ["lru", "tinylfu"])
def test_byte_bound_is_never_exceeded(policy):
    l1 = L1Cache(5_000, policy=policy)
    rng = np.random.default_rng(0)
    for _ in range(2_000):
        l1.set(f"key-{rng.integers(300)}", b"x" * int(rng.integers(1, 200)))
        assert l1.bytes_held <= 5_000
    l1.set("huge", b"x" * 10_000)
    assert l1.get("huge") is None


def test_lru_evicts_the_least_recently_used():
    l1 = L1Cache(3 * (96 + 2 + 10), policy="lru")
    for k in ("k1", "k2", "k3"):
        l1.set(k, b"0123456789")
    l1.get("k1")
    l1.set("k4", b"0123456789")
    assert l1.get("k2") is None and l1.get("k1") == b"0123456789"


def test_tinylfu_keeps_hot_keys_through_a_scan():
    l1 = L1Cache(50_000, policy="tinylfu")
    hot = [f"hot-{k}" for k in range(50)]
    for _ in range(20):
        for key in hot:
            if l1.get(key) is None:
                l1.set(key, b"v" * 200)
    for k in range(5_000):  # a one-off scan of cold keys
        if l1.get(f"cold-{k}") is None:
            l1.set(f"cold-{k}", b"v" * 200)
    kept = sum(l1.get(key) is not None for key in hot)
    assert kept >= 45


def test_breaker_cycle():
    clock = Clock()
    b = CircuitBreaker(failure_threshold=3, reset_after_s=1.0, clock=clock)
    for _ in range(3):
        assert b.allow()
        b.failure()
    assert b.state is BreakerState.OPEN and not b.allow()
    clock.t = 1.5
    assert b.allow() and b.state is BreakerState.HALF_OPEN
    assert not b.allow()  # one probe at a time
    b.failure()
    assert b.state is BreakerState.OPEN
    clock.t = 3.0
    assert b.allow()
    b.success()
    assert b.state is BreakerState.CLOSED and b.allow()
