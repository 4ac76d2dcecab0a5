"""Live runs of the harness on CPU at tiny shapes: traces, timing, accuracy, memory, refusals."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from attnprof.errors import UserError
from attnprof.harness.run import RunOptions, run, run_variant
from attnprof.harness.timing import summarize
from attnprof.records import decode_run
from attnprof.workload import Workload

TINY = Workload(batch=1, heads=2, seq=64, head_dim=16)
FAST = RunOptions(time_budget_s=0.05, min_samples=5)


def _events(path: Path) -> list[dict]:  # type: ignore[type-arg]
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    return data["traceEvents"] if isinstance(data, dict) else data


def _ops_inside_attn_fwd(events: list[dict]) -> tuple[int, list[str]]:  # type: ignore[type-arg]
    ann = [
        e
        for e in events
        if e.get("name") == "attn_fwd" and e.get("ph") == "X" and e.get("cat") == "user_annotation"
    ]
    inside = [
        e["name"]
        for e in events
        if e.get("cat") == "cpu_op" and any(a["ts"] <= e["ts"] <= a["ts"] + a["dur"] for a in ann)
    ]
    return len(ann), inside


def test_every_cpu_variant_runs_and_is_recorded(cpu_run) -> None:  # type: ignore[no-untyped-def]
    out, record = cpu_run
    status = {r.label: r.status for r in record.results}
    assert status == {
        "naive": "ok",
        "naive-inplace": "ok",
        "sdpa": "ok",
        "sdpa-math": "ok",
        "sdpa-flash": "ok",
        "sdpa-efficient": "unsupported",
        "sdpa-cudnn": "unsupported",
        "flex": "ok",
        "hub-flash": "unsupported",
    }
    on_disk = decode_run((out / "run.json").read_bytes())
    assert on_disk.schema == "attnprof.run/1"
    assert [r.label for r in on_disk.results] == [r.label for r in record.results]
    assert on_disk.environment.torch_version.startswith("2.")
    assert on_disk.environment.peak_tflops and on_disk.environment.peak_tflops > 0
    for r in on_disk.results:
        if r.status != "ok":
            continue
        assert r.timing is not None and r.timing.n >= 5 and len(r.timing.samples_ms) == r.timing.n
        assert r.timing.median_ms > 0 and r.timing.threads >= 1
        assert r.accuracy is not None and r.accuracy.ok, (r.label, r.accuracy)
        assert r.tflops_useful and r.tflops_useful > 0
        assert r.trace and (out / r.trace).exists() and r.table and (out / r.table).exists()


def test_traces_hold_attn_fwd_for_active_steps_and_the_naive_copy(cpu_run) -> None:  # type: ignore[no-untyped-def]
    out, _ = cpu_run
    n, naive = _ops_inside_attn_fwd(_events(out / "traces" / "1_2_64_16_naive_eager.json.gz"))
    assert n == 3
    assert "aten::clone" in naive
    n, inplace = _ops_inside_attn_fwd(_events(out / "traces" / "1_2_64_16_naive-inplace_eager.json.gz"))
    assert n == 3
    assert "aten::clone" not in inplace and "aten::masked_fill_" in inplace


def test_backend_that_ran_is_recorded(cpu_run) -> None:  # type: ignore[no-untyped-def]
    _, record = cpu_run
    backend = {r.label: r.backend for r in record.results}
    assert backend["sdpa-math"] == "math"
    assert backend["sdpa-flash"] == "flash"
    assert backend["sdpa"] == "flash"  # PyTorch's own CPU choice for fp32 (DOMAIN.md section 2)
    flash_ops = {r.label: r.profile.top_ops for r in record.results if r.profile}["sdpa-flash"]
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in flash_ops


def test_tables_are_sorted_key_averages(cpu_run) -> None:  # type: ignore[no-untyped-def]
    out, _ = cpu_run
    text = (out / "tables" / "1_2_64_16_sdpa-math_eager.txt").read_text()
    assert "Self CPU" in text and "aten::_safe_softmax" in text


def test_cpu_peak_memory_separates_materialising_from_fused(tmp_path: Path) -> None:
    w = Workload(batch=1, heads=4, seq=512, head_dim=32)
    rec = run(w, ["naive", "sdpa-flash"], out=tmp_path / "r", options=FAST)
    peak = {r.label: r.memory.peak_bytes for r in rec.results if r.memory}
    score = w.score_bytes()  # 4 MiB
    assert peak["naive"] is not None and peak["naive"] >= 2 * score
    assert peak["sdpa-flash"] is not None and peak["sdpa-flash"] < score
    assert "profiler" in rec.results[0].memory.method  # type: ignore[union-attr]


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_accuracy_bounds_per_dtype(dtype: str) -> None:
    w = TINY.replace(dtype=dtype)
    res = run_variant(w, "sdpa-math", options=RunOptions(profile=False, time_budget_s=0.02, min_samples=3))
    assert res.status == "ok" and res.accuracy is not None
    bound = {"fp32": 1e-5, "bf16": 5e-2, "fp16": 1e-2}[dtype]
    assert res.accuracy.max_abs_err <= bound
    assert res.accuracy.nan_count == 0 and res.accuracy.ok


def test_memory_refusal_names_the_estimate() -> None:
    huge = Workload(batch=1, heads=8, seq=65536, head_dim=64)
    res = run_variant(huge, "naive", options=FAST)
    assert res.status == "refused"
    assert "GiB" in (res.reason or "") and "--force" in (res.reason or "")
    assert res.estimate_bytes >= 3 * huge.score_bytes()


# issue 31 item 4: the same gate on CUDA, against the GPU's free memory (docs/run.md, "The
# GPU-marked tests"); its parts on CPU: tests/test_cuda_paths.py, test_memory_honesty.py
@pytest.mark.gpu
def test_gpu_memory_gate_refuses_past_the_free_memory_before_building_anything() -> None:
    import torch

    from attnprof.harness.memory import available_bytes
    from attnprof.variants.registry import get_variant

    w = Workload(batch=1, heads=8, seq=131072, head_dim=64, dtype="bf16", device="cuda")
    free, _ = torch.cuda.mem_get_info()
    assert get_variant("naive").estimate_bytes(w) > free  # three 256 GiB score tensors
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    res = run_variant(w, "naive", options=FAST)
    assert res.status == "refused", (res.status, res.reason)
    assert "GiB" in (res.reason or "") and "--force" in (res.reason or "")
    why = res.reason_code
    assert why is not None and why.code == "memory" and why.args["device"] == "cuda", why
    assert int(why.args["need_bytes"]) > int(why.args["free_bytes"])
    assert abs(int(why.args["free_bytes"]) - available_bytes("cuda")) < 2**30
    assert "memory.flush" in {p.code for p in why.parts}  # the L2 flush buffer is counted on CUDA
    # refused before launching: not even the inputs (384 MiB of q, k, v) were allocated
    assert torch.cuda.max_memory_allocated() - base < 64 * 2**20


def test_failing_variant_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    f = tmp_path / "broken.py"
    f.write_text(
        "def broken(q, k, v, *, is_causal, scale):\n    raise RuntimeError('shape mismatch in my kernel')\n"
    )
    rec = run(TINY, [f"{f}:broken", "naive-inplace"], out=tmp_path / "r", options=FAST)
    broken, ok = rec.results
    assert broken.status == "error" and "shape mismatch in my kernel" in (broken.reason or "")
    assert ok.status == "ok"


_ASSERTS = (
    "import os\n"
    "import torch\n"
    "def asserts(q, k, v, *, is_causal, scale):\n"
    "    with open(os.environ['ATTNPROF_TEST_PIDS'], 'a') as fh:\n"
    "        fh.write(f'{os.getpid()}\\n')\n"
    "    if q.is_cuda:  # a real device-side assert: an index out of bounds in a CUDA kernel\n"
    "        q.flatten()[torch.full((1,), q.numel() * 4, dtype=torch.long, device=q.device)]\n"
    "        torch.cuda.synchronize()\n"
    "    raise RuntimeError('CUDA error: device-side assert triggered')  # its words, on CPU\n"
)


def test_a_sticky_cuda_error_in_a_trial_is_recorded_and_not_rerun_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user variant whose trial run ends in a sticky CUDA error (harness/cuda.py) would poison
    this process's CUDA context if it ran here too, and every later variant would fail with its
    error: it is recorded from the trial, and the variants after it run. On CPU only the error's
    words are sticky; the variant writes its pid, so a second call in this process shows."""
    import os

    f = tmp_path / "uv.py"
    f.write_text(_ASSERTS)
    pids = tmp_path / "pids.txt"
    monkeypatch.setenv("ATTNPROF_TEST_PIDS", str(pids))
    rec = run(TINY, [f"{f}:asserts", "naive-inplace"], out=tmp_path / "r", options=FAST)
    bad, ok = rec.results
    assert bad.status == "error" and "device-side assert" in (bad.reason or ""), bad.reason
    assert "trial" in (bad.reason or "")
    assert ok.status == "ok", ok.reason
    called = pids.read_text().split()
    assert called and str(os.getpid()) not in called  # the trial's process only


@pytest.mark.gpu
def test_gpu_a_device_side_assert_fails_its_variant_alone(tmp_path: Path) -> None:
    """The same with a real device-side assert on CUDA, through the command (its own process, so
    that this one's CUDA context is not the one poisoned): run.json is written, the variant is
    recorded with CUDA's words, and the built-in after it runs and is timed."""
    import os
    import subprocess
    import sys

    (tmp_path / "uv.py").write_text(_ASSERTS)
    env = {**os.environ, "ATTNPROF_TEST_PIDS": str(tmp_path / "pids.txt")}
    p = subprocess.run(
        [sys.executable, "-m", "attnprof", "run", "--device", "cuda", "--shape", "1,2,64,64", "--dtype", "bf16",
         "-v", "uv.py:asserts,naive-inplace", "--no-profile", "--time-budget", "0.05", "-o", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert (tmp_path / "r" / "run.json").exists(), (p.returncode, p.stderr[-3000:])
    results = {r.variant: r for r in decode_run((tmp_path / "r" / "run.json").read_bytes()).results}
    bad, ok = results["asserts"], results["naive-inplace"]
    assert bad.status == "error" and "device-side assert" in (bad.reason or ""), bad.reason
    assert ok.status == "ok" and ok.timing is not None and ok.timing.median_ms > 0, ok.reason
    assert p.returncode == 0, p.stderr[-3000:]


def test_user_variant_from_file_is_profiled(tmp_path: Path) -> None:
    f = tmp_path / "mine.py"
    f.write_text(
        "import torch\n"
        "def mine(q, k, v, *, is_causal, scale):\n"
        "    s = (q @ k.transpose(-2, -1)) * scale\n"
        "    if is_causal:\n"
        "        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float('-inf'))\n"
        "    return s.softmax(-1) @ v\n"
    )
    rec = run(TINY, [f"{f}:mine"], out=tmp_path / "r", options=FAST)
    (res,) = rec.results
    assert res.status == "ok" and res.accuracy and res.accuracy.ok
    assert (tmp_path / "r" / "traces" / "1_2_64_16_mine_eager.json.gz").exists()


def test_earlier_run_directory_is_left_intact(tmp_path: Path) -> None:
    out = tmp_path / "r"
    run(TINY, ["naive-inplace"], out=out, options=FAST)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(UserError, match="already holds an earlier run"):
        run(TINY, ["naive"], out=out, options=FAST)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_gqa_and_unequal_lengths_run_correctly() -> None:
    w = Workload(batch=1, heads=4, kv_heads=2, seq=32, kv_seq=48, head_dim=16)
    for name in ("naive-inplace", "sdpa-math", "sdpa-flash"):
        res = run_variant(w, name, options=RunOptions(profile=False, time_budget_s=0.02, min_samples=3))
        assert res.status == "ok" and res.accuracy and res.accuracy.ok, (name, res.reason, res.accuracy)


# issue 31 item 4: decode dispatch on each device (docs/run.md, "The GPU-marked tests"); its
# mechanism on CPU in detail: tests/test_decode.py, test_sdpa_dispatch.py
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_decode_records_the_backend_that_ran_and_matches_math(device: str) -> None:
    """Four new queries against a 512-token cache (lower-right causal, a CausalBias): plain sdpa
    records the backend that ran (from the aten ops under the profiled forward), which is the
    one PyTorch's dispatch picks; on CUDA a fused kernel that takes the CausalBias without a
    mask, on CPU the materialised mask. Its output matches sdpa-math's on the same inputs."""
    import torch

    from attnprof.variants.registry import get_variant
    from attnprof.variants.sdpa import lower_right_path, pytorch_choice

    cuda = device == "cuda"
    w = Workload(
        batch=2, heads=8, seq=4, kv_seq=512, head_dim=64, dtype="bf16" if cuda else "fp32",
        device=device, phase="decode",
    )  # fmt: skip
    res = run_variant(w, "sdpa", options=FAST)  # profiled: the backend is read from the trace's ops
    assert res.status == "ok" and res.accuracy is not None and res.accuracy.ok, (res.reason, res.accuracy)
    assert res.backend is not None and res.backend == res.pytorch_choice == pytorch_choice(w)
    path = lower_right_path(w)
    if cuda:
        assert path in ("flash", "efficient") and res.backend == path, (path, res.backend)
        assert res.flops_executed == w.flops_executed(False)  # the visible pairs, not the square
    else:
        assert path == "materialised" and res.flops_executed == w.flops_dense()
    inputs = w.make_inputs()
    with torch.no_grad():
        out = get_variant("sdpa").build(w, inputs).call()
        ref = get_variant("sdpa-math").build(w, inputs).call()
    tol = 2e-2 if cuda else 1e-5
    torch.testing.assert_close(out.float(), ref.float(), atol=tol, rtol=tol)


def test_timing_summary_statistics() -> None:
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0], threads=2, method="perf_counter")
    assert s.median_ms == 3.0 and s.iqr_ms == 2.0 and s.n == 5 and s.min_ms == 1.0
    assert s.noisy  # IQR is 67% of the median
    quiet = summarize([10.0, 10.1, 10.0, 9.9, 10.0], threads=1, method="perf_counter")
    assert not quiet.noisy and quiet.samples_ms == [10.0, 10.1, 10.0, 9.9, 10.0]


# issue 31 item 4: the clock each device is timed with (docs/run.md, "The GPU-marked tests")
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_clean_timing_names_its_clock_and_agrees_with_the_wall_clock(device: str) -> None:
    """perf_counter on CPU, CUDA events (on the run device's stream) on a GPU: the method says
    which, and the median agrees with the wall-clock time of the same call back to back, with
    a synchronize at the end. Events recorded on another stream than the work would read ~0."""
    import statistics
    import time

    import torch

    from attnprof.harness.timing import time_call

    cuda = device == "cuda"
    n = 8192 if cuda else 256  # about 1.5 ms of bf16 GEMM on an H100; 0.1-1 ms of fp32 on 2 cores
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16 if cuda else torch.float32)

    def call() -> torch.Tensor:
        return a @ a

    def wall_ms(k: int) -> float:  # k calls back to back, synchronised: ms per call
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(k):
            call()
        if cuda:
            torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / k

    s = time_call(call, device=device, budget_s=0.3, min_samples=10)
    # the median of 15 batches, as robust to a burst of load on a shared machine as the timer's
    wall = statistics.median(wall_ms(5 if cuda else 20) for _ in range(15))
    assert s.method == ("cuda events, L2 flushed between calls" if cuda else "perf_counter")
    assert s.n >= 10 and min(s.samples_ms) > 0
    low, high = (0.75, 1.33) if cuda else (0.2, 5.0)  # 2 shared cores: a wide band
    assert low < s.median_ms / wall < high, (s.median_ms, wall)


@pytest.mark.gpu
def test_blog_kernel_counts_on_cuda(tmp_path: Path) -> None:
    """The blog's table (DOMAIN.md section 1) as relations a cuBLAS / cuDNN version cannot
    break (issue 32): a Memcpy in naive and none in place, math many times a fused backend's GPU
    ops, one attention kernel per forward for each fused backend this GPU supports. The exact
    counts (6, 5, 20, 1 in the blog) are printed, not asserted."""
    from attnprof.compare.compare import compare

    w = Workload(batch=2, heads=4, seq=256, head_dim=64, dtype="bf16", device="cuda")
    rec = run(
        w,
        ["naive", "naive-inplace", "sdpa-math", "sdpa-flash", "sdpa-efficient"],
        out=tmp_path / "r",
        options=FAST,
    )
    rows = {r.label: r for r in compare([tmp_path / "r"]).rows if r.ok}
    print(
        {
            k: (r.gpu_ops_per_forward, r.memcpy_per_forward, r.attention_kernels_per_forward)
            for k, r in rows.items()
        }
    )
    assert (rows["naive"].memcpy_per_forward or 0) > 0  # the Memcpy of the out-of-place masked_fill
    assert rows["naive-inplace"].memcpy_per_forward == 0
    fused = [rows[f] for f in ("sdpa-flash", "sdpa-efficient") if f in rows]
    for f in fused:
        assert f.attention_kernels_per_forward == 1, f.label
    math_ops = rows["sdpa-math"].gpu_ops_per_forward or 0
    assert fused and all(math_ops >= 5 * (f.gpu_ops_per_forward or 0) for f in fused)
    for r in rec.results:
        if r.status == "ok":
            assert r.memory and r.memory.peak_bytes is not None and "cuda" in r.memory.method
            assert r.timing and "cuda events" in r.timing.method


@pytest.mark.gpu
def test_gpu_timing_against_triton_do_bench_measured_alike() -> None:
    """Issue 32: attnprof's timer (in rotation with another variant, as `attnprof run` times it)
    against Triton's do_bench on sdpa-flash at the blog's shape, in interleaved rounds on one
    stream, both after an L2 flush: they must not differ beyond 5%, and the bound the
    comparison can hold is stated. do_bench's loop written out (harness/crosscheck.py) is
    checked against do_bench itself the same way."""
    import torch

    from attnprof.harness.crosscheck import attnprof_timer, cross_check, dedicated_loop, triton_do_bench
    from attnprof.variants.registry import get_variant

    pytest.importorskip("triton")
    w = Workload(batch=8, heads=16, seq=1024, head_dim=64, dtype="bf16", device="cuda")
    inputs = w.make_inputs()
    flash = get_variant("sdpa-flash").build(w, inputs).call
    other = get_variant("naive-inplace").build(w, inputs).call
    with torch.no_grad():
        ours = cross_check(
            flash,
            {
                "attnprof": attnprof_timer("cuda", companions={"naive-inplace": other}),
                "do_bench": triton_do_bench(),
            },
            device="cuda",
            rounds=10,
            round_s=0.1,
        )
        loop = cross_check(
            flash,
            {"loop": dedicated_loop("cuda"), "do_bench": triton_do_bench()},
            device="cuda",
            rounds=8,
            round_s=0.1,
        )
    print("\n".join(ours.lines() + loop.lines()))
    assert ours.interval is not None and ours.stream.startswith("cuda stream")
    assert ours.verdict != "differ", ours.lines()
    assert loop.verdict != "differ", loop.lines()
    assert any(line.startswith("bound: differences beyond") for line in ours.lines())


def test_compile_twin_runs_and_is_tagged(tmp_path: Path) -> None:
    rec = run(
        TINY,
        ["naive-inplace"],
        out=tmp_path / "r",
        options=RunOptions(time_budget_s=0.05, min_samples=5, compile=True),
    )
    labels = {r.label: r for r in rec.results}
    twin = labels["naive-inplace:compile"]
    assert twin.status == "ok" and twin.mode == "compile" and twin.backend == "inductor"
    assert twin.accuracy and twin.accuracy.ok
    assert (tmp_path / "r" / "traces" / "1_2_64_16_naive-inplace_compile.json.gz").exists()
    # inductor fuses the eager op chain: far fewer aten ops per forward than the eager variant
    eager = labels["naive-inplace"]
    assert (
        twin.profile
        and eager.profile
        and twin.profile.cpu_ops_per_forward < eager.profile.cpu_ops_per_forward
    )


# the CUDA paths of issue 21 (their CPU mechanisms: tests/test_cuda_paths.py); here so that
# ../shared/checks/gpu/gpu_check.sh's GPU-tests step runs them
@pytest.mark.gpu
def test_gpu_cached_free_memory_counts_as_available() -> None:
    import torch

    from attnprof.harness.memory import available_bytes, cached_free_bytes

    dev = "cuda"
    x = torch.empty(512 * 2**20, dtype=torch.uint8, device=dev)
    del x  # back to the caching allocator, not to the driver
    free, _ = torch.cuda.mem_get_info()
    assert cached_free_bytes(dev) >= 512 * 2**20
    assert available_bytes(dev) >= free + 512 * 2**20
    assert environment_tf32_recorded(dev)


def environment_tf32_recorded(device: str) -> bool:
    from attnprof.harness.env import environment

    env = environment(device)
    return env.cuda_matmul_allow_tf32 is not None and env.cudnn_allow_tf32 is not None


# issue 31 item 4: --device cuda:N end to end (its mechanism on CPU: tests/test_cuda_paths.py,
# test_device.py); the two-GPU case is test_gpu_cuda_n_times_on_its_own_device below
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_device_cuda_n_runs_there_or_is_refused_in_one_line(device: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    import torch

    def attnprof_run(dev: str, out: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "attnprof", "run", "--device", dev, "--shape", "1,2,128,64", "--dtype", "bf16",
             "-v", "naive-inplace", "--no-profile", "--time-budget", "0.05", "-o", str(out)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    n = torch.cuda.device_count() if device == "cuda" else 0
    p = attnprof_run(f"cuda:{n}", tmp_path / "absent")  # out of range (on CPU: no GPU at all)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    expected = f"this machine has {n} GPU(s)" if device == "cuda" else "no CUDA GPU is visible to torch"
    assert expected in p.stderr and f"--device cuda:{n}" in p.stderr, p.stderr
    assert not (tmp_path / "absent").exists()
    if device == "cuda":
        p = attnprof_run("cuda:0", tmp_path / "r")
        assert p.returncode == 0, p.stderr[-3000:]
        rec = decode_run((tmp_path / "r" / "run.json").read_bytes())
        assert rec.workload.device == "cuda:0"
        (r,) = rec.results
        assert r.status == "ok" and r.timing is not None and "cuda events" in r.timing.method, r.reason
        assert r.timing.median_ms > 0


@pytest.mark.gpu
def test_gpu_cuda_n_times_on_its_own_device() -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    w = Workload(batch=1, heads=4, seq=512, head_dim=64, dtype="bf16", device="cuda:1")
    opts = RunOptions(profile=False, time_budget_s=0.2, min_samples=5)
    rec = run(w, ["naive-inplace"], options=opts)
    r = rec.results[0]
    assert r.status == "ok" and r.timing is not None
    assert r.timing.median_ms > 0.005  # events on cuda:0's stream would read ~0


@pytest.mark.gpu
def test_gpu_flush_buffer_is_counted_on_cuda() -> None:
    from attnprof.harness.run import Shared, memory_gate
    from attnprof.harness.timing import L2_FLUSH_BYTES
    from attnprof.variants.registry import get_variant

    w = Workload(batch=1, heads=2, seq=64, head_dim=16, device="cuda")
    why = memory_gate(get_variant("sdpa-math"), w, Shared(w), RunOptions(), share=1e-12)
    assert why is not None
    assert {p.code: p.args for p in why.parts}["memory.flush"]["size_bytes"] == L2_FLUSH_BYTES
