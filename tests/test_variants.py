"""The variant registry: names, capability reasons, user variants, compiled twins."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnprof.errors import UserError
from attnprof.variants.registry import check, get_variant, list_variants, resolve_variants, variant_names
from attnprof.workload import Workload

CPU = Workload(batch=1, heads=2, seq=32, head_dim=16)


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(UserError) as info:
        get_variant("nope")
    for name in ("naive", "naive-inplace", "sdpa-math", "sdpa-flash", "flex", "hub-flash"):
        assert name in str(info.value)


def test_cuda_only_variants_give_specific_reasons_on_cpu() -> None:
    reasons = {v.name: d.reason for v, d in list_variants(CPU) if not d.accepted}
    assert set(reasons) == {"sdpa-efficient", "sdpa-cudnn", "hub-flash"}
    assert "CUDA only" in (reasons["sdpa-efficient"] or "")
    assert "CUDA only" in (reasons["sdpa-cudnn"] or "")
    assert "CUDA" in (reasons["hub-flash"] or "")
    for reason in reasons.values():
        assert "No viable backend" not in (reason or "")


def test_cpu_runs_math_flash_naive() -> None:
    ok = {v.name for v, d in list_variants(CPU) if d.accepted}
    assert {"naive", "naive-inplace", "sdpa", "sdpa-math", "sdpa-flash"} <= ok


# issue 31 item 4: the same probes on CUDA (docs/run.md, "The GPU-marked tests")
@pytest.mark.gpu
def test_gpu_fused_backends_probe_runnable_at_bf16_and_a_refusal_carries_pytorchs_reason() -> None:
    import torch

    bf16 = Workload(batch=1, heads=2, seq=128, head_dim=64, dtype="bf16", device="cuda")
    decisions = {v.name: d for v, d in list_variants(bf16)}
    major, _ = torch.cuda.get_device_capability()
    runnable = {"naive", "naive-inplace", "sdpa", "sdpa-math", "sdpa-efficient"}
    if major >= 8:  # flash and cuDNN need sm80 (the capability check says so below it)
        runnable |= {"sdpa-flash", "sdpa-cudnn"}
    for name in sorted(runnable):
        assert decisions[name].accepted, (name, decisions[name].reason)
    # fp32: cuDNN is refused by PyTorch's own check, and its words (not a generic line) are the reason
    cudnn = check(get_variant("sdpa-cudnn"), bf16.replace(dtype="fp32"))
    assert not cudnn.accepted and cudnn.reason_code is not None
    assert cudnn.reason_code.code == "said", cudnn.reason_code
    why = cudnn.reason or ""
    assert ("dtype" in why.lower() or "float" in why.lower()) and "No viable backend" not in why, why


def test_memory_estimates_separate_materialising_from_fused() -> None:
    big = Workload(batch=1, heads=8, seq=4096, head_dim=64)
    naive = get_variant("naive").estimate_bytes(big)
    inplace = get_variant("naive-inplace").estimate_bytes(big)
    flash = get_variant("sdpa-flash").estimate_bytes(big)
    score = big.score_bytes()  # 512 MiB in fp32
    assert naive >= 3 * score > inplace >= 2 * score
    assert flash < score / 10
    # the math backend holds fp32 scores even for bf16 inputs
    bf = big.replace(dtype="bf16")
    assert get_variant("sdpa-math").estimate_bytes(bf) >= 4 * bf.score_bytes(4)


def test_compile_twins(tmp_path: Path) -> None:
    chosen = resolve_variants(["naive", "sdpa-flash", "flex"], compile=True)
    labels = [v.label for v in chosen]
    assert labels == ["naive", "sdpa-flash", "flex", "naive:compile", "sdpa-flash:compile"]
    assert get_variant("naive:compile").mode == "compile"
    with pytest.raises(UserError):
        get_variant("flex:compile")


def test_user_variant_from_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.py"
    f.write_text(
        "import torch.nn.functional as F\n"
        "def my_attention(q, k, v, *, is_causal, scale):\n"
        "    '''SDPA through my own wrapper.'''\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)\n"
    )
    v = get_variant(f"{f}:my_attention")
    assert v.name == "my_attention" and v.description == "SDPA through my own wrapper."
    assert check(v, CPU).accepted
    with pytest.raises(UserError, match="no callable"):
        get_variant(f"{f}:missing")
    with pytest.raises(UserError, match="does not exist"):
        get_variant(f"{tmp_path / 'absent.py'}:f")


def test_names_are_a_closed_set() -> None:
    assert variant_names() == [
        "naive",
        "naive-inplace",
        "sdpa",
        "sdpa-math",
        "sdpa-flash",
        "sdpa-efficient",
        "sdpa-cudnn",
        "flex",
        "hub-flash",
    ]


@pytest.mark.gpu
def test_cuda_reasons_come_from_pytorch() -> None:
    fp32 = Workload(batch=1, heads=2, seq=64, head_dim=64, dtype="fp32", device="cuda")
    d = check(get_variant("sdpa-flash"), fp32)
    assert not d.accepted and "fp16 or bf16" in (d.reason or "")
    ok = check(get_variant("sdpa-flash"), fp32.replace(dtype="bf16"))
    assert ok.accepted or "compute capability" in (ok.reason or "")


def test_hub_flash_says_what_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    from attnprof.variants import hub

    if importlib.util.find_spec("kernels") is None:
        assert "pip install 'attnprof[hub]'" in (hub._missing_reason() or "")
    else:
        monkeypatch.setenv("ATTNPROF_HUB_KERNEL", str(tmp_path / "absent"))
        assert "does not exist" in (hub._missing_reason() or "")
        monkeypatch.delenv("ATTNPROF_HUB_KERNEL")
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.delenv("LOCAL_KERNELS", raising=False)
        assert "LOCAL_KERNELS" in (hub._missing_reason() or "")
    # on CPU the device comes first, whatever is installed
    assert "CUDA only" in (check(get_variant("hub-flash"), CPU).reason or "")


# the CUDA paths of issue 21 (their CPU mechanisms: tests/test_sdpa_dispatch.py, test_compile_limit.py);
# here so that ../shared/checks/gpu/gpu_check.sh's GPU-tests step runs them
@pytest.mark.gpu
def test_gpu_efficient_and_cudnn_take_a_dense_mask() -> None:
    from attnprof.variants import sdpa

    w = Workload(batch=2, heads=8, seq=512, head_dim=64, dtype="bf16", device="cuda", mask="sliding=128")
    assert sdpa._cuda_reason("efficient", w) is None
    assert sdpa.pytorch_choice(w) != "math"
    reason = sdpa._cuda_reason("flash", w)
    assert reason is not None and "attn_mask" in reason  # PyTorch's own words, from stderr


@pytest.mark.gpu
def test_gpu_causal_bias_decode_runs_flash_with_causal_flops() -> None:
    import torch

    from attnprof.variants import sdpa

    w = Workload(
        batch=2, heads=8, seq=4, kv_seq=1024, head_dim=64, dtype="bf16", device="cuda", phase="decode"
    )
    assert sdpa.lower_right_path(w) == "flash"
    assert sdpa.pytorch_choice(w) == "flash"
    built = get_variant("sdpa").build(w, w.make_inputs())
    assert built.flops_executed is None  # the visible pairs, not the dense square
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        built.call()
        torch.cuda.synchronize()
    assert "aten::_scaled_dot_product_flash_attention" in {e.name for e in prof.events()}


@pytest.mark.gpu
def test_gpu_flex_needs_a_c_compiler_for_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    from attnprof.variants.flex import compiler_problem

    w = Workload(batch=1, heads=2, seq=64, head_dim=16, dtype="bf16", device="cuda")
    assert compiler_problem(w) is None
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert compiler_problem(w) == "needs_cc"


@pytest.mark.gpu
def test_gpu_plain_sdpa_runs_a_fused_backend_and_blog_cuda_names_it(tmp_path: Path) -> None:
    """Issue 32: on a CUDA 13 build with a recent cuDNN, PyTorch may prefer cuDNN over flash for
    plain `sdpa` on sm90. Whichever fused backend it picks, run.json records the one that ran
    (from the aten op under the forward), blog-cuda's `backend` check accepts flash, cuDNN and
    efficient and says which, and it is one attention kernel per forward."""
    from attnprof.compare.expect import check_expectations
    from attnprof.harness.run import RunOptions, run

    w = Workload(batch=2, heads=8, seq=1024, head_dim=64, dtype="bf16", device="cuda")
    record = run(
        w, ["sdpa", "sdpa-flash"], out=tmp_path / "r", options=RunOptions(time_budget_s=0.1, min_samples=5)
    )
    sdpa = next(r for r in record.results if r.label == "sdpa")
    assert sdpa.status == "ok" and sdpa.backend in {"flash", "cudnn", "efficient"}, (
        sdpa.backend,
        sdpa.reason,
    )
    print(f"sdpa ran {sdpa.backend}; PyTorch's dispatch picks {sdpa.pytorch_choice}")
    results = {(r.row, r.check): r for r in check_expectations(tmp_path / "r", "blog-cuda")}
    backend = results[("sdpa", "backend")]
    assert (backend.status, backend.observed) == ("met", sdpa.backend)
    assert results[("sdpa", "attention_kernels_per_forward")].status == "met"
    assert results[("sdpa", "gpu_ops_per_forward")].status == "info"  # the blog's 1: shown, not enforced
