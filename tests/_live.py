"""Record small CPU traces with torch.profiler itself, the way the blog's scripts do.

Until the harness records them, the analyser's live tests make their own: the profiler is real,
the attention variants are the blog's (DOMAIN.md sections 1-2), the shapes tiny (B1 H2 S64 D16).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

VARIANTS = ("naive", "naive-inplace", "sdpa-math", "sdpa-flash")


def _fn(variant: str) -> Callable[..., object]:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def naive(q, k, v, mask, scale):  # type: ignore[no-untyped-def]
        scores = (q @ k.transpose(-2, -1)) * scale
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def naive_inplace(q, k, v, mask, scale):  # type: ignore[no-untyped-def]
        scores = (q @ k.transpose(-2, -1)) * scale
        scores.masked_fill_(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    def sdpa(backend: SDPBackend) -> Callable[..., object]:
        def run(q, k, v, mask, scale):  # type: ignore[no-untyped-def]
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        return run

    return {
        "naive": naive,
        "naive-inplace": naive_inplace,
        "sdpa-math": sdpa(SDPBackend.MATH),
        "sdpa-flash": sdpa(SDPBackend.FLASH_ATTENTION),
    }[variant]


def record(variant: str, out_dir: Path, *, dtype: str = "bf16", record_shapes: bool = False) -> Path:
    """Profile three forwards (schedule wait=1, warmup=1, active=3) and export a .json.gz trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    dt = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[dtype]
    b, h, s, d = 1, 2, 64, 16
    q, k, v = (torch.randn(b, h, s, d, dtype=dt) for _ in range(3))
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    fn = _fn(variant)
    with torch.no_grad():
        for _ in range(3):  # warm-up outside the profiler, as the blog does
            fn(q, k, v, mask, d**-0.5)
        with profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
            record_shapes=record_shapes,
        ) as prof:
            for _ in range(5):
                with record_function("attn_fwd"):
                    fn(q, k, v, mask, d**-0.5)
                prof.step()
    path = out_dir / f"{b}_{h}_{s}_{d}_{variant}_eager.json.gz"
    prof.export_chrome_trace(str(path))
    return path
