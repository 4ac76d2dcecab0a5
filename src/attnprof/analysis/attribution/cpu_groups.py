"""CPU op groups: the coarse group of an aten op name (the CPU lanes of tables and plots).

The CPU side has no kernel families; these groups (by aten op name, checked in order) let the
report stack CPU op time the way it stacks GPU time by category (attnprof.analysis.attribution.classify)."""

from __future__ import annotations

__all__ = ["cpu_category"]

_CPU_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attention", ("scaled_dot_product", "flash_attention", "efficient_attention", "flex_attention")),
    # convolutions before GEMMs: oneDNN's and cuDNN's convolution ops, the aten wrappers
    ("conv", ("convolution", "conv1d", "conv2d", "conv3d", "conv_transpose", "conv_depthwise")),
    ("gemm", ("bmm", "matmul", "::mm", "addmm", "linear")),
    ("norm", ("layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm")),
    ("softmax", ("softmax",)),
    (
        "mask",
        (
            "masked_fill",
            "tril",
            "triu",
            "::ones",
            "where",
            "scalar_tensor",
            "fill_",
            "isneginf",
            "logical_not",
        ),
    ),
    ("copy", ("clone", "copy_", "::to", "_to_copy", "contiguous", "empty_like")),
    (
        "layout",
        (
            "transpose",
            "permute",
            "::view",
            "reshape",
            "expand",
            "as_strided",
            "unsqueeze",
            "::t",
            "select",
            "slice",
            "_unsafe_view",
            "::empty",
            "resolve_",
        ),
    ),
    (
        "elementwise",
        (
            "::mul",
            "::div",
            "::add",
            "::sub",
            "::exp",
            "::neg",
            "::relu",
            "::gelu",
            "::silu",
            "::sigmoid",
            "::tanh",
            "::clamp",
            "::hardtanh",
            "::pow",
            "::rsqrt",
            "::sqrt",
            "::dropout",
            "::threshold_backward",
        ),
    ),
    ("reduction", ("::sum", "::max", "::amax", "::all", "::any", "::mean")),
)


def cpu_category(name: str) -> str:
    """Group an aten op name: "aten::bmm" -> gemm, "aten::masked_fill_" -> mask, ..."""
    low = name.lower()
    base = low.split("::")[-1]
    for cat, keys in _CPU_GROUPS:
        for key in keys:
            if key.startswith("::"):
                if base == key[2:] or base.rstrip("_") == key[2:]:
                    return cat
            elif key in low:
                return cat
    return "other"
