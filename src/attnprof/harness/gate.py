"""The one memory gate: whether a variant may run in the memory there is, before anything is
built (`attnprof run` and each sweep job alike). What is free: harness/memory.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnprof.harness.memory import available_bytes
from attnprof.harness.options import RunOptions
from attnprof.reasons import reason
from attnprof.records import ReasonCode

if TYPE_CHECKING:
    from attnprof.harness.shared import Shared
    from attnprof.variants.registry import Variant
    from attnprof.workload import Workload

__all__ = ["memory_gate"]


def memory_gate(
    v: Variant, workload: Workload, shared: Shared, opts: RunOptions, *, share: float = 1.0
) -> ReasonCode | None:
    """The one memory gate, before anything is built: why `v` is refused, or None. Its need is
    its own estimate plus what `shared` has still to build (inputs, the fp64 reference); the limit
    is `share` of what is free on the device (1 for `attnprof run`, less for a sweep's workers,
    which share one RAM). --force (force = true) lets everything through."""
    if opts.force:
        return None
    from attnprof.harness.accuracy import compare_bytes
    from attnprof.harness.timing import L2_FLUSH_BYTES

    pending = shared.pending_bytes(accuracy=opts.check_accuracy)
    estimate = v.estimate_bytes(workload)
    check = compare_bytes(workload) if opts.check_accuracy else 0
    # while the others are timed in turn, this variant's retained tensors (its mask) stay
    # allocated: the largest transient working set among those prepared before it comes on top
    retained = max(0, shared.prepared_transient - (estimate - v.mask_cost(workload)))
    flush = L2_FLUSH_BYTES if workload.device.startswith("cuda") else 0
    need = estimate + pending + check + retained + flush
    free = available_bytes(workload.device)
    limit = int(free * share)
    if need <= limit:
        return None
    parts = [
        reason(
            "memory.scores",
            count=v.score_tensors,
            size_bytes=workload.score_bytes(4 if v.score_fp32 else None),
        )
        if v.materialises
        else reason("memory.fused")
    ]
    mask = v.mask_cost(workload)
    if mask:
        parts.append(reason("memory.mask", size_bytes=mask))
    if pending:
        parts.append(reason("memory.pending", size_bytes=pending))
    if check:
        parts.append(reason("memory.accuracy", size_bytes=check))
    if retained:
        parts.append(reason("memory.retained", size_bytes=retained))
    if flush:
        parts.append(reason("memory.flush", size_bytes=flush))
    if share >= 1.0:
        return reason(
            "memory", *parts, name=v.label, need_bytes=need, free_bytes=free, device=workload.device
        )
    return reason(
        "memory_share",
        *parts,
        name=v.label,
        need_bytes=need,
        limit_bytes=limit,
        share=share,
        free_bytes=free,
        device=workload.device,
    )
