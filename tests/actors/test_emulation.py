"""The emulated device: one call at a time, in the order the calls came (as on one card)."""

from __future__ import annotations

import threading
import time

from actors.emulation import EmulatedDevice, Emulation, FifoLock


def test_waiting_calls_get_the_device_in_the_order_they_asked() -> None:
    lock, order = FifoLock(), []

    def call(k: int) -> None:
        with lock:
            order.append(k)

    with lock:  # the device is busy while twelve calls line up, one after another
        threads = []
        for k in range(12):
            t = threading.Thread(target=call, args=(k,))
            t.start()
            threads.append(t)
            deadline = time.monotonic() + 5
            while lock._issued < k + 2:  # this call holds its ticket before the next comes
                assert time.monotonic() < deadline, f"call {k} never asked for the device"
                time.sleep(0.001)
    for t in threads:
        t.join(5)
    assert order == list(range(12))


def test_calls_take_the_stated_time_one_at_a_time() -> None:
    device = EmulatedDevice(Emulation(call_ms=30))
    threads = [threading.Thread(target=device.run, args=(lambda: None,)) for _ in range(3)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert time.perf_counter() - t0 >= 0.09  # three 30 ms calls, not overlapping
