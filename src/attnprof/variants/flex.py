"""FlexAttention with a causal BlockMask, compiled (eager flex materialises the scores).

torch.compile needs a C++ compiler on CPU (inductor's C++ backend) and Triton on CUDA; without
them the compiled call fails deep inside inductor, so the capability check says so up front.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import TYPE_CHECKING, Any

from attnprof.variants.registry import Built, Decision, Variant

if TYPE_CHECKING:
    from attnprof.workload import Inputs, Workload

__all__ = ["VARIANTS", "compiler_problem"]


def compiler_problem(workload: Workload) -> str | None:
    """Why torch.compile cannot work here, or None."""
    if workload.device.startswith("cuda"):
        try:
            import triton  # noqa: F401
        except ImportError:
            return "torch.compile on CUDA needs Triton: pip install triton"
        return None
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        return "torch.compile on CPU needs a C++ compiler (inductor): apt-get install g++"
    return None


@functools.cache
def _compiled_flex() -> Any:
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    # one compiled function per process: recompiling per call would dominate the time
    return torch.compile(flex_attention, dynamic=False)


def _capability(workload: Workload) -> Decision:
    try:
        from torch.nn.attention import flex_attention  # noqa: F401
    except ImportError:
        import torch

        return Decision.no(f"flex: this torch ({torch.__version__}) has no FlexAttention (needs >= 2.5)")
    problem = compiler_problem(workload)
    if problem:
        return Decision.no(f"flex: {problem}")
    if workload.head_dim < 16 or workload.head_dim & (workload.head_dim - 1):
        return Decision.no(f"flex: head_dim must be a power of two >= 16; got {workload.head_dim}")
    return Decision.ok()


def _build(workload: Workload, inputs: Inputs) -> Built:
    from torch.nn.attention.flex_attention import create_block_mask

    block_mask = None
    if workload.causal:

        def causal(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return q_idx >= kv_idx

        # built once per workload, like the naive variants' mask
        block_mask = create_block_mask(
            causal, B=None, H=None, Q_LEN=workload.seq, KV_LEN=workload.kv_seq, device=workload.device
        )
    flex = _compiled_flex()
    q, k, v, scale = inputs.q, inputs.k, inputs.v, inputs.scale
    gqa = workload.kv_heads != workload.heads

    def call() -> Any:
        return flex(q, k, v, block_mask=block_mask, scale=scale, enable_gqa=gqa)

    return Built(call=call)


VARIANTS = [
    Variant(
        name="flex",
        description="FlexAttention with a causal BlockMask, compiled with torch.compile",
        build=_build,
        capability=_capability,
        backend="flex",
        can_compile=False,
        no_twin_reason="it is compiled with torch.compile already",
        sweep_default=False,  # compiles for seconds per shape
    )
]
