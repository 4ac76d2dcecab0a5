"""Kernel classification: an ordered table of rules over kernel names (DOMAIN.md section 4).

Each rule is (category, family, regex, tensor_cores). The first rule whose regex matches a kernel
name (re.search) decides its category and family; the order below is part of the definition:

1. look-alikes first, so that they never reach the attention rules (vLLM's
   reshape_and_cache_flash_kernel writes the KV cache; quantize kernels whose template arguments
   mention flashinfer quantize);
2. fused attention, most specific family first (PyTorch flash before the flash-attn package,
   whose bare flash_fwd_kernel is a substring of PyTorch's; the split-KV combine kernel before
   the split-KV kernel);
3. Triton kernels (tensor-core use unknown from the name: null, never a guess);
4. convolutions (cuDNN implicit-GEMM "scudnn" kernels are convolutions on CUDA cores), then GEMMs
   with the CUDA-core markers (ffma, gemv, sgemm) before the tensor-core markers, because
   "sm80_xmma_gemm_f32f32_..._ffma_..." contains "xmma" but runs on CUDA cores; a GEMM whose
   name says neither gets tensor_cores null;
5. softmax, norms, mask building, communication, copies, reductions, elementwise;
6. fallback: category "other", family "other", tensor_cores null.

Memcpy and memset events are classified by their event kind, not by a rule.
Precision is read from the name separately (_PRECISION) and is None when the name does not say.
Classification runs once per unique name, never per event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["CATEGORIES", "RULES", "Classification", "Rule", "classify", "precision_of"]

CATEGORIES = (
    "attention",
    "gemm",
    "conv",
    "softmax",
    "elementwise",
    "reduction",
    "norm",
    "mask",
    "copy",
    "memcpy",
    "memset",
    "communication",
    "triton",
    "other",
)


@dataclass(frozen=True)
class Rule:
    category: str
    family: str
    pattern: re.Pattern[str]
    tensor_cores: bool | None


@dataclass(frozen=True)
class Classification:
    category: str
    family: str
    tensor_cores: bool | None
    precision: str | None


def _r(category: str, family: str, regex: str, tensor_cores: bool | None) -> Rule:
    return Rule(category, family, re.compile(regex), tensor_cores)


RULES: tuple[Rule, ...] = (
    # 1. look-alikes that are not attention
    _r("copy", "vLLM KV-cache write", r"reshape_and_cache", False),
    _r("other", "quantize", r"(?i)quant\w*.*flashinfer|flashinfer.*quant", None),
    # 2. fused attention
    _r("attention", "PyTorch flash (FA2)", r"pytorch_flash::flash_(fwd|bwd)", True),
    _r(
        "attention",
        "FA3 (Hopper)",
        r"flash::compute_attn_ws|FlashAttn(Fwd|Bwd)Sm\d+|flash::FlashAttn(Fwd|Bwd)",
        True,
    ),
    _r("attention", "flash-attn split-KV combine", r"flash_fwd_splitkv_combine_kernel", False),
    _r("attention", "flash-attn (FA2)", r"\bflash_(fwd|bwd)\w*_kernel|\bflash_bwd_\w+", True),
    _r("attention", "memory-efficient (cutlass, fp32)", r"fmha_cutlass[FB]_f32|AttentionKernel<float", None),
    _r(
        "attention",
        "memory-efficient (cutlass)",
        r"fmha_cutlass[FB]|PyTorchMemEffAttention|AttentionBackwardKernel",
        True,
    ),
    _r(
        "attention", "cuDNN SDPA", r"cudnn\w*sdpa|sdpa\w*(fprop|bprop)|cudnn_generated_fort_native_sdpa", True
    ),
    _r("attention", "TensorRT-LLM fmha", r"fmhaSm\d+|fmha_v2|trtllm\w*fmha|\bxqa_?\w*kernel", True),
    _r("attention", "FlashInfer", r"(?i)flashinfer\w*::(\w*prefill|\w*decode|\w*attention)\w*kernel", None),
    _r("attention", "CK fmha (ROCm)", r"ck_tile::Fmha|FmhaFwdKernel|FmhaBwd", None),
    _r(
        "attention",
        "Triton attention",
        r"(?i)triton\w*(attn|attention|flex)|_attn_fwd|_attn_bwd|flex_attention|\battn_fwd",
        None,
    ),
    # 3. Triton
    _r("triton", "Triton", r"^triton_|\btriton\b", None),
    # 4. convolutions (implicit-GEMM ones too: "scudnn" is single precision on CUDA cores), then
    #    GEMMs with CUDA-core markers first
    _r(
        "conv",
        "cuDNN convolution (tensor-op)",
        r"h884cudnn|s884cudnn|h1688cudnn|s1688cudnn|h16816cudnn|cudnn\w*(tensorop|xmma)",
        True,
    ),
    _r(
        "conv",
        "cuDNN convolution",
        r"(?i)scudnn|convolve_sgemm|winograd|wgrad|dgrad|im2col|cudnn::cnn|cask_\w*cudnn|conv2d|convolution",
        False,
    ),
    _r("gemm", "cuBLAS xmma FFMA (CUDA cores)", r"gemm\w*_ffma_|_ffma_\w*gemm|xmma\w*ffma", False),
    _r("gemm", "cuBLAS gemv", r"gemv|gemmSN_|\bgemmk1_kernel|gemmStridedBatched\w*SN", False),
    _r("gemm", "cuBLAS sgemm", r"sgemm|\bdgemm|zgemm|cgemm", False),
    _r("gemm", "cuBLASLt nvjet", r"nvjet_", True),
    _r("gemm", "Hopper xmma (wgmma)", r"sm90_xmma|sm100_xmma|wgmma|gmma|warpgroup", True),
    _r(
        "gemm",
        "CUTLASS tensor-op",
        r"cutlass\w*(tensorop|wmma|sm90|sm100)|cutlass_\d+_\w*(s16816|h16816|s1688|h1688|s161616|i8816)",
        True,
    ),
    _r(
        "gemm",
        "cuBLAS tensor-op",
        r"s16816|h16816|s1688|h1688|h884|s884|i8816|i16832|s161616|wmma|tensorop|xmma_gemm|\bxmma",
        True,
    ),
    _r("gemm", "hipBLASLt (matrix cores)", r"Cijk_\w*_MI\d+x", True),
    _r("gemm", "hipBLASLt", r"Cijk_", None),
    _r("gemm", "CUTLASS gemm", r"(?i)cutlass\w*gemm", None),
    _r("gemm", "gemm", r"(?i)(?<!fb)gemm(?!_gpu)", None),
    # 5. everything else
    _r("softmax", "softmax", r"(?i)softmax", False),
    _r(
        "norm",
        "norm",
        r"(?i)layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|\bbn_(fw|bw)|welford",
        False,
    ),
    _r("mask", "mask building", r"triu_tril|tril_indices|triu_indices|masked_fill|masked_scatter", False),
    _r(
        "communication",
        "NCCL",
        r"(?i)nccl|rccl|msccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce",
        None,
    ),
    _r(
        "copy",
        "copy / layout",
        r"(?i)direct_copy|copy_device_to_device|copy_kernel|nchwToNhwc|nhwcToNchw|transpose_?kernel|permute|CatArrayBatchedCopy|index_copy|_to_copy",
        False,
    ),
    _r(
        "reduction",
        "reduction",
        r"reduce_kernel|splitKreduce|(?i:reduction)|\bcub::|topk|TopK|radixSort|sort_kernel|scan_kernel",
        False,
    ),
    _r(
        "elementwise",
        "elementwise",
        r"(?i)elementwise|functor|_kernel_cuda|index_put|scatter|gather|fill_kernel",
        False,
    ),
)

# first match wins; order matters (bf16 before fp16: "bf16" contains "f16")
_PRECISION: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("bf16", re.compile(r"(?i)bf16|bfloat16")),
    ("fp8", re.compile(r"(?i)fp8|e4m3|e5m2|float8")),
    ("fp16", re.compile(r"(?i)(?<![a-z0-9])(f16|fp16)|half|__half|\bh(884|1688|16816)|_f16")),
    ("int8", re.compile(r"(?i)int8|i8816|i16832|_s8")),
    ("tf32", re.compile(r"(?i)tf32|(?<![hb])s1688gemm(?!_(fp16|bf16))")),
    ("fp64", re.compile(r"(?i)dgemm|double|f64")),
    ("fp32", re.compile(r"(?i)f32|fp32|float|sgemm|_scudnn_|sm\d+_xmma_gemm_f32")),
)

_FALLBACK = ("other", "other", None)


def precision_of(name: str) -> str | None:
    for label, pattern in _PRECISION:
        if pattern.search(name):
            return label
    return None


@lru_cache(maxsize=65536)
def classify(name: str) -> Classification:
    """Category, family, tensor-core use and precision of one kernel name."""
    category, family, tensor_cores = _FALLBACK
    for rule in RULES:
        if rule.pattern.search(name):
            category, family, tensor_cores = rule.category, rule.family, rule.tensor_cores
            break
    return Classification(category, family, tensor_cores, precision_of(name))
