"""The OR hot spots as array kernels: NumPy on a CPU, CuPy (and CUDA) on a GPU, same answers.

Arrays in, arrays out; no Ray, no Redis. Shapes and units: ``domain.shapes``.
"""

from kernels.arrays import OrderArrays, RouteArrays
from kernels.assign import assign, auction
from kernels.backend import array_module, cupy_available, resolve_backend
from kernels.improve import improve, route_cost
from kernels.insertion_costs import insertion_costs, route_context
from kernels.insertion_types import Insertions
from kernels.schedule import Schedule, schedule

__all__ = [
    "Insertions",
    "OrderArrays",
    "RouteArrays",
    "Schedule",
    "array_module",
    "assign",
    "auction",
    "cupy_available",
    "improve",
    "insertion_costs",
    "resolve_backend",
    "route_context",
    "route_cost",
    "schedule",
]
