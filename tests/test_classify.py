"""Kernel-name fingerprints (DOMAIN.md section 4) against the ordered rule table."""

from __future__ import annotations

import pytest

from attnprof.analysis.attribution.classify import CATEGORIES, RULES, classify, cpu_category, precision_of

CASES = [
    # name, category, family substring, tensor_cores, precision
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
        "false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, "
        "false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
        "attention",
        "PyTorch flash",
        True,
        "bf16",
    ),
    (
        "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t, "
        "Flash_kernel_traits<128, 64, 128, 4, cutlass::half_t> >, false, false>(Flash_fwd_params)",
        "attention",
        "flash-attn",
        True,
        "fp16",
    ),
    (
        "void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64>, 4, 1, true>(Flash_fwd_params)",
        "attention",
        "combine",
        False,
        None,
    ),
    (
        "void flash::compute_attn_ws<Flash_fwd_kernel_traits<128>>(flash::Flash_fwd_params)",
        "attention",
        "FA3",
        True,
        None,
    ),
    (
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t>::Params)",
        "attention",
        "memory-efficient",
        True,
        "bf16",
    ),
    (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80>::Params)",
        "attention",
        "memory-efficient",
        None,
        "fp32",
    ),
    (
        "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0",
        "attention",
        "cuDNN",
        True,
        "fp16",
    ),
    (
        "fmhaSm100aKernel_QkvE4m3OBfloat16HQk128HV128SeparateQkvCausalP32VarSeqQ128Kv128PersistentContext",
        "attention",
        "TensorRT-LLM",
        True,
        "fp8",  # q, k, v in e4m3 (the output in bf16): the inputs' precision is the one named
    ),
    # look-alikes are not attention
    (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)",
        "copy",
        "vLLM",
        False,
        "bf16",
    ),
    (
        "void quantize_kernel<flashinfer::fp8_e4m3, 128>(float const*, unsigned char*)",
        "quantize",
        "quantize",
        False,
        "fp8",
    ),
    # quantise / dequantise is its own category, never a GEMM, even inside fbgemm_gpu
    (
        "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, int)",
        "quantize",
        "quantize",
        False,
        "fp8",
    ),
    # serving and ROCm attention families
    (
        "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, __hip_bfloat16, 16, 128, 256, 1>(...)",
        "attention",
        "paged attention",
        None,
        "bf16",
    ),
    ("kernel_unified_attention_3d", "attention", "unified attention", None, None),
    ("sage_quant_kernel", "attention", "SageAttention", False, None),
    (
        "void ck_tile::kentry<64, 1, ck_tile::FmhaBatchPrefillWithPagedKVCacheKernel<ck_tile::BlockFmha>>(...)",
        "attention",
        "CK fmha",
        None,
        None,
    ),
    (
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<2u, 4u, 8u, 16u, __nv_bfloat16>(...)",
        "attention",
        "FlashInfer",
        None,
        "bf16",
    ),
    # a matrix unit's dtype in a conversion's name is not a convolution
    (
        "std::enable_if<(vllm::_typeConvert<c10::BFloat16>::exists), void>::type "
        "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, int)",
        "norm",
        "norm",
        False,
        "bf16",
    ),
    (
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2",
        "conv",
        "convolution",
        None,
        "bf16",
    ),
    # GEMMs
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "gemm",
        "FFMA",
        False,
        "fp32",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2>(cutlass_80_tensorop_bf16_s16816gemm_bf16_256x128_64x3_tn_align2::Params)",
        "gemm",
        "CUTLASS tensor-op",
        True,
        "bf16",
    ),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn", "gemm", "tensor-op", True, "bf16"),
    ("ampere_sgemm_128x64_tn", "gemm", "sgemm", False, "fp32"),
    ("volta_sgemm_64x64_nt", "gemm", "sgemm", False, "fp32"),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "gemm",
        "Hopper",
        True,
        "bf16",
    ),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNN", "gemm", "nvjet", True, None),
    (
        "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false>(...)",
        "gemm",
        "gemv",
        False,
        "fp32",
    ),
    (
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __half, __half, __half, float>(...)",
        "gemm",
        "gemv",
        False,
        "fp16",
    ),
    ("cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4", "gemm", "tensor-op", True, "tf32"),
    # Triton: tensor-core use unknown from the name
    ("triton_poi_fused_add_cos_sin_0", "triton", "Triton", None, None),
    ("triton_tem_fused_flex_attention_0", "attention", "Triton attention", None, None),
    # the rest
    (
        "void (anonymous namespace)::softmax_warp_forward<c10::Half, float, float, 8, false, false>(...)",
        "softmax",
        "softmax",
        False,
        "fp16",
    ),
    ("void at::native::triu_tril_kernel<float, int, false, 2, false>(...)", "mask", "mask", False, "fp32"),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(...)",
        "norm",
        "norm",
        False,
        "bf16",
    ),
    (
        "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "communication",
        "NCCL",
        None,
        None,
    ),
    (
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>(...)",
        "copy",
        "copy",
        False,
        None,
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float> > >(...)",
        "reduction",
        "reduction",
        False,
        "fp32",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(...)",
        "elementwise",
        "elementwise",
        False,
        "bf16",
    ),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "conv", "convolution", False, "fp32"),
    ("some_kernel_nobody_knows", "other", "other", None, None),
]


@pytest.mark.parametrize(("name", "category", "family", "tc", "precision"), CASES, ids=lambda v: str(v)[:40])
def test_fingerprint(name: str, category: str, family: str, tc: bool | None, precision: str | None) -> None:
    c = classify(name)
    assert c.category == category
    assert family.lower() in c.family.lower()
    assert c.tensor_cores is tc
    assert c.precision == precision


def test_rule_table_is_data_with_known_categories() -> None:
    assert all(r.category in CATEGORIES for r in RULES)
    # the CUDA-core FFMA rule must come before the tensor-core xmma rules: order is the definition
    ffma = next(i for i, r in enumerate(RULES) if "FFMA" in r.family)
    xmma = next(i for i, r in enumerate(RULES) if r.pattern.search("sm80_xmma_gemm_f16f16"))
    assert ffma < xmma


def test_bf16_is_not_mistaken_for_fp16() -> None:
    assert precision_of("cutlass_80_tensorop_bf16_s16816gemm_bf16") == "bf16"
    assert precision_of("ampere_fp16_s16816gemm_fp16_64x64") == "fp16"


def test_short_names_drop_void_parameters_and_namespaces() -> None:
    from attnprof.units import short_name

    assert short_name(
        "void at::native::(anonymous namespace)::softmax_warp_forward<float, float>(float*, int)"
    ) == ("softmax_warp_forward<float, float>")
    assert short_name("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::Params)") == (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80"
    )
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    long = short_name(
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128>, "
        + "false, " * 20
        + "true>(p)"
    )
    assert len(long) <= 60 and long.startswith("pytorch_flash::flash_fwd_kernel<")


_EXAMPLES = [(i, r.family, e) for i, r in enumerate(RULES) for e in r.examples]


def test_every_rule_has_an_example() -> None:
    assert all(r.examples for r in RULES)


@pytest.mark.parametrize(("index", "family", "name"), _EXAMPLES, ids=lambda v: str(v)[:40])
def test_rule_example_is_decided_by_its_own_rule(index: int, family: str, name: str) -> None:
    """One test per rule (per example): the rule matches, and no rule before it does."""
    rule = RULES[index]
    assert rule.pattern.search(name)
    earlier = [r.family for r in RULES[:index] if r.pattern.search(name)]
    assert earlier == [], f"{name[:60]} is taken by an earlier rule: {earlier}"
    c = classify(name)
    assert (c.category, c.family, c.tensor_cores) == (rule.category, rule.family, rule.tensor_cores)


@pytest.mark.parametrize(
    ("name", "category", "tc", "precision"),
    [
        # tf32 tensor-op convolutions are tensor cores (a wgrad / dgrad rule used to say no)
        ("sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "conv", True, "tf32"),
        ("cutlass_tensorop_s1688dgrad_optimized_tf32_128x128_16x4", "conv", True, "tf32"),
        ("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "conv", True, "bf16"),
        # a forward convolution is a convolution, not a GEMM
        (
            "sm86_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
            "conv",
            True,
            "fp16",
        ),
        ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "conv", False, "fp32"),
        # fp8 / fp4 grouped MoE GEMMs are GEMMs on tensor cores with their precision
        (
            "bmm_E4m3_E4m3E4m3_Fp32_t128x128x128u2_s6_et64x32_m64x32x32_cga1x1x1_16dp256b_TN",
            "gemm",
            True,
            "fp8",
        ),
        (
            "bmm_Bfloat16_E2m1E2m1_Fp32_t128x8x512u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN",
            "gemm",
            True,
            "fp4",
        ),
        # expert-parallel and multimem communication
        ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(...)", "communication", None, "bf16"),
        ("void multimem_all_reduce_kernel<c10::BFloat16>(...)", "communication", None, "bf16"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_classes_of_misclassification_stay_fixed(
    name: str, category: str, tc: bool | None, precision: str
) -> None:
    c = classify(name)
    assert (c.category, c.tensor_cores, c.precision) == (category, tc, precision)


@pytest.mark.parametrize(
    ("name", "direction", "tc"),
    [
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>(Flash_fwd_params)", "fwd", True),
        (
            "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<T>(Flash_bwd_params)",
            "bwd",
            True,
        ),
        ("void pytorch_flash::flash_bwd_dot_do_o_kernel<true, T>(Flash_bwd_params)", "bwd-aux", False),
        ("void pytorch_flash::flash_bwd_convert_dq_kernel<T>(Flash_bwd_params)", "bwd-aux", False),
        ("void flash_fwd_splitkv_kernel<T, false, false>(Flash_fwd_params)", "fwd", True),
        ("void flash_bwd_dq_dk_dv_loop_kernel<T>(Flash_bwd_params)", "bwd", True),
        ("void cutlass::device_kernel<flash::FlashAttnFwdSm90<T>>(Params)", "fwd", True),
        ("void cutlass::device_kernel<flash::FlashAttnBwdSm90<T>>(Params)", "bwd", True),
        ("void cutlass::device_kernel<flash::FlashAttnBwdPreprocess<T>>(Params)", "bwd-aux", False),
        ("void cutlass::device_kernel<flash::FlashAttnBwdPostprocessConvertdQ<T>>(Params)", "bwd-aux", False),
        (
            "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<T>::Params)",
            "fwd",
            True,
        ),
        (
            "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<T>)",
            "bwd",
            True,
        ),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x128x128", "fwd", True),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_3_64x128x128", "bwd", True),
        ("fmhaSm100aKernel_QkvBfloat16OBfloat16HQk128HV128SeparateQkvCausal", "fwd", True),
        ("triton_tem_fused_flex_attention_0", "fwd", None),
        ("triton_tem_fused_flex_attention_backward_0", "bwd", None),
        ("_attn_bwd_preprocess", "bwd-aux", False),
        ("void ck_tile::kentry<ck_tile::FmhaBwdDQDKDVKernel<T>>(...)", "bwd", None),
        # aiter's assembly fmha (issue 28: 17.6% of an MI300X run's device time was "other")
        ("aiter::fmha_fwd_hd128_bf16_rtz", "fwd", None),
        ("aiter::fmha_bwd_hd128_bf16_causal_a16_psskddv", "bwd", None),
        ("aiter::fmha_bwd_hd128_odo_bf16", "bwd-aux", False),
        ("aiter::fmha_bwd_hd128_dq_convert_bf16", "bwd-aux", False),
        ("fmha_fwd_hd128_bf16_causal_group", "fwd", None),
        (
            "void ck_tile::kentry<64, 1, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVS<T>>>(...)",
            "fwd",
            None,
        ),
        (
            "void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>(...)",
            "fwd",
            False,
        ),
        (
            "void (anonymous namespace)::softmax_warp_backward<float, float, float, 8, false, false>(...)",
            "bwd",
            False,
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float>(...)",
            "bwd",
            False,
        ),
    ],
    ids=lambda v: str(v)[:40],
)
def test_attention_direction_for_every_family(name: str, direction: str, tc: bool | None) -> None:
    c = classify(name)
    assert c.category in ("attention", "softmax")
    assert c.direction == direction
    assert c.tensor_cores is tc


@pytest.mark.parametrize(
    "name",
    [
        # aiter's own non-attention kernels stay where their names put them
        "aiter::rmsnorm2d_fwd_with_add",
        "void aiter::silu_and_mul_kernel<c10::BFloat16>(...)",
        # "fmha" only as part of another word, or TensorRT-LLM's / xformers' own families
        "my_nofmha_fwd_scale_kernel",
    ],
)
def test_fmha_family_rule_leaves_other_names_alone(name: str) -> None:
    assert classify(name).family != "fmha fwd / bwd (ROCm, by family name)"
    assert classify(name).family != "aiter attention (ROCm)"


def test_other_categories_have_no_direction() -> None:
    assert classify("ampere_sgemm_128x64_tn").direction is None


# -- a CPU op's name, read by its structure (analysis/attribution/cpu_groups.py, the one home) ---


@pytest.mark.parametrize(
    ("name", "group"),
    [
        # its name holds "fill_", but it is flashinfer's attention, not a mask
        ("flashinfer::batch_prefill_with_paged_kv_cache", "attention"),
        ("flashinfer::batch_decode_with_paged_kv_cache", "attention"),
        ("flash_attn::_flash_attn_forward", "attention"),
        ("aten::einsum", "gemm"),  # a GEMM to the CPU-op analysis: the lanes agree now
        ("aten::upsample_bilinear2d", "other"),  # holds "linear", is no GEMM
        ("aten::masked_fill_", "mask"),
        ("aten::fill_.Scalar", "mask"),
        ("aten::bmm", "gemm"),
        ("aten::mm", "gemm"),
        ("aten::copy_", "copy"),
        ("aten::_softmax_backward_data", "softmax"),
        ("aten::native_layer_norm", "norm"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("nn.Module: Linear_0", "other"),
    ],
)
def test_a_cpu_ops_group_by_its_namespace_and_op(name: str, group: str) -> None:
    assert cpu_category(name) == group


def test_the_cpu_op_analysis_and_the_lanes_agree_on_gemms_and_masks() -> None:
    """cpu_ops.py (unfused chains, mask rebuilt each call) and model_share.py read the same GEMMs
    and mask builders as the lanes: the one home's, each of them in its lane."""
    from attnprof.analysis.attribution import cpu_ops
    from attnprof.analysis.attribution.cpu_groups import GEMM_OPS, MASK_BUILDERS
    from attnprof.analysis.breakdown import model_share

    assert cpu_ops._GEMM_OPS is GEMM_OPS and model_share._GEMM_OPS is GEMM_OPS
    assert cpu_ops._MASK_OPS is MASK_BUILDERS
    assert {cpu_category(n) for n in GEMM_OPS} == {"gemm"}
    assert {cpu_category(n) for n in MASK_BUILDERS} == {"mask"}
