"""F.scaled_dot_product_attention: PyTorch's own dispatch, and each backend pinned (blog 04_c).

On CPU only MATH and FLASH exist (aten::_scaled_dot_product_flash_attention_for_cpu); asking
for EFFICIENT or CUDNN there fails with PyTorch's generic "No viable backend", so the capability
checks here say why instead. On CUDA, PyTorch's own torch.backends.cuda.can_use_*(debug=True)
explains a rejection through TORCH_WARN lines on stderr (not Python warnings); we capture them
(variants/native_warnings.py) and pass the reason on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnprof.variants.base import Built, Decision, Variant

if TYPE_CHECKING:
    import torch

    from attnprof.workload import Inputs, Workload

__all__ = [
    "BACKEND_OPS",
    "VARIANTS",
    "attn_mask",
    "backend_from_ops",
    "backend_rules",
    "lower_right_path",
    "mask_form",
    "pytorch_choice",
]

# aten op name (as it appears in a trace) -> backend
BACKEND_OPS: dict[str, str] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_flash_attention_forward": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_efficient_attention_forward": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math",
}

_ENUM = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}


def backend_from_ops(op_names: list[str] | set[str]) -> str | None:
    """The SDPA backend that ran, from the aten ops seen under the forward: a fused op's backend
    (it wins when the math op appears too); "math" when ops were seen but none names a backend
    (the math path runs plain aten ops only); None when no ops were seen (profiling off)."""
    found = [BACKEND_OPS[n] for n in op_names if n in BACKEND_OPS]
    for b in ("flash", "efficient", "cudnn", "overrideable", "math"):
        if b in found:
            return b
    return "math" if op_names else None


def _is_cuda(workload: Workload) -> bool:
    return workload.device.startswith("cuda")


def mask_form(workload: Workload) -> tuple[str, str]:
    """How SDPA's users pass this workload's mask: (form, description). Forms: "none",
    "is_causal", "lower_right" (torch.nn.attention.bias.causal_lower_right, decode with several
    queries), "bool" (attn_mask, True = attend), "float" (an additive attn_mask)."""
    spec = workload.mask_spec
    if spec.kind == "none" or (spec.kind == "causal" and workload.q_offset > 0 and workload.seq == 1):
        # one decode query is the newest token: it sees the whole cache
        return "none", "no mask"
    if spec.kind == "causal":
        if workload.q_offset == 0:
            return "is_causal", "is_causal=True"
        return "lower_right", "attn_mask=causal_lower_right(Sq, Skv) (a CausalBias)"
    if spec.kind in ("alibi", "bias"):
        shape = f"1x{workload.heads}x{workload.seq}x{workload.kv_seq}"
        what = "ALiBi bias, -inf above the diagonal" if spec.kind == "alibi" else "additive bias"
        return "float", f"attn_mask float [{shape}] ({what})"
    shape = (
        f"{workload.batch}x1x1x{workload.kv_seq}"
        if spec.kind == "padding"
        else f"{workload.seq}x{workload.kv_seq}"
    )
    return "bool", f"attn_mask bool [{shape}] (True = attend)"


def _mask_bytes(workload: Workload) -> int:
    form, _ = mask_form(workload)
    if form in ("none", "is_causal"):
        return 0
    if form == "lower_right":
        # materialised by CausalBias on every call where no fused kernel takes it
        return workload.seq * workload.kv_seq
    base = workload.dense_mask_bytes()
    return base + (workload.seq * workload.kv_seq if form == "float" else base)  # the inverted copy


def _probe(
    workload: Workload, *, with_mask: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, bool]:
    """q, k, v and a mask of the workload's shapes, dtype and device, as the dispatch checks see
    them, at no memory: each is one row of the last dimension expanded to the full shape
    (strides 0, ..., 0, 1), so nothing of the size of the real inputs is allocated before the
    memory gate. The last stride is 1 on purpose: PyTorch's efficient and cuDNN checks require
    `attn_mask.stride(-1) == 1` (check_last_dim_stride_equals_1_dense in
    aten/src/ATen/native/transformers/sdp_utils_cpp.h), which the real (contiguous) mask has and
    a 0-d tensor expanded to the shape does not. Returns (q, k, v, attn_mask, is_causal);
    `with_mask=False` gives what CausalBias checks first (no mask, is_causal False)."""
    import torch

    dt, dev = workload.torch_dtype, workload.device

    def row(*shape: int, dtype: torch.dtype = dt) -> torch.Tensor:
        return torch.empty(shape[-1], dtype=dtype, device=dev).expand(*shape)

    b, d = workload.batch, workload.head_dim
    q = row(b, workload.heads, workload.seq, d)
    k = row(b, workload.kv_heads, workload.kv_seq, d)
    v = row(b, workload.kv_heads, workload.kv_seq, d)
    if workload.backward:
        for t in (q, k, v):
            t.requires_grad_(True)
    form, _ = mask_form(workload)
    mask = None
    if not with_mask:
        return q, k, v, None, False
    if form in ("bool", "lower_right"):  # lower_right: the mask CausalBias materialises
        shape = (
            (b, 1, 1, workload.kv_seq)
            if workload.mask_spec.kind == "padding"
            else (workload.seq, workload.kv_seq)
        )
        mask = row(*shape, dtype=torch.bool)
    elif form == "float":
        mask = row(1, workload.heads, workload.seq, workload.kv_seq)
    return q, k, v, mask, form == "is_causal"


def _params(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, is_causal: bool, gqa: bool) -> Any:
    import torch

    try:
        return torch.backends.cuda.SDPAParams(q, k, v, mask, 0.0, is_causal, gqa)
    except TypeError:  # older torch without the enable_gqa argument
        return torch.backends.cuda.SDPAParams(q, k, v, mask, 0.0, is_causal)  # type: ignore[call-arg]


def _enabled(backend: str) -> Any:
    """The backends the variant's call enables: all (auto) or the one it pins (sdpa_kernel sets
    the global flags that check_runtime_disabled_* read)."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    if backend == "auto":
        return contextlib.nullcontext()
    return sdpa_kernel([getattr(SDPBackend, _ENUM[backend])])


def lower_right_path(workload: Workload, backend: str = "auto") -> str:
    """What causal_lower_right's CausalBias runs for this workload under the variant's backends,
    as CausalBias._dispatch (torch/nn/attention/bias.py) decides it: "flash" when
    can_use_flash_attention passes for the inputs without a mask (it then calls
    aten::_scaled_dot_product_flash_attention with is_causal=True, which FA2 aligns bottom-right),
    else "efficient" when can_use_efficient_attention does (_efficient_attention_forward with the
    bottom-right custom mask type), else "materialised": a dense bool mask through SDPA's own
    dispatch. The checks are PyTorch's; they return False on a build without CUDA and for CPU
    tensors, so on CPU the answer is always "materialised"."""
    import torch

    q, k, v, _, _ = _probe(workload, with_mask=False)
    params = _params(q, k, v, None, False, workload.kv_heads != workload.heads)
    with _enabled(backend):
        if torch.backends.cuda.can_use_flash_attention(params):
            return "flash"
        if torch.backends.cuda.can_use_efficient_attention(params):
            return "efficient"
    return "materialised"


def backend_rules(workload: Workload) -> dict[str, str]:
    """Why each SDPA backend can or cannot take this workload (its mask above all): PyTorch's
    own can_use_* reasons on CUDA; on CPU, the CPU dispatch's rules (only flash and math exist
    there, and the CPU flash kernel takes is_causal and any attn_mask)."""
    _form, desc = mask_form(workload)
    if _is_cuda(workload):
        out = {}
        for backend in ("flash", "efficient", "cudnn"):
            try:
                reason = _cuda_reason(backend, workload)
            except Exception as exc:  # an old torch without the check: say so
                reason = f"not checked ({type(exc).__name__})"
            out[backend] = f"refuses: {reason}" if reason else f"accepts {desc}"
        out["math"] = f"accepts {desc} (always available)"
        return out
    if _form == "lower_right":
        desc += " materialised as a dense bool mask (CausalBias's fused paths are CUDA only)"
    return {
        "flash": f"accepts {desc} (the CPU flash kernel takes is_causal and attn_mask)",
        "efficient": "refuses: CUDA only",
        "cudnn": "refuses: CUDA only",
        "math": f"accepts {desc} (always available)",
    }


def _cuda_reason(backend: str, workload: Workload) -> str | None:
    """Ask PyTorch itself whether `backend` can run this workload; None when it can. A
    CausalBias (decode with several queries) is asked as CausalBias asks: flash and efficient
    first without a mask; a backend that refuses that is asked with the materialised mask
    (flash never takes one: "Flash Attention does not support non-null attn_mask")."""
    form, _ = mask_form(workload)
    gqa = workload.kv_heads != workload.heads
    if form == "lower_right" and backend in ("flash", "efficient"):
        if lower_right_path(workload, backend) == backend:
            return None
        q, k, v, _, _ = _probe(workload, with_mask=False)
        why = _ask(backend, _params(q, k, v, None, False, gqa), workload)
        if backend == "flash" or why is None:
            return why
    q, k, v, mask, is_causal = _probe(workload)
    return _ask(backend, _params(q, k, v, mask, is_causal, gqa), workload)


def _ask(backend: str, params: Any, workload: Workload) -> str | None:
    """PyTorch's can_use_<backend>(params, debug=True): None when it accepts, else its reasons.
    This build prints them as TORCH_WARN lines on stderr; call_capturing also takes them as
    Python warnings, where a build raises them so (variants/native_warnings.py)."""
    import torch

    from attnprof.variants.native_warnings import call_capturing

    fn = {
        "flash": torch.backends.cuda.can_use_flash_attention,
        "efficient": torch.backends.cuda.can_use_efficient_attention,
        "cudnn": getattr(torch.backends.cuda, "can_use_cudnn_attention", None),
    }[backend]
    if fn is None:
        return f"this torch ({torch.__version__}) has no {backend} backend check"
    ok, msgs = call_capturing(fn, params, debug=True)  # fd 2 and Python warnings both
    if ok:
        return None
    # some reasons are TORCH_WARN_ONCE (cuDNN's "key/value sequence length 1"): said once a
    # process, so a later refusal can come without words; then name what attnprof checks itself
    return "; ".join(msgs) if msgs else silent_refusal(backend, workload)


def silent_refusal(backend: str, workload: Workload) -> str:
    """The reason for a refusal PyTorch gave no words for: the constraint of `backend` that
    attnprof knows (documented in sdp_utils_cpp.h / sdp_utils.cpp) and the workload fails, or,
    where none fails, the workload's values that were checked, saying so."""
    form, _ = mask_form(workload)
    d, dt = workload.head_dim, workload.dtype
    failed = []
    if backend in ("flash", "cudnn") and dt == "fp32":
        failed.append(f"dtype {dt} (needs fp16 or bf16)")
    if backend in ("flash", "efficient") and d % 8:
        failed.append(f"head dim {d} (needs a multiple of 8)")
    if backend == "flash" and d > 256:
        failed.append(f"head dim {d} (at most 256)")
    if backend == "flash" and form in ("bool", "float"):
        failed.append(f"an explicit {form} attn_mask (flash takes none)")
    if not _is_cuda(workload):
        failed.append(f"device {workload.device} (needs CUDA)")
    if failed:
        return f"refused with no reason printed by PyTorch; fails: {', '.join(failed)}"
    return (
        "refused with no reason printed by PyTorch; attnprof's own checks pass "
        f"(dtype {dt}, head dim {d}, mask {form}, device {workload.device}, "
        f"q {workload.batch}x{workload.heads}x{workload.seq}, kv {workload.kv_heads}x{workload.kv_seq}): cause unknown"
    )


def _capability(backend: str):  # type: ignore[no-untyped-def]
    name = "sdpa" if backend == "auto" else f"sdpa-{backend}"

    def check(workload: Workload) -> Decision:
        import torch

        if backend in ("auto", "math"):
            return Decision.ok()
        if not _is_cuda(workload):
            if backend == "flash":
                return Decision.ok()  # aten::_scaled_dot_product_flash_attention_for_cpu
            return Decision.no("cuda_only", name=name, device=workload.device)
        idx = torch.device(workload.device).index or 0
        major, minor = torch.cuda.get_device_capability(idx)
        if backend == "flash":
            if workload.dtype == "fp32":
                return Decision.no("needs_half_cuda", name=name, dtype=workload.dtype)
            if major < 8:
                return Decision.no("capability", name=name, need="8.0", have=f"{major}.{minor}")
            if workload.head_dim > 256:
                return Decision.no("head_dim", name=name, max=256, got=workload.head_dim)
        if backend == "cudnn":
            if major < 8:
                return Decision.no("capability", name=name, need="8.0", have=f"{major}.{minor}")
            if not torch.backends.cudnn.is_available():
                return Decision.no("no_cudnn", name=name)
        if backend == "efficient" and workload.dtype == "bf16" and major < 8:
            return Decision.no("bf16_capability", name=name, need="8.0", have=f"{major}.{minor}")
        reason = _cuda_reason(backend, workload)  # PyTorch's own words
        return Decision.no("said", name=name, detail=reason) if reason else Decision.ok()

    return check


def attn_mask(workload: Workload, inputs: Inputs) -> Any:
    """The attn_mask SDPA gets for this workload (None for is_causal or no mask)."""
    form, _ = mask_form(workload)
    if form == "lower_right":
        from torch.nn.attention.bias import causal_lower_right

        return causal_lower_right(workload.seq, workload.kv_seq)
    if form == "bool":
        hidden = workload.mask_rows(0, workload.seq)
        assert hidden is not None
        return hidden.logical_not_()  # SDPA's bool mask is True where attention IS allowed
    if form == "float":
        bias = inputs.bias
        assert bias is not None
        if workload.mask_spec.kind == "alibi":
            hidden = workload.mask_rows(0, workload.seq)
            return bias.masked_fill(hidden, float("-inf")) if hidden is not None else bias
        return bias
    return None


def _builder(backend: str):  # type: ignore[no-untyped-def]
    def build(workload: Workload, inputs: Inputs) -> Built:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q, k, v, scale = inputs.q, inputs.k, inputs.v, inputs.scale
        gqa = workload.kv_heads != workload.heads
        form, desc = mask_form(workload)
        causal = form == "is_causal"
        mask = attn_mask(workload, inputs)

        if backend == "auto":

            def call() -> torch.Tensor:
                return F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa
                )

        else:
            pinned = getattr(SDPBackend, _ENUM[backend])

            def bare() -> torch.Tensor:
                return F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa
                )

            def scope() -> Any:
                return sdpa_kernel([pinned])

            def call() -> torch.Tensor:
                with scope():
                    return bare()

        # a fused kernel given a dense attn_mask computes every block; given is_causal (or a
        # CausalBias it can take without a mask) it skips the blocks above the diagonal
        dense = form in ("bool", "float") or backend == "math"
        if form == "lower_right":
            path = lower_right_path(workload, backend)
            dense = dense or path == "materialised"
            desc += (
                f": CausalBias runs the {path} kernel without a mask (bottom-right causal)"
                if path != "materialised"
                else ": CausalBias materialises it as a dense bool mask (no fused kernel takes it without one)"
            )
        return Built(
            call=call,
            # timed inside the pin, entered once per sample: entering sdpa_kernel is ~8 us of
            # Python a call on CPU, which the auto variant running the same kernel does not pay
            scope=scope if backend != "auto" else None,
            bare=bare if backend != "auto" else None,
            mask_path=desc,
            flops_executed=workload.flops_dense() if dense else None,
            notes=tuple(f"{b}: {why}" for b, why in backend_rules(workload).items()),
        )

    return build


def pytorch_choice(workload: Workload) -> str:
    """The backend PyTorch's own dispatch picks for this workload (torch._fused_sdp_choice; for
    a CausalBias, CausalBias's own choice first: lower_right_path)."""
    import torch
    from torch.nn.attention import SDPBackend

    form, _ = mask_form(workload)
    if form == "lower_right":
        path = lower_right_path(workload)
        if path != "materialised":
            return path
    q, k, v, mask, is_causal = _probe(workload)
    gqa = workload.kv_heads != workload.heads
    scale = workload.head_dim**-0.5
    try:
        choice = torch._fused_sdp_choice(  # type: ignore[attr-defined]
            q, k, v, mask, 0.0, is_causal, scale=scale, enable_gqa=gqa
        )
    except TypeError:
        choice = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal)  # type: ignore[attr-defined]
    names = {
        SDPBackend.MATH: "math",
        SDPBackend.FLASH_ATTENTION: "flash",
        SDPBackend.EFFICIENT_ATTENTION: "efficient",
        SDPBackend.CUDNN_ATTENTION: "cudnn",
    }
    return names.get(SDPBackend(choice), str(SDPBackend(choice)).split(".")[-1].lower())


def _variant(backend: str, description: str, score_tensors: float = 0.0, fp32: bool = False) -> Variant:
    return Variant(
        name="sdpa" if backend == "auto" else f"sdpa-{backend}",
        description=description,
        build=_builder(backend),
        capability=_capability(backend),
        score_tensors=score_tensors,
        score_fp32=fp32,
        backend=None if backend == "auto" else backend,
        mask_bytes=_mask_bytes,
    )


VARIANTS = [
    _variant("auto", "F.scaled_dot_product_attention with PyTorch's own backend choice", 0.0),
    # math: fp32 upcast in half precision, the causal mask rebuilt, scores + _safe_softmax copies
    _variant("math", "SDPA pinned to MATH: unfused, upcasts half precision to fp32 (blog 04_c)", 4.0, True),
    _variant("flash", "SDPA pinned to FLASH_ATTENTION (FA2 on CUDA; a fused C++ kernel on CPU)"),
    _variant("efficient", "SDPA pinned to EFFICIENT_ATTENTION (xformers-derived cutlass kernel)"),
    _variant("cudnn", "SDPA pinned to CUDNN_ATTENTION (cuDNN fused flash fprop)"),
]
