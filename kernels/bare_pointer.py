"""An array's data as a bare pointer, for compiled code that hands an array to helpers it
calls in a hot loop.

A compiled helper that is called rather than inlined pays two reference counts on each array
argument per call (atomic ones for an array that came from Python): for a small helper,
as much as its work (the sparse solve's heap steps; a request reader's tokens). A pointer is
not counted. It is indexed like the array (``p[i]``, read and write) and carries no length,
so the caller passes bounds along. The array must outlive every use of its pointer: take the
pointer inside the compiled function that holds the array.
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic


@intrinsic
def data_pointer(typingctx, array):  # pragma: no cover - compiled
    """The data of a C-contiguous ``array`` as a pointer to its dtype (compiled code only)."""
    if not isinstance(array, types.Array) or array.layout != "C":
        return None
    signature = types.CPointer(array.dtype)(array)

    def codegen(context, builder, sig, args):
        return context.make_array(sig.args[0])(context, builder, args[0]).data

    return signature, codegen
