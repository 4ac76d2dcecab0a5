"""A collective's bandwidth as nccl-tests reports it: algorithm bandwidth (bytes / time) and bus
bandwidth (algbw times a factor of the collective's kind and group size, so that every kind is
compared with the hardware's link bandwidth).

nccl-tests (doc/PERFORMANCE.md) takes the message size as the larger of what one rank sends and
receives (the whole gathered buffer of an all-gather, the whole input of a reduce-scatter), which
is max(In msg nelems, Out msg nelems) times the element size here, and these factors for a group
of n ranks:

=================================== ================
kind (PyTorch's "Collective name")  bus factor
=================================== ================
allreduce                           2 (n - 1) / n
allgather, reduce_scatter, alltoall (n - 1) / n
broadcast, reduce, send, recv       1
=================================== ================

Any other kind (barrier, wait, gather, scatter, ...) has no factor: its bus bandwidth is null with
the reason, never a guess. The element size comes from c10's scalar type name ("dtype").
"""

from __future__ import annotations

import re

__all__ = ["DTYPE_BYTES", "WHY", "bus_factor", "kind_of", "message_bytes"]

# c10::ScalarType names as record_param_comms writes them -> bytes per element
DTYPE_BYTES = {
    "Byte": 1,
    "Char": 1,
    "Bool": 1,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "Short": 2,
    "Half": 2,
    "BFloat16": 2,
    "UInt16": 2,
    "Int": 4,
    "Float": 4,
    "UInt32": 4,
    "ComplexHalf": 4,
    "Long": 8,
    "Double": 8,
    "UInt64": 8,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
}

# why a collective's bandwidth is null: code -> English (the reports word them from their
# catalogs, `coll.bw.<code>`)
WHY = {
    "no_sizes": "its message size is not recorded (no record_param_comms args on it or its launch)",
    "no_dtype": "its element type is not recorded or not known",
    "no_group_size": "its group size is not recorded",
    "no_factor": "nccl-tests gives no bus factor for its kind",
    "no_time": "its kernel took no measurable time",
}

_FACTORS = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
}
_NOISE = re.compile(r"_(coalesced|base|into_tensor|tensor)$")


def kind_of(collective: str) -> str:
    """PyTorch's collective name reduced to its nccl-tests kind: `_allgather_base`,
    `allgather_into_tensor_coalesced` and `all_gather` are all `allgather`."""
    k = collective.strip().lower().lstrip("_")
    prev = None
    while prev != k:
        prev, k = k, _NOISE.sub("", k)
    return k.replace("_", "")


def bus_factor(collective: str, n: int) -> float | None:
    f = _FACTORS.get(kind_of(collective))
    return None if f is None or n < 1 else float(f(n))


def message_bytes(in_nelems: int | None, out_nelems: int | None, dtype: str | None) -> int | str:
    """Bytes of the message as nccl-tests counts them, or the code of why they are unknown."""
    counts = [c for c in (in_nelems, out_nelems) if c is not None]
    if not counts:
        return "no_sizes"
    size = DTYPE_BYTES.get(dtype or "")
    if size is None:
        return "no_dtype"
    return max(counts) * size
