"""analyze() on every shared real trace, checked against plain counts, and on live CPU traces
recorded here with torch.profiler (DOMAIN.md section 2 predicts their findings)."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from _live import VARIANTS, record
from _paths import TRACES, trace
from attnprof.analysis import SCHEMA, TraceAnalysis, analyze, analyze_many
from attnprof.analysis.records.result import KernelStat
from attnprof.errors import UserError

ALL = sorted(TRACES.glob("*.json.gz"))
H100 = "AMD-AGI__TraceLens__tests__traces__h100"
RTX4090 = "tugot17__tokenomics"
L40 = "ranonrkm__TriForce"
GH200 = "marcalph__kernelforge"
LEGACY = "pytorch__kineto__tb_plugin__samples__resnet50"


def _events(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _plain_counts(path: Path) -> dict[str, Any]:
    """The straightforward count: json + a loop, nothing shared with the analyser."""
    out = {"kernels": 0, "kernel_time_us": 0.0, "memcpy": 0, "memset": 0}
    for e in _events(path):
        cat = str(e.get("cat", "")).lower()
        if cat == "kernel":
            out["kernels"] += 1
            out["kernel_time_us"] += float(e.get("dur", 0))
        elif cat in ("gpu_memcpy", "memcpy"):
            out["memcpy"] += 1
        elif cat in ("gpu_memset", "memset"):
            out["memset"] += 1
    return out


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name[:40])
def test_every_trace_analyses_and_totals_match_a_plain_count(path: Path) -> None:
    a = analyze(path, top=0)
    d = a.to_dict()
    assert d["schema"] == SCHEMA
    assert d["source"] == path.name
    expected = _plain_counts(path)
    for key in ("kernels", "memcpy", "memset"):
        assert d["totals"][key] == expected[key], key
    assert d["totals"]["kernel_time_us"] == pytest.approx(expected["kernel_time_us"], rel=1e-6, abs=1e-3)
    # categories hold every device op: kernels, memcpys, memsets and other accelerators' events
    assert (
        sum(c["count"] for c in d["categories"])
        == expected["kernels"] + expected["memcpy"] + expected["memset"] + d["totals"]["other_device_ops"]
    )
    assert sum(k["count"] for k in d["kernels"]) == expected["kernels"]
    for k in d["kernels"]:
        assert k["tensor_cores"] in (True, False, None)
    for f in d["findings"]:
        assert set(f) == {"code", "severity", "message", "evidence"}
        assert f["severity"] in ("info", "warning", "error")
    region = d["regions"][0]
    for key in (
        "name",
        "instances",
        "gpu_ops_per_instance",
        "cpu_ops_per_instance",
        "gpu_time_us_per_instance",
        "cpu_time_us_per_instance",
    ):
        assert key in region
    json.dumps(d)  # JSON-ready, no numpy scalars


def _attention(a: TraceAnalysis) -> list[KernelStat]:
    return [k for k in a.kernels if k.category == "attention"]


def test_h100_bert_has_4_pytorch_flash_kernels_and_tensor_core_s16816_gemms() -> None:
    a = analyze(trace(H100), top=0)
    att = _attention(a)
    assert sum(k.count for k in att) == 4
    assert {k.family for k in att} == {"PyTorch flash (FA2)"}
    s16816 = [k for k in a.kernels if "s16816" in k.name]
    assert s16816 and all(k.category == "gemm" and k.tensor_cores is True for k in s16816)
    assert all(k.precision == "bf16" for k in s16816)
    assert "FUSED_ATTENTION" in a.codes
    assert "UNFUSED_ATTENTION" not in a.codes
    assert a.device.name == "NVIDIA H100 80GB HBM3" and a.device.compute_capability == "9.0"
    region = a.regions[0]
    assert region.name == "ProfilerStep#*" and region.instances == 1
    assert region.gpu_ops_per_instance == 61  # 60 kernels + 1 memcpy, all launched inside the step


def test_rtx4090_llama_has_4_memory_efficient_kernels_and_cuda_core_sgemm() -> None:
    a = analyze(trace(RTX4090), top=0)
    att = _attention(a)
    assert [(k.short_name[:13], k.count) for k in att] == [("fmha_cutlassF", 4)]
    assert "memory-efficient" in att[0].family
    cc = a.finding("CUDA_CORE_GEMM")
    assert cc is not None and "fp32" in cc.evidence["precisions"]
    assert any(c.category == "communication" for c in a.categories)


def test_l40_split_kv_flash_kernels_come_from_one_cuda_graph_launch() -> None:
    a = analyze(trace(L40), top=0)
    att = _attention(a)
    assert sum(k.count for k in att) == 64
    for k in att:
        assert k.launch_apis == {"cudaGraphLaunch": k.count}
    graph = a.finding("CUDA_GRAPH")
    assert graph is not None
    assert graph.evidence["graph_launches"] == 1
    assert graph.evidence["attention_kernels"] == 64
    assert a.totals.graph_kernels == 1387


def test_gh200_xmma_ffma_gemm_runs_on_cuda_cores() -> None:
    a = analyze(trace(GH200), top=0)
    xmma = [k for k in a.kernels if "xmma" in k.name]
    assert xmma and all("ffma" in k.name for k in xmma)
    assert all(k.category == "gemm" and k.tensor_cores is False for k in xmma)
    finding = a.finding("CUDA_CORE_GEMM")
    assert finding is not None and finding.evidence["count"] == sum(k.count for k in xmma)


def test_legacy_2021_trace_links_kernels_to_operators() -> None:
    from attnprof.analysis.attribution.links import link
    from attnprof.trace import Kind, load_trace

    t = load_trace(trace(LEGACY))
    links = link(t)
    kernels = t.kind[links.gpu_rows] == Kind.KERNEL
    assert (links.launch[kernels] >= 0).all()  # every kernel finds its cudaLaunchKernel
    assert (links.cpu_op[kernels] >= 0).all()  # and the Operator that launched it
    ops = {t.names[int(t.name[r])] for r in links.cpu_op[kernels][:2000]}
    assert any(o.startswith("aten::") for o in ops)
    a = analyze(trace(LEGACY))
    assert a.regions[0].name == "ProfilerStep#*" and a.regions[0].instances == 6
    assert {x.api for x in a.launch_apis} >= {"cudaLaunchKernel", "cudaMemsetAsync"}


def test_trace_with_no_kernels_but_launches_says_gpu_activity_is_missing() -> None:
    a = analyze(trace("HazyResearch__zoology"))
    assert a.totals.kernels == 0
    assert "NO_GPU_ACTIVITY" in a.codes


def test_unfused_fp16_model_trace() -> None:
    a = analyze(trace("harryjmoss__particle_transformer"))
    f = a.finding("UNFUSED_ATTENTION")
    assert f is not None and f.evidence["occurrences"] >= 1


def test_region_by_regex_and_unknown_region() -> None:
    a = analyze(trace(GH200), region=r"ProfilerStep#\d+")
    assert a.regions[0].selector == "regex" and a.regions[0].instances == 3
    with pytest.raises(UserError, match="matches no annotation"):
        analyze(trace(GH200), region="no_such_region_xyz")


def test_gpu_user_annotation_places_kernels_without_launch_events(tmp_path: Path) -> None:
    # drop the launch events of the 4090 trace: kernels must still land in their annotations
    doc = json.loads(gzip.decompress(trace(RTX4090).read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") not in ("cuda_runtime", "ac2g")]
    p = tmp_path / "nolaunch.json"
    p.write_text(json.dumps(doc))
    names = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "gpu_user_annotation"}
    region = sorted(names)[0]
    a = analyze(p, region=region)
    assert a.totals.unlaunched_gpu_ops == a.totals.gpu_ops
    assert a.regions[0].gpu_ops_per_instance > 0
    assert "UNATTRIBUTED_GPU_OPS" in a.codes


def test_dataframes_and_parallel_analysis_agree_with_serial() -> None:
    paths = [trace(H100), trace(GH200), trace(L40)]
    par = analyze_many(paths, workers=2)
    ser = [analyze(p) for p in paths]
    assert [r.to_dict() for r in par] == [r.to_dict() for r in ser]
    df = ser[0].kernels_df()
    assert {"name", "category", "tensor_cores", "count", "time_us", "theoretical_occupancy_pct"} <= set(
        df.columns
    )
    assert len(ser[0].categories_df()) == len(ser[0].categories)
    assert len(ser[0].findings_df()) == len(ser[0].findings)
    assert ser[0].regions_df().loc[0, "instances"] == 1
    assert not ser[2].launch_apis_df().empty


# -- live CPU traces, recorded with torch.profiler ---------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TraceAnalysis]:
    out = tmp_path_factory.mktemp("live")
    return {v: analyze(record(v, out, dtype="bf16")) for v in VARIANTS}


def test_live_naive_has_out_of_place_copy(live: dict[str, TraceAnalysis]) -> None:
    a = live["naive"]
    f = a.finding("OUT_OF_PLACE_COPY")
    assert f is not None
    assert f.evidence["parents"] == {"aten::masked_fill": 3}
    assert a.regions[0].name == "attn_fwd" and a.regions[0].instances == 3
    assert "UNFUSED_ATTENTION" in a.codes


def test_live_naive_inplace_has_no_copy(live: dict[str, TraceAnalysis]) -> None:
    a = live["naive-inplace"]
    assert "OUT_OF_PLACE_COPY" not in a.codes
    assert a.regions[0].cpu_ops_per_instance < live["naive"].regions[0].cpu_ops_per_instance


def test_live_sdpa_math_bf16_upcasts_rebuilds_mask_and_uses_safe_softmax(
    live: dict[str, TraceAnalysis],
) -> None:
    codes = live["sdpa-math"].codes
    for code in ("FP32_UPCAST", "MASK_REBUILT_EACH_CALL", "SAFE_SOFTMAX"):
        assert code in codes
    assert "FUSED_ATTENTION" not in codes
    assert "OUT_OF_PLACE_COPY" not in codes


def test_live_sdpa_flash_transposes_before_the_fused_op(live: dict[str, TraceAnalysis]) -> None:
    a = live["sdpa-flash"]
    assert "TRANSPOSES_BEFORE_KERNEL" in a.codes
    assert "FUSED_ATTENTION" in a.codes
    for code in ("UNFUSED_ATTENTION", "FP32_UPCAST", "MASK_REBUILT_EACH_CALL", "OUT_OF_PLACE_COPY"):
        assert code not in a.codes
    assert a.device.kind == "cpu"


def _plain_cpu_self_times(path: Path, region: str) -> tuple[dict[str, list[float]], int]:
    """Per op name (count, self time) summed over the region's annotations, from the JSON with a
    stack: nothing shared with the analyser."""
    spans = [e for e in _events(path) if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    annots = [e for e in spans if e.get("name") == region and e.get("cat") == "user_annotation"]
    ops = sorted((e for e in spans if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    stats: dict[str, list[float]] = {}
    for ann in annots:
        t0, t1 = ann["ts"], ann["ts"] + ann["dur"]
        inside = [e for e in ops if e["tid"] == ann["tid"] and t0 <= e["ts"] and e["ts"] + e["dur"] <= t1]
        stack: list[dict[str, Any]] = []
        child_time: dict[int, float] = {}
        for e in inside:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:
                child_time[id(stack[-1])] = child_time.get(id(stack[-1]), 0.0) + e["dur"]
            stack.append(e)
        for e in inside:
            st = stats.setdefault(e["name"], [0.0, 0.0])
            st[0] += 1
            st[1] += max(0.0, e["dur"] - child_time.get(id(e), 0.0))
    return stats, len(annots)


def test_live_regions_list_cpu_ops_in_order_with_self_times(live: dict[str, TraceAnalysis]) -> None:
    a = live["naive"]
    r = a.to_dict()["regions"][0]
    ops = r["cpu_ops"]
    # the first instance, every op, in order of start; an op before the ops inside it
    assert len(ops) == r["per_instance"][0]["cpu_ops"] == r["cpu_ops_per_instance"]
    assert set(ops[0]) == {"name", "start_us", "dur_us", "self_us", "depth"}
    assert [o["start_us"] for o in ops] == sorted(o["start_us"] for o in ops)
    depths = [o["depth"] for o in ops]
    assert depths[0] == 0 and all(0 <= b <= a + 1 for a, b in itertools.pairwise(depths))
    cpu_time = r["per_instance"][0]["cpu_time_us"]
    for o in ops:
        assert o["start_us"] >= 0 and o["start_us"] + o["dur_us"] <= cpu_time + 0.01
        assert 0 <= o["self_us"] <= o["dur_us"] + 1e-9
    # self times split the outermost ops' time among all ops
    outer = sum(o["dur_us"] for o in ops if o["depth"] == 0)
    assert sum(o["self_us"] for o in ops) == pytest.approx(outer, abs=0.01 * len(ops))
    matmul = next(o for o in ops if o["name"] == "aten::matmul")
    inside = ops[ops.index(matmul) + 1 :]
    assert inside[0]["depth"] == matmul["depth"] + 1  # aten::matmul calls aten::bmm and friends

    # per op name over every instance, against a plain count from the JSON
    by_name = {o["name"]: o for o in r["cpu_ops_by_name"]}
    plain, n = _plain_cpu_self_times(Path(a.path), "attn_fwd")
    assert n == r["instances"] == 3 and set(by_name) == set(plain)
    for name, (count, self_us) in plain.items():
        assert by_name[name]["per_instance"] == pytest.approx(count / n, abs=1e-3)
        assert by_name[name]["self_us_per_instance"] == pytest.approx(self_us / n, abs=1e-3)
    assert by_name["aten::bmm"]["per_instance"] == 2
    times = [o["self_us_per_instance"] for o in r["cpu_ops_by_name"]]
    assert times == sorted(times, reverse=True)
    assert sum(o["per_instance"] for o in by_name.values()) == pytest.approx(r["cpu_ops_per_instance"])
    # the DataFrame keeps one row per region, without the nested lists
    assert not {"cpu_ops", "cpu_ops_by_name"} & set(a.regions_df().columns)


def test_live_upcast_confirmed_with_record_shapes(tmp_path: Path) -> None:
    a = analyze(record("sdpa-math", tmp_path, dtype="bf16", record_shapes=True))
    f = a.finding("FP32_UPCAST")
    assert f is not None and f.evidence["dtypes_recorded"] is True
    assert f.evidence["upcasts_per_instance"] == 3  # q, k, v
    fp32 = analyze(record("sdpa-math", tmp_path, dtype="fp32", record_shapes=True))
    assert "FP32_UPCAST" not in fp32.codes


def test_live_roofline_on_cpu_states_that_no_peak_is_known(tmp_path: Path) -> None:
    from attnprof.workload import Workload

    wl = Workload(batch=1, heads=2, seq=64, head_dim=16, dtype="bf16")
    a = analyze(record("naive-inplace", tmp_path), workload=wl)
    roof = a.roofline
    assert roof is not None
    assert roof.flops_useful == wl.flops_useful()
    assert roof.achieved_tflops > 0
    assert roof.peak_tflops is None and "no peak" in roof.note


# -- a run directory made by the harness ---------------------------------------------------------


def test_run_directory_traces_take_the_workload_and_peak_from_run_json(cpu_run: Any) -> None:
    out, record_ = cpu_run
    # the rich traces (the lean pass's, beside them, record no shapes)
    traces = {p.name: p for p in (out / "traces").glob("*.json.gz") if not p.name.endswith(".lean.json.gz")}
    naive = next(p for n, p in traces.items() if "_naive_" in n)
    inplace = next(p for n, p in traces.items() if "_naive-inplace_" in n)
    a = analyze(naive)
    assert a.regions[0].name == "attn_fwd"
    assert "OUT_OF_PLACE_COPY" in a.codes
    assert "OUT_OF_PLACE_COPY" not in analyze(inplace).codes
    roof = a.roofline
    assert roof is not None, "the workload should come from run.json"
    wl = record_.workload
    assert roof.flops_useful == pytest.approx(
        4 * wl.batch * wl.heads * wl.seq * (wl.seq + 1) // 2 * wl.head_dim
    )
    assert roof.flops_executed > roof.flops_useful  # naive computes the full square
    if roof.peak_tflops is not None:
        assert "run.json" in roof.peak_source
    else:
        assert "no peak" in roof.note


def test_result_above_peak_is_reported_as_a_measurement_error() -> None:
    from attnprof.workload import Workload

    # far more work than an H100 can do in the step's 0.3 ms of GPU time: the peak is exceeded
    huge = Workload(batch=64, heads=64, seq=8192, head_dim=128, dtype="bf16", device="cuda")
    a = analyze(trace(H100), workload=huge)
    roof = a.roofline
    assert roof is not None and roof.peak_tflops == 989.0 and "H100" in roof.peak_source
    assert roof.pct_of_peak_flops > 100
    f = a.finding("ABOVE_PEAK")
    assert f is not None and f.severity == "error"
    small = Workload(batch=1, heads=2, seq=64, head_dim=16, dtype="bf16", device="cuda")
    assert "ABOVE_PEAK" not in analyze(trace(H100), workload=small).codes


def test_repaired_trace_says_so_in_findings_and_json(tmp_path: Path) -> None:
    raw = gzip.decompress(
        trace("facebookresearch__HolisticTraceAnalysis__tests__data__triton_example").read_bytes()
    )
    p = tmp_path / "broken.json"
    p.write_bytes(
        raw.replace(b'"queued": 0', b'"queued": N/A', 1).replace(b"triton_poi", b"triton\x07poi", 1)
    )
    d = analyze(p).to_dict()
    assert "TRACE_REPAIRED" in [f["code"] for f in d["findings"]]
    assert len(d["repairs"]) == 2
    assert d["totals"]["kernels"] == 1


def test_out_of_place_masked_fill_on_gpu_shows_its_memcpy() -> None:
    # Switch Transformer forward on an A100: out-of-place masked_fill, 10 times, each a clone whose
    # copy runs as a Memcpy DtoD on the GPU (the blog's naive finding, in someone else's model)
    a = analyze(trace("CodingPlatelets__SwitchTransformers"))
    f = a.finding("OUT_OF_PLACE_COPY")
    assert f is not None
    assert f.evidence["parents"] == {"aten::masked_fill": 10}
    assert f.evidence["memcpy_dtod_per_instance"] >= 10
    sgemm = a.finding("CUDA_CORE_GEMM")
    assert sgemm is not None and sgemm.evidence["precisions"] == ["fp32"]


def test_cpu_findings_speak_of_the_cpu_and_gpu_ones_of_the_gpu(
    live: dict[str, TraceAnalysis], tmp_path: Path
) -> None:
    """A CPU run's findings say nothing of a GPU (issue 9: "the views cost no GPU time" on a CPU
    run); a GPU trace's keep their GPU wording."""
    naive = analyze(record("naive", tmp_path, record_shapes=True))  # shapes confirm the chain
    cpu = [f.message for f in (*live["sdpa-flash"].findings, *naive.findings)]
    assert any("views copy no data" in m for m in cpu)
    assert any("whose CPU kernel is the fused flash one" in m for m in cpu)
    assert not any("GPU" in m or "cuDNN" in m for m in cpu), cpu
    gpu = {f.code: f.message for f in analyze(trace(H100)).findings}
    assert "views cost no GPU time" in gpu["TRANSPOSES_BEFORE_KERNEL"]
