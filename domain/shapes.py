"""Array shape conventions shared by the packing, the kernels and the actors.

The letters, used in docstrings as ``float32[R, L]``:

* ``R`` riders (routes), ``O`` orders, ``L`` stop slots per route (the longest route, padding the
  rest), ``P`` explicit (rider, order) pairs.
* Coordinates are planar metres ``(x east, y north)`` in the round's local projection
  (:class:`domain.geo.LocalProjection`); times are seconds since the round's ``now``; loads are
  capacity units.
* Missing values are padded, never ragged: ``-inf`` for "no earliest time", ``+inf`` for "no
  deadline", ``0`` for coordinates, service times and loads of padding slots.
"""

from __future__ import annotations

from typing import Any, TypeAlias

Array: TypeAlias = Any
"""A NumPy or CuPy ndarray (the kernels accept either; see ``kernels.backend``)."""
