"""Why a variant did not run: the reason codes, their English, and one renderer for every language.

A rejection (a variant's capability check, a compiled twin's compiler check, the memory gate, a
model's implementation check) is recorded twice in a RunResult: as `reason`, the English sentence
run.json has always carried, and as `reason_code`, a ReasonCode (a code and the sentence's
fields). The English sentence is rendered here from ENGLISH; the report catalogs hold the same
message under `harness.<code>` in each language (a test keeps the English the same), so a report
says the reason in its language from the code, never by parsing the English back.

This module imports neither torch nor the report: the variants and the harness use it.
"""

from __future__ import annotations

from collections.abc import Callable

from attnprof.records import ReasonCode
from attnprof.units import LocaleFormatter, fmt_bytes

__all__ = ["ENGLISH", "english", "reason", "render"]

# code -> the English template (str.format; *_bytes fields are byte counts, {parts} the parts)
ENGLISH: dict[str, str] = {
    # a variant's capability check (attnprof.variants)
    "cuda_only": "{name}: PyTorch implements it for CUDA only; this run is on {device}",
    "flash_cuda_only": "{name}: FlashAttention kernels run on CUDA only; this run is on {device}",
    "needs_half_cuda": "{name} on CUDA needs fp16 or bf16; got {dtype} (use --dtype bf16)",
    "needs_half": "{name} needs fp16 or bf16; got {dtype} (use --dtype bf16)",
    "bf16_capability": "{name} in bf16 needs compute capability >= {need}; this GPU is {have}",
    "capability": "{name} needs compute capability >= {need}; this GPU is {have}",
    "head_dim": "{name} supports head_dim <= {max}; got {got}",
    "no_cudnn": "{name} needs cuDNN, which this torch build cannot load",
    "head_dim_pow2": "{name}: head_dim must be a power of two >= 16; got {got}",
    "no_flex": "{name}: this torch ({torch}) has no FlexAttention (needs >= 2.5)",
    "no_backward": "{name}: FlexAttention has no backward on {device} in this torch; "
    "run --backward on CUDA, or drop --backward",
    "needs_triton": "{name}: torch.compile on CUDA needs Triton: pip install triton",
    "needs_cc": "{name}: Triton (torch.compile on CUDA) builds its launcher with a C compiler at first "
    "use and finds none: apt-get install gcc, or set CC",
    "needs_cxx": "{name}: torch.compile on CPU needs a C++ compiler (inductor): apt-get install g++",
    "hub_mask": "{name}: flash_attn_func takes causal, window_size and alibi_slopes; a {kind} mask "
    "needs its varlen entry point, which attnprof does not drive: use flex or sdpa",
    "hub_alignment": "{name}: FlashAttention aligns the causal mask bottom-right when Sq != Skv; "
    "attnprof's prefill is top-left (as SDPA's is_causal): use --phase decode or equal lengths",
    "user_mask": "{name}: the --mask {mask} workload passes {form}, and {name} has no attn_mask "
    "parameter: add attn_mask=None to it",
    # another library's own words (PyTorch's check, a missing kernel, transformers), as it said them
    "said": "{name}: {detail}",
    # the memory gate (attnprof.harness.gate): `attnprof run` and each sweep job
    "memory": "{name}: needs an estimated {need_bytes} ({parts}) but only {free_bytes} is free on "
    "{device}; shrink the shape or pass --force",
    "memory_share": "{name}: needs an estimated {need_bytes} ({parts}) but the limit is {limit_bytes} "
    "({share:.0%} of the {free_bytes} free on {device}); shrink the shape or set force = true in [run]",
    "memory.scores": "materialises {count:g} score tensors of {size_bytes}",
    "memory.fused": "fused, no score tensor",
    "memory.mask": "{size_bytes} of mask tensors",
    "memory.pending": "{size_bytes} of inputs and fp64 reference",
    "memory.accuracy": "{size_bytes} of fp64 temporaries for the accuracy check",
    "memory.retained": "{size_bytes} for a variant prepared before it, timed in turn while this one's tensors stay allocated",
    "memory.flush": "{size_bytes} of L2 flush buffer for CUDA timing",
    # the load meter (attnprof.harness.load): why a timing window's figures are unreliable
    "load_other": "other processes used {share:.0%} of the {n} CPUs while timing",
    "load_steal": "the hypervisor took {share:.0%} of CPU time (steal) while timing",
    "load_spread": "timing spread up to {share:.0%} of the median (IQR)",
    "load_loadavg": "load average {load:.1f} on {n} CPUs",
    # attnprof model
    "cpu_slow": "{name} compiles its kernels with inductor on first use, about a minute on a "
    "2-core CPU; ask for it with --variants {name}",
    "in_model": "{name}: {parts}",
}


def reason(code: str, *parts: ReasonCode, **args: str | int | float) -> ReasonCode:
    """A ReasonCode; the code must have an English template (a typo fails here, not in a report)."""
    if code not in ENGLISH:
        raise KeyError(f"no reason code {code!r}")
    return ReasonCode(code=code, args=args, parts=list(parts))


def render(why: ReasonCode, template: Callable[[str], str], *, sep: str = ", ") -> str:
    """`why` in the language of `template` (code -> template): byte counts formatted, parts
    rendered the same way and joined with `sep` into {parts}."""
    fields: dict[str, object] = {
        k: fmt_bytes(v) if k.endswith("_bytes") and not isinstance(v, str) else v for k, v in why.args.items()
    }
    if why.parts:
        fields["parts"] = sep.join(render(p, template, sep=sep) for p in why.parts)
    # the catalogs' formatter: a figure's spec ({share:.0%}) in the reader's number locale
    return LocaleFormatter().vformat(template(why.code), (), fields)


def english(why: ReasonCode) -> str:
    """The English sentence run.json carries as `reason`."""
    return render(why, ENGLISH.__getitem__)
