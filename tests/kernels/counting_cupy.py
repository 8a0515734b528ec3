"""A CuPy stand-in over NumPy that counts what crosses between the host and the device.

Installed as ``cupy`` (``installed``), it lets the CPU run a round down the GPU path, launchers
included, and count every host-to-device copy, device-to-host copy and host sync that CuPy
itself would make:

* ``asarray``/``array``/``ascontiguousarray`` of host data, a host index or value given to a
  device array: a copy in (``h2d``);
* ``.get()``, ``asnumpy``: a copy out (``d2h``);
* ``float``, ``int``, ``bool``, ``item``, ``tolist`` of a device array: a copy out and a sync;
* an operation whose output size depends on the data (``nonzero``, a boolean mask,
  ``unique``, ...): a sync (CuPy reads the count back before it can allocate);
* a stream's or an event's ``synchronize``: a sync, counted apart (``waits``) because it is
  what a stage timer does, not the round.

Device arrays keep NumPy data they alone own (a copy in or out is a copy, as on a card) and,
like CuPy's, refuse to mix with host arrays in arithmetic and refuse ``numpy.asarray``.
Kernels of ``RawModule`` sources run as emulators registered by kernel name
(``EMULATORS``), which read their arguments by the parameter names of the ``.cu`` source and
call the kernels' host twins; what a device kernel computes is held equal to those twins by the
kernel tests on a GPU, so only the host's side of the round is under test here.
"""

from __future__ import annotations

import re
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin


@dataclass
class Crossings:
    """What crossed since the last ``reset``: copies each way (count and bytes), host syncs
    inside the work, explicit waits (stream or event ``synchronize``), array operations on the
    device (each at least one launch of CuPy's: a ufunc, a function or method that computes,
    an index that gathers, every assignment), the project's kernel launches by name,
    and where each copy out and sync came from (``sites``: file:line of the first frame
    outside this module and NumPy)."""

    h2d: int = 0
    h2d_bytes: int = 0
    d2h: int = 0
    d2h_bytes: int = 0
    syncs: int = 0
    waits: int = 0
    operations: int = 0
    launches: Counter = field(default_factory=Counter)
    sites: Counter = field(default_factory=Counter)

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def copy_in(self, nbytes: int) -> None:
        self.h2d += 1
        self.h2d_bytes += int(nbytes)
        self.sites[("h2d", _caller())] += 1

    def copy_out(self, nbytes: int) -> None:
        self.d2h += 1
        self.d2h_bytes += int(nbytes)
        self.sites[("d2h", _caller())] += 1

    def sync(self) -> None:
        self.syncs += 1
        self.sites[("sync", _caller())] += 1

    def by_file(self) -> Counter:
        """``sites`` by (kind, file), lines aside."""
        out: Counter = Counter()
        for (kind, site), n in self.sites.items():
            out[(kind, site.rsplit(":", 1)[0])] += n
        return out


#: The counts of the installed stand-in (one process, one device).
CROSSINGS = Crossings()


def _caller() -> str:
    import sys

    frame = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename == __file__ or "/numpy/" in frame.f_code.co_filename
    ):
        frame = frame.f_back
    if frame is None:
        return "?"
    name = frame.f_code.co_filename.rsplit("/", 2)
    return f"{'/'.join(name[-2:])}:{frame.f_lineno}"


def _refuse_host(x: Any) -> None:
    if isinstance(x, np.ndarray) and x.ndim > 0:
        raise TypeError(f"Unsupported type {type(x)}: a host array in a device operation")


def _unwrap(x: Any) -> Any:
    if isinstance(x, DeviceArray):
        return x._a
    _refuse_host(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(i) for i in x)
    return x


def _wrap(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return DeviceArray(x)
    if isinstance(x, np.generic):  # CuPy's reductions and scalar reads stay 0-d on the device
        return DeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(i) for i in x)
    if isinstance(x, list):
        return [_wrap(i) for i in x]
    return x


def _index(key: Any) -> Any:
    """A key for a device array: device arrays as they are (a boolean mask syncs: its count
    sizes the result), host arrays and lists copied in first, as CuPy does."""
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, DeviceArray):
        if key.dtype == np.bool_:
            CROSSINGS.sync()
        return key._a
    if isinstance(key, (np.ndarray, list)):
        a = np.asarray(key)
        CROSSINGS.copy_in(a.nbytes)
        if a.dtype == np.bool_:
            CROSSINGS.sync()
        return a
    return key


#: NumPy functions whose output size depends on the values: CuPy syncs to read it.
_SIZED_BY_DATA = {"nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract"}


#: Operations that make a view or an uninitialised array: no launch.
_NO_LAUNCH = {
    "view",
    "reshape",
    "ravel",
    "transpose",
    "swapaxes",
    "squeeze",
    "expand_dims",
    "broadcast_to",
    "empty",
    "empty_like",
    "result_type",
    "ndim",
    "shape",
}


def _call(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    if name not in _NO_LAUNCH:
        CROSSINGS.operations += 1
    if name in _SIZED_BY_DATA or (name == "where" and len(args) == 1):
        CROSSINGS.sync()
    if name == "bincount" and kwargs.get("minlength") is None:
        CROSSINGS.sync()
    if name == "repeat" and len(args) > 1 and isinstance(args[1], DeviceArray):
        CROSSINGS.sync()
    return _wrap(fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))


class DeviceArray(NDArrayOperatorsMixin):
    """A device array: NumPy data behind CuPy's rules of crossing."""

    __slots__ = ("_a",)

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    # What stays on the device.
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: DeviceArray(self._a.T))

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Iterator[DeviceArray]:
        return (DeviceArray(np.asarray(row)) for row in self._a)

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"

    def __getitem__(self, key: Any) -> Any:
        parts = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, (DeviceArray, np.ndarray, list)) for k in parts):
            CROSSINGS.operations += 1  # a gather (basic slicing is a view: no launch)
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        CROSSINGS.operations += 1
        if isinstance(value, DeviceArray):
            value = value._a
        elif isinstance(value, (np.ndarray, list)) and np.ndim(value) > 0:
            CROSSINGS.copy_in(np.asarray(value).nbytes)
        self._a[_index(key)] = value

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._a, name)
        if not callable(method):
            raise AttributeError(name)

        def on_device(*args: Any, **kwargs: Any) -> Any:
            return _call(name, method, args, kwargs)

        return on_device

    # What crosses to the host.
    def get(self, stream: Any = None) -> np.ndarray:
        CROSSINGS.copy_out(self._a.nbytes)
        return self._a.copy()

    def _scalar(self) -> Any:
        CROSSINGS.copy_out(self._a.nbytes)
        CROSSINGS.sync()
        return self._a

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __index__(self) -> int:
        return int(self._scalar())

    def __bool__(self) -> bool:
        return bool(self._scalar())

    def item(self) -> Any:
        return self._scalar().item()

    def tolist(self) -> Any:
        return self._scalar().tolist()

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly."
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        CROSSINGS.operations += 1
        if "out" in kwargs:
            kwargs["out"] = tuple(_unwrap(o) for o in kwargs["out"])
        got = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        return _wrap(got)

    def __array_function__(self, func: Any, types_: Any, args: tuple, kwargs: dict) -> Any:
        return _call(func.__name__, func, args, kwargs)


DeviceArray.__module__ = "cupy"  # what kernels.backend.array_module reads


def _copy_in(
    x: Any, dtype: Any = None, copy: bool = False, contiguous: bool = False
) -> DeviceArray:
    """A device array of ``x``: a device array itself where CuPy would give it back (no
    copy asked, the dtype and layout it has), else a copy; host data is copied in."""
    if isinstance(x, DeviceArray):
        a = x._a if dtype is None else x._a.astype(dtype, copy=False)
        if contiguous:
            a = np.ascontiguousarray(a)
        if copy:
            a = a.copy()
        if a is not x._a:
            CROSSINGS.operations += 1  # a copy on the device
        return DeviceArray(a)
    a = np.array(x, dtype=dtype, copy=True, order="C")
    CROSSINGS.copy_in(a.nbytes)
    return DeviceArray(a)


@dataclass
class _Stream:
    """A stream: work here is done when it is issued, so waiting only counts."""

    handle: int = 0

    def synchronize(self) -> None:
        CROSSINGS.waits += 1

    def __enter__(self) -> _Stream:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _Event:
    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        CROSSINGS.waits += 1


#: Kernel emulators by kernel name: (arguments by parameter name) -> None, writing the outputs.
EMULATORS: dict[str, Callable[[dict[str, Any]], None]] = {}

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)


def _parameters(code: str) -> dict[str, tuple[str, ...]]:
    return {
        m.group(1): tuple(p.split()[-1].lstrip("*") for p in m.group(2).split(","))
        for m in _KERNEL.finditer(code)
    }


class _Kernel:
    def __init__(self, name: str, parameters: tuple[str, ...]) -> None:
        self.name, self.parameters = name, parameters

    def __call__(self, grid: Any, block: Any, args: tuple, **kwargs: Any) -> None:
        if len(args) != len(self.parameters):
            raise TypeError(f"{self.name} takes {len(self.parameters)} arguments, got {len(args)}")
        for a in args:
            _refuse_host(a)
        CROSSINGS.launches[self.name] += 1
        values = {
            name: a._a if isinstance(a, DeviceArray) else a
            for name, a in zip(self.parameters, args, strict=True)
        }
        EMULATORS[self.name](values)


class _RawModule:
    def __init__(self, code: str, options: Any = (), **kwargs: Any) -> None:
        self._parameters = _parameters(code)

    def get_function(self, name: str) -> _Kernel:
        return _Kernel(name, self._parameters[name])


def _cuda() -> types.SimpleNamespace:
    current = _Stream()

    class _Runtime:
        CUDARuntimeError = RuntimeError

        @staticmethod
        def getDeviceCount() -> int:  # noqa: N802 (CuPy's name)
            return 1

        @staticmethod
        def free(ptr: int) -> None:
            return None

        @staticmethod
        def deviceSynchronize() -> None:  # noqa: N802 (CuPy's name)
            CROSSINGS.waits += 1

    return types.SimpleNamespace(
        runtime=_Runtime,
        driver=types.SimpleNamespace(CUDADriverError=RuntimeError),
        Stream=lambda non_blocking=False, priority=0: _Stream(),
        ExternalStream=lambda handle: _Stream(handle),
        get_current_stream=lambda: current,
        Event=_Event,
        get_elapsed_time=lambda start, end: 0.0,
    )


class CountingCupy(types.ModuleType):
    """The stand-in module: NumPy's names, on ``DeviceArray``s."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.ndarray = DeviceArray
        self.cuda = _cuda()
        self.RawModule = _RawModule
        self.asarray = lambda x, dtype=None, order=None: _copy_in(x, dtype)
        self.array = lambda x, dtype=None, copy=True, order=None: _copy_in(x, dtype, copy)
        self.ascontiguousarray = lambda x, dtype=None: _copy_in(x, dtype, contiguous=True)
        self.asnumpy = lambda x, stream=None: x.get() if isinstance(x, DeviceArray) else x

    def __getattr__(self, name: str) -> Any:
        value = getattr(np, name)
        if isinstance(value, type) or not callable(value):
            return value  # dtypes, constants

        def on_device(*args: Any, **kwargs: Any) -> Any:
            return _call(name, value, args, kwargs)

        return on_device


@contextmanager
def installed() -> Iterator[CountingCupy]:
    """``cupy`` is the stand-in inside the block (and the backend's device check sees one
    device); the real module, if any, is back after it. Counts start at zero."""
    import sys

    from . import emulators  # noqa: F401  (registers the kernels)

    module = CountingCupy()
    saved = sys.modules.get("cupy")
    sys.modules["cupy"] = module
    _forget_built_kernels()
    CROSSINGS.reset()
    try:
        yield module
    finally:
        if saved is None:
            sys.modules.pop("cupy", None)
        else:
            sys.modules["cupy"] = saved
        _forget_built_kernels()


def _forget_built_kernels() -> None:
    """Clear what the launchers and the backend cached from whichever ``cupy`` they met."""
    from kernels import _improve_cuda, _insertion_costs_cuda, _pair_scan_cuda, backend

    for cached in (
        backend.cupy_available,
        _improve_cuda._kernel,
        _insertion_costs_cuda._module,
        _pair_scan_cuda._module,
    ):
        cached.cache_clear()


def report(sizes: list[tuple[int, int]]) -> str:
    """A table of what one GPU round of each size (riders x orders, seeded) makes cross,
    counted on this stand-in."""
    import warnings

    from kernels.backend import cupy_available
    from planner import dispatch_round, generate_round

    lines = [
        "| round | copies in (MB) | copies out (MB) | host syncs | waits | device operations "
        "(the project's kernels) |",
        "|---|---|---|---|---|---|",
    ]
    with installed(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        cupy_available()
        for riders, orders in sizes:
            round_ = generate_round(riders, orders, seed=2)
            CROSSINGS.reset()
            dispatch_round(round_, backend="cupy")
            c = CROSSINGS
            lines.append(
                f"| {riders} x {orders} | {c.h2d} ({c.h2d_bytes / 1e6:.2f}) | {c.d2h} "
                f"({c.d2h_bytes / 1e6:.2f}) | {c.syncs} | {c.waits} | {c.operations} "
                f"({sum(c.launches.values())}) |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    # python -m tests.kernels.counting_cupy 300x100 1000x300 5000x2000 (the package's own
    # module, not this __main__ copy, holds the registered kernels)
    from tests.kernels.counting_cupy import report as package_report

    sizes = [tuple(int(n) for n in s.split("x")) for s in sys.argv[1:]]
    print(package_report(sizes))  # type: ignore[arg-type]
