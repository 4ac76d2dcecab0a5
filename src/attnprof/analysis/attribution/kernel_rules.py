"""The kernel rules: an ordered table of rules over kernel names (DOMAIN.md section 4), read by
attnprof.analysis.attribution.classify `classify`.

Each rule is (category, family, regex, tensor_cores, examples). The first rule whose regex
matches a kernel name (re.search) decides its category and family; the order below is part of the
definition, and every rule carries real names that it, and no rule before it, must match (one test
per rule in tests/test_classify.py):

1. look-alikes first, so that they never reach the attention or GEMM rules (vLLM's
   reshape_and_cache_flash_kernel writes the KV cache; quantise / dequantise kernels, category
   "quantize": FlashInfer's name flashinfer, fbgemm's FP8 ones name fp8 inside fbgemm_gpu);
2. attention backward pre/post-processing kernels (FlashAttnBwdPreprocess, ConvertdQ,
   flash_bwd_dot_do_o, ...): attention, but no matrix multiply, so never tensor cores;
3. fused attention, most specific family first (PyTorch flash before the flash-attn package,
   whose bare flash_fwd_kernel is a substring of PyTorch's; the split-KV combine kernel before
   the split-KV kernel; CK's FmhaBatchPrefillWithPagedKVCacheKernel before FlashInfer's
   BatchPrefillWithPagedKVCacheKernel; reduce / merge kernels before their family): cuDNN,
   TensorRT-LLM (fmha, xqa, mmha), FA4 (CuTe DSL), CK and aiter (ROCm; then any fmha_fwd /
   fmha_bwd / FmhaFwd / FmhaBwd name by its family, whatever its namespace), vLLM / ROCm paged
   attention (paged_attention_v1/v2, paged_attention_ll4mi_*), FlashInfer prefill / decode / MLA,
   SageAttention, vLLM's Triton unified attention, Triton / flex / inductor attention. A name
   is the fallback: a kernel launched by an attention op is attention by provenance
   (attnprof.analysis.attribution.provenance) whatever its name;
4. communication: NCCL / RCCL / MSCCL, NVSHMEM and DeepEP-style expert-parallel dispatch /
   combine, multimem and custom all-reduce kernels;
5. Triton kernels (tensor-core use unknown from the name: null, never a guess);
6. convolutions, before the GEMMs (forward convolutions are often "implicit_gemm", MIOpen's
   igemm_*_gtcx*, CK's batched_gemm_xdlops_bwd_weight; "convert" is not conv): CUDA-core
   markers (scudnn, ffma, sgemm, winograd, FFT) first, then tensor-op markers (tensorop, xmma,
   s1688 / h884 ...: a tf32 wgrad kernel is tensor-op), then the rest (null);
7. GEMMs with the CUDA-core markers (ffma, gemv, sgemm) before the tensor-core markers, because
   "sm80_xmma_gemm_f32f32_..._ffma_..." contains "xmma" but runs on CUDA cores; fp8 / fp4 / mxfp
   GEMMs (bmm_E4m3..., grouped CUTLASS kernels with float_e4m3_t) are tensor-op GEMMs; a GEMM
   whose name says neither gets tensor_cores null;
8. softmax, norms, mask building, copies, reductions, elementwise;
9. fallback: category "other", family "other", tensor_cores null.

The direction of attention and softmax kernels, the precision in a name and the fallback are
classify.py's (rule 2's pattern is the direction "bwd-aux").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["RULES", "Rule"]


@dataclass(frozen=True)
class Rule:
    category: str
    family: str
    pattern: re.Pattern[str]
    tensor_cores: bool | None
    # real kernel names this rule, and no rule before it, must match (tests/test_classify.py
    # checks every one): the table documents itself
    examples: tuple[str, ...] = ()


def _r(category: str, family: str, regex: str, tensor_cores: bool | None, *examples: str) -> Rule:
    return Rule(category, family, re.compile(regex), tensor_cores, examples)


# convolution names: cuDNN / XMMA / CUTLASS forward (fprop), data-gradient (dgrad) and
# weight-gradient (wgrad) kernels, implicit-GEMM and FFT convolutions
_CONV = (
    r"(wgrad|dgrad|fprop|conv(?!ert)|scudnn|\d{3,5}cudnn|cudnn::(cnn|detail::\w*(grad|conv|engine))|winograd"
    r"|im2col|implicit_?gemm|fft2d|\bfft"
    # MIOpen's implicit-GEMM convolutions (igemm_fwd/bwd/wrw_gtcx*) and CK's convolution
    # backward-weight GEMM (batched_gemm_xdlops_bwd_weight): convolutions that say gemm
    r"|igemm_(fwd|bwd|wrw)_|xdlops_bwd_weight)"
)
# conv(?!ert): "convert" is not a convolution (vLLM's fused_add_rms_norm_kernel names
# vllm::_typeConvert in its template arguments)
# tensor-op markers in a name (MMA instruction shapes, tensorop, xmma, wmma)
_TC = r"(tensorop|s1688|h1688|s16816|h16816|s884|h884|i8816|i16832|s161616|wmma|hmma|xmma|gmma)"

RULES: tuple[Rule, ...] = (
    # 1. look-alikes that are not attention
    _r(
        "copy",
        "vLLM KV-cache write",
        r"reshape_and_cache",
        False,
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16>(...)",
    ),
    # quantise / dequantise kernels are their own category, never a GEMM (fbgemm's FP8 kernels
    # name fp8 and live in the fbgemm_gpu namespace, which contains "gemm"), never attention
    # (FlashInfer's quantize kernels name flashinfer); a name that also says gemm / matmul / mm
    # (a fused quantised GEMM) or attention is left to the rules below
    _r(
        "quantize",
        "quantize / dequantize",
        r"(?i)^(?!.*(?<!fb)gemm|.*matmul|.*bmm|.*scaled_mm|.*attn|.*attention|.*sage_)"
        r"(?=.*(quantiz|dequant|qparam|_to_hfp8|hfp8_to_|fp8rowwise_to|float_to_\w*fp8|fp8\w*_to_float"
        r"|scaled_fp8_quant|per_token\w*quant|quant_\w*kernel|quantize))",
        False,
        "void quantize_kernel<flashinfer::fp8_e4m3, 128>(float const*, unsigned char*)",
        "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, ...)",
        "void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel<float>(unsigned char const*, ...)",
        "void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, "
        "long, long, double)::{lambda(float)#1}, at::detail::Array<char*, 2> >(...)",
        "void vllm::scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(...)",
    ),
    # 2. attention backward helpers that do no matrix multiply (before the families, whose
    #    patterns they also match): never tensor cores
    _r(
        "attention",
        "attention backward pre/post-processing",
        r"(?i)FlashAttnBwd(Pre|Post)process|ConvertdQ|flash_bwd_(dot_do_o|convert_dq|convert_dkv|clear_dkvaccum)"
        r"|_attn_bwd_preprocess|FmhaBwd(OGradDotO|ConvertQGrad)|bwd_preprocess"
        # aiter's assembly backward helpers: O.dO (odo) before the main kernel, the dQ
        # conversion after it
        r"|fmha_bwd_hd\d+_(odo|dq_convert|dq_shuffle)",
        False,
        "void flash::prepare_varlen_num_blocks<FlashAttnBwdPreprocess<cute::tuple<>>>(...)",
        "void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<cute::tuple<>, 128>>(...)",
        "void flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64>>(Flash_bwd_params)",
        "void pytorch_flash::flash_bwd_convert_dq_kernel<Flash_bwd_kernel_traits<64>>(Flash_bwd_params)",
        "_attn_bwd_preprocess",
        "aiter::fmha_bwd_hd128_odo_bf16",
        "_ZN5aiter30fmha_bwd_hd128_dq_convert_bf16E",
    ),
    # 3. fused attention
    _r(
        "attention",
        "PyTorch flash (FA2)",
        r"pytorch_flash::flash_(fwd|bwd)",
        True,
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64>>(Flash_fwd_params)",
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>(...)",
    ),
    _r(
        "attention",
        "FA3 (Hopper)",
        r"flash::compute_attn_ws|FlashAttn(Fwd|Bwd)Sm\d+|flash::FlashAttn(Fwd|Bwd)",
        True,
        "void flash::compute_attn_ws<Flash_fwd_kernel_traits<128>>(flash::Flash_fwd_params)",
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<...>>>(...)",
    ),
    _r(
        "attention",
        "flash-attn split-KV combine",
        r"flash_fwd_splitkv_combine_kernel",
        False,
        "void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64>, 4, 1, true>(...)",
    ),
    _r(
        "attention",
        "flash-attn (FA2)",
        r"\bflash_(fwd|bwd)\w*_kernel|\bflash_bwd_\w+",
        True,
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>(Flash_fwd_params)",
        "void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<64>>(...)",
    ),
    _r(
        "attention",
        "memory-efficient (cutlass, fp32)",
        r"fmha_cutlass[FB]_f32|AttentionKernel<float|AttentionBackwardKernel<[^>]*float",
        None,
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>::Params)",
        "fmha_cutlassB_f32_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<...>)",
    ),
    _r(
        "attention",
        "memory-efficient (cutlass)",
        r"fmha_cutlass[FB]|PyTorchMemEffAttention|AttentionBackwardKernel",
        True,
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<bf16>::Params)",
        "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(AttentionBackwardKernel<cutlass::arch::Sm80>::Params)",
    ),
    _r(
        "attention",
        "cuDNN SDPA",
        r"cudnn\w*sdpa|sdpa\w*(fprop|bprop)|cudnn_generated_fort_native_sdpa",
        True,
        "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_kernel0_0",
        "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128_kernel0_0",
    ),
    _r(
        "attention",
        "TensorRT-LLM fmha",
        r"fmhaSm\d+|fmha_v2|trtllm\w*fmha|\bxqa_?\w*kernel|masked_multihead_attention"
        r"|tensorrt_llm::kernels::\w*(fmha|xqa|mmha)",
        True,
        "fmhaSm100aKernel_QkvE4m3OBfloat16HQk128HV128SeparateQkvCausalP32VarSeqQ128Kv128",
        "void tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<unsigned short, 128, 4>(...)",
    ),
    _r(
        "attention",
        "FA4 (CuTe DSL)",
        r"(?i)flash_attn\w*cute|FlashAttention(Forward|Backward)Sm\d+|cute\w*flash_(fwd|bwd)",
        True,
        "kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object_at__tensor",
    ),
    # CK before FlashInfer: CK's FmhaBatchPrefillWithPagedKVCacheKernel ends in FlashInfer's name
    _r(
        "attention",
        "CK fmha (ROCm)",
        r"ck_tile::Fmha|ck_tile\w*Fmha|Fmha(Fwd|Bwd|BatchPrefill|Prefill|Decode|SplitKV|Paged|Append)\w*Kernel",
        None,
        "void ck_tile::kentry<ck_tile::FmhaFwdKernel<...>>(...)",
        "_ZN7ck_tile6kentryILi64ELi1ENS_37FmhaBatchPrefillWithPagedKVCacheKernelINS_29BlockFmhaBatchPrefill",
    ),
    _r(
        "attention",
        "aiter attention (ROCm)",
        # the demangled names (aiter::fmha_fwd_...) as well as the mangled ones
        r"(?i)\baiter(::)?\w*(fmha|mha_|_pa_|pa_fwd|paged|attn)|_ZN5aiter\d+(fmha|mha|pa)_",
        None,
        "_ZN5aiter29fmha_fwd_hd128_bf16_causal_rtneE",
        "aiter::fmha_fwd_hd128_bf16_rtz",
        "aiter::fmha_bwd_hd128_bf16_causal_a32_psskddv",
    ),
    # the fmha family by its own name, whatever the namespace says: aiter's and CK's generated
    # forward / backward kernels recorded without (or with another) namespace
    # (fmha_fwd_hd128_bf16_causal_group, fmha_bwd_d128_bf16_batch_...); TensorRT-LLM's fmha_v2
    # and xformers' fmha_cutlass are taken above
    _r(
        "attention",
        "fmha fwd / bwd (ROCm, by family name)",
        r"(?<![A-Za-z])fmha_(fwd|bwd)|Fmha(Fwd|Bwd)",
        None,
        "fmha_fwd_hd128_bf16_causal_group",
        "fmha_bwd_hd128_bf16_causal_br_a32_psskddv_group",
    ),
    _r(
        "attention",
        "paged attention reduce",
        r"(?i)paged_?attention\w*reduce",
        False,
        "void vllm::paged_attention_v2_reduce_kernel<unsigned short, 128, 128, 512>(...)",
        "void paged_attention_ll4mi_reduce_kernel<__hip_bfloat16, 128, 256, 512, 1>(...)",
    ),
    _r(
        "attention",
        "paged attention (vLLM / ROCm)",
        r"(?i)paged_?attention",
        None,
        "void vllm::paged_attention_v1_kernel<unsigned short, unsigned short, 128, 16, 128>(...)",
        "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, 16, 128, 256>(...)",
    ),
    _r(
        "attention",
        "FlashInfer merge states",
        r"(?i)flashinfer\w*::\w*MergeStates|MergeStates\w*Kernel",
        False,
        "void flashinfer::PersistentVariableLengthMergeStatesKernel<8u, 16u, 8u, 4u, __nv_bfloat16>(...)",
    ),
    _r(
        "attention",
        "FlashInfer",
        r"(?i)flashinfer\w*::(\w*prefill|\w*decode|\w*attention|mla::)\w*kernel"
        r"|(Batch|Single)(Prefill|Decode)With\w*KVCache\w*Kernel|BatchMLAPagedAttention",
        None,
        "void flashinfer::BatchPrefillWithPagedKVCacheKernel<...>(...)",
        "void BatchDecodeWithPagedKVCacheKernel<PosEncodingMode::kNone, 2u, 4u>(...)",
    ),
    _r(
        "attention",
        "SageAttention quantisation",
        r"(?i)\bsage_?quant\w*|sageattn\w*quant",
        False,
        "sage_quant_kernel",
    ),
    _r(
        "attention",
        "SageAttention",
        r"(?i)\bsage_?(fwd|bwd|attn)\w*|qk_int\d*_sv_f\d+\w*attn",
        True,
        "sage_fwd",
        "void qk_int_sv_f8_attn_kernel<128u, 64u, 32u>(...)",
    ),
    _r(
        "attention",
        "vLLM Triton unified attention",
        r"kernel_unified_attention_\dd|unified_attention_\dd",
        None,
        "kernel_unified_attention_2d",
        "kernel_unified_attention_3d",
    ),
    _r(
        "attention",
        "Triton attention",
        r"(?i)triton\w*(attn|attention|flex)|_attn_fwd|_attn_bwd|flex_attention|flex_decoding|\battn_fwd",
        None,
        "triton_tem_fused_flex_attention_0",
        "attn_fwd",
        "_attn_bwd",
    ),
    # 4. communication (before the GEMM and copy rules: "all_gather_gemm" is communication
    #    first): NCCL / RCCL / MSCCL, PyTorch's symmetric-memory and vLLM's custom all-reduce,
    #    NVSHMEM and DeepEP-style expert-parallel dispatch / combine, multimem (NVLS) reductions
    _r(
        "communication",
        "NCCL",
        r"(?i)nccl|rccl|msccl",
        None,
        "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    ),
    _r(
        "communication",
        "expert-parallel / NVSHMEM",
        r"(?i)deep_?ep|nvshmem|\bintranode::|\binternode(_ll)?::|notify_(dispatch|combine)",
        None,
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, ...)",
        "void deep_ep::internode_ll::combine<false, 7168>(void*, void*, int*, ...)",
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, ...)",
        "nvshmemi_proxy_kernel",
    ),
    _r(
        "communication",
        "all-reduce / all-gather kernels",
        r"(?i)multimem|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce"
        r"|one_?shot_all|two_?shot_all",
        None,
        "void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 16>(...)",
        "void vllm::cross_device_reduce_1stage<half, 8>(vllm::RankData*, ...)",
    ),
    # 5. Triton
    _r("triton", "Triton", r"^triton_|\btriton\b", None, "triton_poi_fused_add_cos_sin_0"),
    # 6. convolutions, before the GEMMs (a forward convolution's name often says implicit_gemm):
    #    CUDA-core markers first, then tensor-op markers, then the rest (unknown from the name)
    _r(
        "conv",
        "convolution (CUDA cores)",
        r"(?i)"
        + _CONV
        + r".*(ffma|sgemm)|scudnn|convolve_sgemm|cudnn::detail::\w*(wgrad|dgrad)\w*_engine<float"
        r"|winograd(?!.*(tensorop|hmma|884|1688|16816))|fft2d|\bfft_?\w*kernel|cask_cudnn\w*::compute\w*Offsets",
        False,
        "volta_scudnn_128x64_relu_interior_nn_v1",
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(...)",
        "void cudnn::detail::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(...)",
        "void fft2d_r2c_32x32<float, false, 1u, false>(float2*, float const*, int, int, ...)",
        "sm80_xmma_fprop_implicit_gemm_indexed_f32f32_f32f32_f32_nhwckrsc_nhwc_ffma_tilesize64x64x8",
        "void cask_cudnn_infer::computeOffsetsKernel<true, false>(cask_cudnn_infer::ComputeOffsetsParams)",
    ),
    _r(
        "conv",
        "convolution (tensor-op)",
        r"(?i)"
        + _CONV
        + r".*"
        + _TC
        + r"|"
        + _TC
        + r".*"
        + _CONV
        + r"|ImplicitGemmConvolution<.*TensorOp|[hsi]\d{3,5}cudnn",
        True,
        "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16",
        "cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_16x4",
        "void cutlass::Kernel<cutlass::conv::kernel::ImplicitGemmConvolution<cutlass::conv::threadblock"
        "::ImplicitGemmMultistage<cutlass::gemm::GemmShape<128, 128, 16>, cutlass::arch::OpClassTensorOp>>>(...)",
        "volta_fp16_s884cudnn_fp16_256x128_ldg8_splitK_relu_f2f_exp_small_nhwc2nchw_tn_v1",
        "sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
    ),
    _r(
        "conv",
        "convolution",
        r"(?i)" + _CONV,
        None,
        "void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float, float, float, true>(...)",
        "void at::native::conv_depthwise2d_forward_kernel<1, float, int>(...)",
    ),
    # 7. GEMMs: CUDA-core markers first ("sm80_xmma_gemm_f32f32_..._ffma_..." contains "xmma"
    #    but runs on CUDA cores), then low-precision (fp8 / fp4) GEMMs, then tensor-op markers
    _r(
        "gemm",
        "cuBLAS xmma FFMA (CUDA cores)",
        r"gemm\w*_ffma_|_ffma_\w*gemm|xmma\w*ffma",
        False,
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma_aligna4",
    ),
    _r(
        "gemm",
        "cuBLAS gemv",
        r"gemv|gemmSN_|\bgemmk1_kernel|gemmStridedBatched\w*SN",
        False,
        "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false>(...)",
    ),
    _r("gemm", "cuBLAS sgemm", r"sgemm|\bdgemm|zgemm|cgemm", False, "ampere_sgemm_128x64_tn"),
    _r(
        "gemm",
        "FP8 / FP4 GEMM (tensor cores)",
        # lookaheads, not "\w*.*": nested quantifiers backtrack quadratically on 2000-character
        # mangled CK names
        r"(?i)(bmm|(?<!fb)gemm|matmul|grouped|moe|device_kernel)(?=.*(e4m3|e5m2|e2m1|mxfp[468]|nvfp4|fp8|fp4))"
        r"|(e4m3|e5m2|e2m1|mxfp[468]|nvfp4)(?=.*(bmm|gemm|matmul))",
        True,
        "bmm_E4m3_E4m3E4m3_Fp32_t128x128x128u2_s6_et64x32_m64x32x32_cga1x1x1_16dp256b_TN_transOut_schedS",
        "bmm_Bfloat16_E2m1E2m1_Fp32_t128x8x512u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_schedS_sm100f",
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<"
        "cute::tuple<int, int, int>>, cutlass::float_e4m3_t, ...>>(...)",
    ),
    _r("gemm", "cuBLASLt nvjet", r"nvjet_", True, "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNN"),
    _r(
        "gemm",
        "Hopper xmma (wgmma)",
        r"sm90_xmma|sm100_xmma|wgmma|gmma|warpgroup",
        True,
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_kernel",
    ),
    _r(
        "gemm",
        "CUTLASS tensor-op",
        r"cutlass\w*(tensorop|wmma|sm90|sm100)|cutlass_\d+_\w*(s16816|h16816|s1688|h1688|s161616|i8816)",
        True,
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(...)",
    ),
    _r(
        "gemm",
        "cuBLAS tensor-op",
        r"s16816|h16816|s1688|h1688|h884|s884|i8816|i16832|s161616|wmma|tensorop|xmma_gemm|\bxmma",
        True,
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
        "volta_h884gemm_64x64_ldg8_nn",
    ),
    _r(
        "gemm",
        "hipBLASLt (matrix cores)",
        r"Cijk_\w*_MI\d+x",
        True,
        "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB0_APM1",
    ),
    _r("gemm", "hipBLASLt", r"Cijk_", None, "Cijk_Ailk_Bljk_SB_MT64x32x8_SN_1LDSB0_APM1_ABV0"),
    _r("gemm", "CUTLASS gemm", r"(?i)cutlass\w*gemm", None, "cutlass_gemm_kernel"),
    _r("gemm", "gemm", r"(?i)(?<!fb)gemm(?!_gpu)", None, "my_gemm_kernel"),
    # 8. everything else
    _r(
        "softmax",
        "softmax",
        r"(?i)softmax",
        False,
        "void (anonymous namespace)::softmax_warp_forward<c10::Half, float, float, 8, false, false>(...)",
        "void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, false, false>(...)",
    ),
    _r(
        "norm",
        "norm",
        r"(?i)layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|\bbn_(fw|bw)|welford",
        False,
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(...)",
    ),
    _r(
        "mask",
        "mask building",
        r"triu_tril|tril_indices|triu_indices|masked_fill|masked_scatter",
        False,
        "void at::native::triu_tril_kernel<float, int, false, 2, false>(...)",
    ),
    _r(
        "copy",
        "copy / layout",
        r"(?i)direct_copy|copy_device_to_device|copy_kernel|nchwToNhwc|nhwcToNchw|transpose_?kernel|permute"
        r"|CatArrayBatchedCopy|index_copy|_to_copy",
        False,
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(...)>(...)",
    ),
    _r(
        "reduction",
        "reduction",
        r"reduce_kernel|splitKreduce|(?i:reduction)|\bcub::|topk|TopK|radixSort|sort_kernel|scan_kernel",
        False,
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, MeanOps<float, float>>>(...)",
    ),
    _r(
        "elementwise",
        "elementwise",
        r"(?i)elementwise|functor|_kernel_cuda|index_put|scatter|gather|fill_kernel|index_?select",
        False,
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(...)",
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<float, long, unsigned int, 2, 2, -2>(...)",
    ),
)
