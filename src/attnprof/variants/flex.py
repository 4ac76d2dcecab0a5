"""FlexAttention, compiled (eager flex materialises the scores): every mask as a mask_mod over a
BlockMask (blocks with no visible pair are skipped), ALiBi and --mask bias as a score_mod.

torch.compile needs a C++ compiler on CPU (inductor's C++ backend), and Triton plus a C compiler
(for Triton's launcher) on CUDA; without them the compiled call fails deep inside inductor, so
the capability check says so up front.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import TYPE_CHECKING, Any

from attnprof.variants.base import Built, Decision, Variant

if TYPE_CHECKING:
    from attnprof.workload import Inputs, Workload

__all__ = ["VARIANTS", "compiler_problem"]


def compiler_problem(workload: Workload) -> str | None:
    """Why torch.compile cannot work here, as a reason code of attnprof.reasons, or None."""
    if workload.device.startswith("cuda"):
        try:
            import triton  # noqa: F401
        except ImportError:
            return "needs_triton"
        # Triton builds its launcher with a C compiler at first use (triton/runtime/build.py:
        # $CC, else gcc, else clang; "Failed to find C compiler" otherwise), deep inside inductor
        if not (os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")):
            return "needs_cc"
        return None
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        return "needs_cxx"
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

        return Decision.no("no_flex", name="flex", torch=str(torch.__version__))
    problem = compiler_problem(workload)
    if problem:
        return Decision.no(problem, name="flex")
    if workload.head_dim < 16 or workload.head_dim & (workload.head_dim - 1):
        return Decision.no("head_dim_pow2", name="flex", got=workload.head_dim)
    if workload.backward and not workload.device.startswith("cuda"):
        # torch's own check (_validate_device) raises NotImplementedError for this
        return Decision.no("no_backward", name="flex", device=workload.device)
    return Decision.ok()


def _mask_bytes(workload: Workload) -> int:
    """create_block_mask evaluates the mask_mod over the whole Sq x Skv grid (one bool each)
    before it reduces it to blocks; --mask bias also keeps its float bias tensor."""
    spec = workload.mask_spec
    grid = workload.seq * workload.kv_seq * (workload.batch if spec.kind == "padding" else 1)
    out = grid if spec.boolean else 0
    if spec.kind == "bias":
        out += workload.heads * workload.seq * workload.kv_seq * workload.element_size
    return out


def _mods(workload: Workload, inputs: Inputs) -> tuple[Any, Any, str]:
    """(mask_mod or None, score_mod or None, how) for the workload's mask."""
    import torch

    spec = workload.mask_spec
    off, skv = workload.q_offset, workload.kv_seq
    dev = workload.device
    mask_mod = score_mod = None
    if spec.kind == "padding":
        lengths = torch.tensor(spec.lengths, device=dev)

        def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return kv_idx < lengths[b]

    elif spec.boolean:

        def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return spec.allowed(q_idx + off, kv_idx, skv=skv)

    if spec.kind == "alibi":
        from attnprof.masks import alibi_slopes

        slopes = torch.tensor(alibi_slopes(workload.heads), device=dev, dtype=torch.float32)

        def score_mod(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return score + slopes[h] * (kv_idx - q_idx - off)

    elif spec.kind == "bias":
        bias = inputs.bias
        assert bias is not None

        def score_mod(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
            return score + bias[0, h, q_idx, kv_idx]

    how = []
    if mask_mod is not None:
        how.append(f"mask_mod ({'causal' if spec.kind == 'alibi' else spec.text}) over a BlockMask")
    if score_mod is not None:
        how.append("score_mod (" + ("ALiBi slopes" if spec.kind == "alibi" else "bias tensor") + ")")
    return mask_mod, score_mod, " + ".join(how) or "no mask"


def _skipped_share(block_mask: Any, q_len: int, kv_len: int) -> float:
    """Share of the (q block, kv block) pairs the kernel skips: neither partial nor full.
    BlockMask.sparsity() goes negative when a length is below the block size (it divides by
    the rounded-down block count), so the count is done here against the rounded-up one."""
    bq, bk = block_mask.BLOCK_SIZE
    blocks = -(-q_len // bq) * -(-kv_len // bk)
    used = block_mask.kv_num_blocks.sum()
    if block_mask.full_kv_num_blocks is not None:
        used = used + block_mask.full_kv_num_blocks.sum()
    groups = block_mask.kv_num_blocks.numel() // block_mask.kv_num_blocks.shape[-1]
    return 1.0 - float(used) / (blocks * groups)


def _build(workload: Workload, inputs: Inputs) -> Built:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from attnprof.variants.compiling import make_room

    # each build is one more entry of flex_attention's code object in dynamo's cache: past the
    # recompile limit flex would run eager (materialising the scores), labelled compiled
    make_room(flex_attention)

    mask_mod, score_mod, how = _mods(workload, inputs)
    block_mask = None
    sparsity = None
    if mask_mod is not None:
        batch = workload.batch if workload.mask_spec.kind == "padding" else None
        # built once per workload, like the naive variants' mask
        block_mask = create_block_mask(
            mask_mod, B=batch, H=None, Q_LEN=workload.seq, KV_LEN=workload.kv_seq, device=workload.device
        )
        sparsity = _skipped_share(block_mask, workload.seq, workload.kv_seq)
    flex = _compiled_flex()
    q, k, v, scale = inputs.q, inputs.k, inputs.v, inputs.scale
    gqa = workload.kv_heads != workload.heads

    def call() -> Any:
        return flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=gqa)

    executed = workload.flops_dense() * (1.0 - sparsity) if sparsity is not None else workload.flops_dense()
    return Built(call=call, mask_path=how, block_sparsity=sparsity, flops_executed=executed)


VARIANTS = [
    Variant(
        name="flex",
        description="FlexAttention with a BlockMask (mask_mod) and score_mod, compiled with torch.compile",
        build=_build,
        capability=_capability,
        backend="flex",
        can_compile=False,
        no_twin_reason="it is compiled with torch.compile already",
        sweep_default=False,  # compiles for seconds per shape
        mask_bytes=_mask_bytes,
    )
]
