"""FlashAttention from the Hugging Face kernels hub (blog 04_d), layout [B, S, H, D].

Needs the `kernels` package (extra `hub`) and a CUDA GPU. It works offline from a local kernel:
LOCAL_KERNELS="kernels-community/flash-attn2=/path/to/kernel" (the kernels package's own
override) or ATTNPROF_HUB_KERNEL=/path/to/kernel (loaded with get_local_kernel). Without either,
the hub is only tried when it answers within a second: the kernels package otherwise retries an
unreachable hub for tens of seconds before failing with a bare ConnectError.
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnprof.errors import MissingExtra
from attnprof.variants.base import Built, Decision, Variant

if TYPE_CHECKING:
    from attnprof.workload import Inputs, Workload

__all__ = ["HUB_REPO", "HUB_VERSION", "VARIANTS", "load_flash_kernel"]

HUB_REPO = "kernels-community/flash-attn2"
HUB_VERSION = 3
_HUB_HOST = "huggingface.co"


def _local_path() -> Path | None:
    explicit = os.environ.get("ATTNPROF_HUB_KERNEL")
    if explicit:
        return Path(explicit)
    for item in os.environ.get("LOCAL_KERNELS", "").split(":"):
        repo, _, path = item.partition("=")
        if repo.strip() == HUB_REPO and path:
            return Path(path)
    return None


def _hub_reachable(timeout: float = 1.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True"):
        return False
    try:
        with socket.create_connection((_HUB_HOST, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _missing_reason() -> str | None:
    """What stops the hub kernel from loading, or None when it can be tried."""
    try:
        import kernels  # noqa: F401
    except ImportError:
        return "needs the kernels package: pip install 'attnprof[hub]'"
    local = _local_path()
    if local is not None:
        return None if local.exists() else f"local kernel path {local} does not exist"
    if not _hub_reachable():
        return (
            f"no local kernel and {_HUB_HOST} is unreachable: set "
            f"LOCAL_KERNELS='{HUB_REPO}=/path/to/kernel' or ATTNPROF_HUB_KERNEL=/path/to/kernel"
        )
    return None


@functools.cache
def load_flash_kernel() -> Any:
    """The hub's flash-attn module (local path first, then the hub)."""
    try:
        import kernels
    except ImportError as exc:
        raise MissingExtra("kernels", "hub", "hub-flash") from exc
    local = _local_path()
    if local is not None and os.environ.get("ATTNPROF_HUB_KERNEL"):
        return kernels.get_local_kernel(local)  # type: ignore[attr-defined]
    # LOCAL_KERNELS is honoured by get_kernel itself
    return kernels.get_kernel(HUB_REPO, version=HUB_VERSION)


def _capability(workload: Workload) -> Decision:
    if not workload.device.startswith("cuda"):
        return Decision.no("flash_cuda_only", name="hub-flash", device=workload.device)
    if workload.dtype == "fp32":
        return Decision.no("needs_half", name="hub-flash", dtype=workload.dtype)
    kind = workload.mask_spec.kind
    if kind not in ("causal", "none", "sliding", "alibi"):
        return Decision.no("hub_mask", name="hub-flash", kind=kind)
    if kind != "none" and workload.phase == "prefill" and workload.seq != workload.kv_seq:
        return Decision.no("hub_alignment", name="hub-flash")
    reason = _missing_reason()
    return Decision.no("said", name="hub-flash", detail=reason) if reason else Decision.ok()


def _build(workload: Workload, inputs: Inputs) -> Built:
    import torch

    from attnprof.masks import alibi_slopes

    mod = load_flash_kernel()
    # [B, H, S, D] -> [B, S, H, D], done once outside the timed call; with backward these copies
    # are the leaves the gradients are taken of (GQA: k and v keep their kv heads, FA2 takes that)
    q, k, v = (
        t.detach().transpose(1, 2).contiguous().requires_grad_(workload.backward)
        for t in (inputs.q, inputs.k, inputs.v)
    )
    spec = workload.mask_spec
    scale = inputs.scale
    kwargs: dict[str, Any] = {"causal": spec.kind != "none", "softmax_scale": scale}
    how = ["causal=True" if spec.kind != "none" else "causal=False"]
    if spec.kind == "sliding":
        kwargs["window_size"] = (spec.value - 1, 0)  # W keys: the query's own and W-1 before it
        how.append(f"window_size=({spec.value - 1}, 0)")
    if spec.kind == "alibi":
        kwargs["alibi_slopes"] = torch.tensor(alibi_slopes(workload.heads), device=workload.device)
        how.append("alibi_slopes")
    kvcache = getattr(mod, "flash_attn_with_kvcache", None)
    if workload.phase == "decode" and kvcache is not None and not workload.backward:
        # the serving entry point: new queries against a full cache (bottom-right causal)
        def call() -> Any:
            return kvcache(q, k, v, **kwargs)

        entry = "flash_attn_with_kvcache"
    else:

        def call() -> Any:
            out = mod.flash_attn_func(q, k, v, **kwargs)
            return out[0] if isinstance(out, tuple) else out

        entry = "flash_attn_func"
    return Built(
        call=call,
        to_bhsd=lambda t: t.transpose(1, 2),
        leaves=(q, k, v),
        mask_path=f"{entry}({', '.join(how)})",
    )


VARIANTS = [
    Variant(
        name="hub-flash",
        description="FlashAttention-2 from the Hugging Face kernels hub, layout [B, S, H, D] (blog 04_d)",
        build=_build,
        capability=_capability,
        layout="BSHD",
        backend="hub-flash",
        can_compile=False,
        no_twin_reason="it calls a prebuilt kernel from the hub, which torch.compile does not compile",
        sweep_default=False,  # needs the hub extra and a kernel
    )
]
