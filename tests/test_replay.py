"""Graph replays attributed to the CPU ops that captured them (attnprof.analysis.replay.replay): small
synthetic capture / execution pairs (matched, a kernel launched with another grid, an unmatched
replay, a capture that names no kernels), the shared vLLM pair, and the CLI's --capture and
folder layout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _paths import TRACES
from attnprof.analysis import analyze
from attnprof.analysis.attribution.links import link
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.analysis.replay.replay import attach, captured_graphs
from attnprof.errors import UserError
from attnprof.trace.load import load_trace
from attnprof.trace.model import Kind

VLLM = TRACES / "graph_pairs" / "vllm_prefilldecode_piecewise"
VLLM_EXEC = VLLM / "graph_execution.json.gz"
VLLM_CAPTURE = next((VLLM / "capture_traces").glob("graph_capture_rank_0.*.json.gz"), VLLM)


def ev(name: str, cat: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


# two graphs, as a piecewise capture records them: the ops, and launches naming their kernels
GRAPH_A = [("aten::mm", [[64, 32], [32, 16]], "gemm_kernel_a", 8), ("aten::add", [[64, 16]], "add_kernel", 4)]
GRAPH_B = [("aten::softmax", [[64, 16]], "softmax_kernel", 2)]


def capture_events(
    graphs: list[list[tuple[str, Any, str, int]]], *, names: bool = True
) -> list[dict[str, Any]]:
    out = [ev("capture_8_PIECEWISE", "user_annotation", 0, 10_000)]
    t, ext = 100.0, 1
    for gi, graph in enumerate(graphs):
        out.append(ev("cudaStreamBeginCapture", "cuda_runtime", t, 1, correlation=1000 + gi))
        t += 10
        out.append(ev(f"layer{gi}", "user_annotation", t, 20 * len(graph) + 5))
        for op, dims, kname, grid in graph:
            out.append(ev(op, "cpu_op", t + 1, 15, **{"External id": ext, "Input Dims": dims}))
            args: dict[str, Any] = {
                "External id": ext,
                "correlation": ext,
                "grid": [grid, 1, 1],
                "block": [128, 1, 1],
            }
            if names:
                args["kernel"] = kname
            out.append(ev("cudaLaunchKernel", "cuda_runtime", t + 3, 5, **args))
            t += 20
            ext += 1
        t += 10
        out.append(ev("cudaStreamEndCapture", "cuda_runtime", t, 1, correlation=2000 + gi))
        t += 10
    return out


def execution_events(replays: list[list[tuple[str, int]]]) -> list[dict[str, Any]]:
    """Each replay: one graph launch and its kernels (name, grid), on stream 7."""
    out = [ev("execute_step", "user_annotation", 0, 100_000), ev("CUDAGraph::replay", "cpu_op", 5, 90_000)]
    t = 1000.0
    for ri, kernels in enumerate(replays):
        corr = 500 + ri
        out.append(ev("cudaGraphLaunch", "cuda_runtime", t, 10, correlation=corr))
        k_t = t + 20
        for name, grid in kernels:
            args = {"correlation": corr, "device": 0, "stream": 7, "grid": [grid, 1, 1], "block": [128, 1, 1]}
            out.append(ev(name, "kernel", k_t, 10, pid=0, tid=7, **args))
            k_t += 12
        t = k_t + 50
    return out


def write(tmp: Path, name: str, events: list[dict[str, Any]]) -> Path:
    p = tmp / name
    p.write_text(json.dumps({"traceEvents": events}))
    return p


def kernels_of(graph: list[tuple[str, Any, str, int]]) -> list[tuple[str, int]]:
    return [(k, g) for _, _, k, g in graph]


def run_pair(tmp: Path, capture: list[dict[str, Any]], execution: list[dict[str, Any]]) -> TraceAnalysis:
    cap = write(tmp, "graph_capture_rank_0.json", capture)
    exe = write(tmp, "exec.json", execution)
    a = analyze(exe, capture=cap)
    assert isinstance(a, TraceAnalysis)
    return a


def captured_op_names(exe: Path, cap: Path) -> list[tuple[str, str, Any]]:
    """(kernel, its CPU op, the op's shapes) of every replayed kernel, in order."""
    t = attach(load_trace(exe), load_trace(cap), capture=cap.name)
    links = link(t)
    out = []
    for i in np.flatnonzero(links.graph).tolist():
        r, o = int(links.gpu_rows[i]), int(links.cpu_op[i])
        out.append((t.names[int(t.name[r])], t.names[int(t.name[o])] if o >= 0 else "-", t.shapes.get(o)))
    return out


def test_matched_replays_get_the_captured_ops_and_shapes(tmp_path: Path) -> None:
    cap = write(tmp_path, "cap.json", capture_events([GRAPH_A, GRAPH_B]))
    exe = write(
        tmp_path,
        "exe.json",
        execution_events([kernels_of(GRAPH_A), kernels_of(GRAPH_B), kernels_of(GRAPH_A)]),
    )
    assert captured_op_names(exe, cap) == [
        ("gemm_kernel_a", "aten::mm", [[64, 32], [32, 16]]),
        ("add_kernel", "aten::add", None),  # shapes are kept for GEMMs and softmaxes only
        ("softmax_kernel", "aten::softmax", [[64, 16]]),
        ("gemm_kernel_a", "aten::mm", [[64, 32], [32, 16]]),
        ("add_kernel", "aten::add", None),
    ]
    a = analyze(exe, capture=cap)
    assert isinstance(a, TraceAnalysis)
    g = a.graphs
    assert (g.replayed_ops, g.attributed_ops, g.unattributed_us, g.unattributed_pct) == (5, 5, 0.0, 0.0)
    assert (g.graphs_captured, g.graph_launches, g.replays_matched, g.replays_unmatched) == (2, 3, 3, 0)
    assert g.config_differs == 0 and g.capture == "cap.json"
    # the imported rows are not this trace's: counts, regions and windows are the execution's own
    plain = analyze(exe)
    assert isinstance(plain, TraceAnalysis)
    assert a.totals.cpu_ops == plain.totals.cpu_ops == 1
    assert a.trace.kept_events == plain.trace.kept_events
    assert a.regions[0].name == plain.regions[0].name
    assert a.totals.device_busy_us == plain.totals.device_busy_us
    assert (a.totals.kernel_time_us, a.share.device_time_us) == (plain.totals.kernel_time_us, 50.0)
    assert [w for w in a.warnings if w.startswith("3 of 3 graph replays matched")]


def test_a_kernel_with_another_launch_config_still_matches_and_is_counted(tmp_path: Path) -> None:
    other = [("gemm_kernel_a", 16), ("add_kernel", 4)]  # the GEMM ran with 16 blocks, captured with 8
    a = run_pair(tmp_path, capture_events([GRAPH_A]), execution_events([other]))
    assert (a.graphs.replays_matched, a.graphs.attributed_ops, a.graphs.config_differs) == (1, 2, 1)
    (w,) = [w for w in a.warnings if "graph replays matched" in w]
    assert "1 matched ops ran with a grid or block other than the capture's" in w


def test_same_kernels_prefer_the_capture_with_the_same_launch_config(tmp_path: Path) -> None:
    # two captures of one graph at two batch sizes (grid 8 and grid 32): each replay finds its own
    small, large = GRAPH_A, [(op, d, k, g * 4) for op, d, k, g in GRAPH_A]
    cap = write(tmp_path, "cap.json", capture_events([small, large]))
    exe = write(tmp_path, "exe.json", execution_events([kernels_of(large), kernels_of(small)]))
    t = attach(load_trace(exe), load_trace(cap), capture="cap.json")
    assert t.metadata["replay"]["config_differs"] == 0
    assert t.metadata["replay"]["replays_matched"] == 2


def test_an_unmatched_replay_keeps_its_graph_launch_and_is_said(tmp_path: Path) -> None:
    stray = [("gemm_kernel_a", 8), ("mul_kernel", 4)]  # no captured graph has this sequence
    a = run_pair(tmp_path, capture_events([GRAPH_A]), execution_events([kernels_of(GRAPH_A), stray]))
    g = a.graphs
    assert (g.replays_matched, g.replays_unmatched, g.replayed_ops, g.attributed_ops) == (1, 1, 4, 2)
    assert g.unattributed_us == 20.0 and g.unattributed_pct == 50.0
    (w,) = [w for w in a.warnings if "graph replays matched" in w]
    assert (
        w.startswith("1 of 2 graph replays matched")
        and "20 µs (50.0% of device time) has only its graph launch" in w
    )


def test_a_capture_without_kernel_names_matches_by_position(tmp_path: Path) -> None:
    # CUDA's launch calls name no kernel: a replay of the same length matches by position
    cap = write(tmp_path, "cap.json", capture_events([GRAPH_A], names=False))
    exe = write(tmp_path, "exe.json", execution_events([kernels_of(GRAPH_A)]))
    assert [(k, o) for k, o, _ in captured_op_names(exe, cap)] == [
        ("gemm_kernel_a", "aten::mm"),
        ("add_kernel", "aten::add"),
    ]
    assert [len(g.labels) for g in captured_graphs(load_trace(cap))] == [2]


def test_without_a_capture_the_unattributed_share_is_said(tmp_path: Path) -> None:
    exe = write(tmp_path, "exe.json", execution_events([kernels_of(GRAPH_A)]))
    a = analyze(exe)
    assert isinstance(a, TraceAnalysis)
    g = a.graphs
    assert (g.replayed_ops, g.attributed_ops, g.unattributed_pct, g.capture) == (2, 0, 100.0, None)
    assert [
        w
        for w in a.warnings
        if w.startswith("2 device ops (20 µs, 100.0% of device time) ran as graph replays")
    ]


def test_eager_kernels_have_no_graph_record(tmp_path: Path) -> None:
    events = [
        ev("aten::mm", "cpu_op", 0, 50, **{"External id": 1}),
        ev("cudaLaunchKernel", "cuda_runtime", 5, 5, correlation=1),
    ]
    events.append(ev("gemm_kernel_a", "kernel", 20, 10, pid=0, tid=7, correlation=1, device=0))
    a = analyze(write(tmp_path, "eager.json", events))
    assert isinstance(a, TraceAnalysis)
    assert a.graphs.replayed_ops == 0
    assert not [w for w in a.warnings if "graph replay" in w]


# -- the shared vLLM pair ------------------------------------------------------------------------


def test_shared_vllm_pair_attributes_every_replayed_kernel() -> None:
    a = analyze(VLLM_EXEC, capture=VLLM_CAPTURE)
    assert isinstance(a, TraceAnalysis)
    g = a.graphs
    # 25 piecewise graphs captured (1 + 23 layers + 1), replayed once each; 361 replayed kernels
    assert (g.graphs_captured, g.graph_launches, g.replays_matched, g.replays_unmatched) == (25, 25, 25, 0)
    assert g.replayed_ops == g.attributed_ops == 361
    assert g.unattributed_us == 0.0
    plain = analyze(VLLM_EXEC)
    assert isinstance(plain, TraceAnalysis)
    assert plain.graphs.attributed_ops == 0 and plain.graphs.unattributed_pct == pytest.approx(96.0, abs=0.5)
    assert (a.totals.kernels, a.totals.kernel_time_us) == (plain.totals.kernels, plain.totals.kernel_time_us)
    t = attach(load_trace(VLLM_EXEC), load_trace(VLLM_CAPTURE), capture="c")
    links = link(t)
    ops = {t.names[int(t.name[o])] for o in links.cpu_op[links.captured].tolist()}
    assert {"aten::addmm", "aiter::rms_norm", "vllm::moe_forward", "_C::rotary_embedding"} <= ops
    gemm = next(k for k in a.graphs.kernels if k.op == "aten::addmm")
    assert gemm.frame == "vllm/model_executor/layers/utils.py(122): rocm_unquantized_gemm_impl"
    assert (
        gemm.module == "nn.Module: GraphModule_0"
    )  # inductor's graph: the model's modules are compiled away


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attnprof", "analyze", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_reads_vllm_folder_and_capture_option() -> None:
    folder = _cli("--json", str(VLLM))
    given = _cli("--json", str(VLLM_EXEC), "--capture", str(VLLM_CAPTURE))
    assert folder.returncode == given.returncode == 0, folder.stderr + given.stderr
    a, b = json.loads(folder.stdout), json.loads(given.stdout)
    assert a["graphs"]["attributed_ops"] == b["graphs"]["attributed_ops"] == 361
    text = _cli(str(VLLM))
    # the share line (folded at the pipe's 100 columns) says how much the capture could explain
    first = " ".join(text.stdout.split("device:", 1)[0].split())
    assert first.startswith("graph_execution.json.gz device time 156 ms: attention")
    assert "graph replays 96% (0% without their CPU op, capture graph_capture_rank_0." in first


def test_cli_refuses_capture_with_several_traces(tmp_path: Path) -> None:
    exe = write(tmp_path, "exe.json", execution_events([kernels_of(GRAPH_A)]))
    p = _cli(str(exe), str(exe), "--capture", str(exe))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "--capture CAPTURE_TRACE belongs to one execution trace" in p.stderr


def test_shared_vllm_pair_per_op_model_covers_the_replayed_gemms() -> None:
    # the per-op model places a replayed kernel at its captured op: the captured aten::addmm
    # shapes give the replayed GEMMs their FLOPs
    a = analyze(VLLM_EXEC, capture=VLLM_CAPTURE)
    plain = analyze(VLLM_EXEC)
    assert isinstance(a, TraceAnalysis) and isinstance(plain, TraceAnalysis)
    assert a.perf_model is not None and plain.perf_model is not None
    assert "aten::addmm" in {o.name for o in a.ops} and "aten::addmm" not in {o.name for o in plain.ops}
    assert a.perf_model.modelled_time_us > 10 * plain.perf_model.modelled_time_us > 0
    assert a.perf_model.model_flops > 100 * plain.perf_model.model_flops


def test_replayed_kernels_name_their_captured_op_frame_and_module(tmp_path: Path) -> None:
    capture = capture_events([GRAPH_A])
    # Python frames around the captured mm, as with_stack=True records them: a module, user
    # code, and PyTorch's own frames inside it (skipped: not the user's code)
    mm = next(e for e in capture if e["name"] == "aten::mm")
    t = mm["ts"]
    capture += [
        ev("nn.Module: Attention_0", "python_function", t - 5, 22),
        ev("models/attn.py(12): forward", "python_function", t - 4, 20),
        ev("torch/nn/functional.py(99): linear", "python_function", t - 2, 18),
    ]
    a = run_pair(tmp_path, capture, execution_events([kernels_of(GRAPH_A)]))
    by_name = {k.name: k for k in a.graphs.kernels}
    gemm, add = by_name["gemm_kernel_a"], by_name["add_kernel"]
    assert (gemm.op, gemm.frame, gemm.module, gemm.count, gemm.time_us) == (
        "aten::mm",
        "models/attn.py(12): forward",
        "nn.Module: Attention_0",
        1,
        10.0,
    )
    assert (add.op, add.frame, add.module) == ("aten::add", None, None)  # it starts after the frames end


# -- eager and replayed: the same step, the same figures -----------------------------------------

_MM = {"Input Dims": [[256, 512], [512, 1024]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}
_SDPA = {
    "Input Dims": [[1, 8, 256, 64], [1, 8, 256, 64], [1, 8, 256, 64], [], [], []],
    "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", ""],
    "Concrete Inputs": ["", "", "", "0.0", "True", ""],
}
# (op, its recorded inputs, kernel, kernel duration): one layer of a small model
LAYER = [
    ("aten::mm", _MM, "ampere_sgemm_128x64_nn", 40.0),
    ("aten::_scaled_dot_product_flash_attention", _SDPA, "flash_fwd_kernel", 25.0),
    ("aten::add", None, "vectorized_elementwise_kernel", 5.0),
]


def _eager(layers: int) -> list[dict[str, Any]]:
    out, t, c = [ev("step", "user_annotation", 0, 100_000)], 10.0, 1
    k_t = 5000.0
    for _ in range(layers):
        out.append(ev("layer", "user_annotation", t - 2, 40 * len(LAYER)))  # record_function("layer")
        for op, inputs, kernel, dur in LAYER:
            out.append(ev(op, "cpu_op", t, 30, **{"External id": c, **(inputs or {})}))
            out.append(ev("cudaLaunchKernel", "cuda_runtime", t + 5, 5, correlation=c, **{"External id": c}))
            out.append(ev(kernel, "kernel", k_t, dur, pid=0, tid=7, correlation=c, device=0, stream=7))
            t, k_t, c = t + 40, k_t + dur + 2, c + 1
    return out


def _captured(layers: int) -> list[dict[str, Any]]:
    out = [ev("cudaStreamBeginCapture", "cuda_runtime", 0, 1, correlation=9000)]
    t, c = 10.0, 1
    for _ in range(layers):
        out.append(ev("layer", "user_annotation", t - 2, 40 * len(LAYER)))  # as captured
        for op, inputs, kernel, _dur in LAYER:
            out.append(ev(op, "cpu_op", t, 30, **{"External id": c, **(inputs or {})}))
            out.append(
                ev(
                    "cudaLaunchKernel",
                    "cuda_runtime",
                    t + 5,
                    5,
                    correlation=c,
                    kernel=kernel,
                    **{"External id": c},
                )
            )
            t, c = t + 40, c + 1
    out.append(ev("cudaStreamEndCapture", "cuda_runtime", t, 1, correlation=9001))
    return out


def _replayed(layers: int) -> list[dict[str, Any]]:
    out = [
        ev("step", "user_annotation", 0, 100_000),
        ev("cudaGraphLaunch", "cuda_runtime", 10, 20, correlation=77),
    ]
    k_t = 5000.0
    for _ in range(layers):
        for _op, _inputs, kernel, dur in LAYER:
            out.append(ev(kernel, "kernel", k_t, dur, pid=0, tid=7, correlation=77, device=0, stream=7))
            k_t += dur + 2
    return out


def test_a_replayed_step_has_the_eager_steps_figures(tmp_path: Path) -> None:
    h100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}]

    def save(name: str, events: list[dict[str, Any]]) -> Path:
        p = tmp_path / name
        p.write_text(json.dumps({"traceEvents": events, "deviceProperties": h100}))
        return p

    eager = analyze(save("eager.json", _eager(2)))
    graph = analyze(save("exec.json", _replayed(2)), capture=save("cap.json", _captured(2)))
    bare = analyze(save("exec.json", _replayed(2)))
    assert (
        isinstance(eager, TraceAnalysis)
        and isinstance(graph, TraceAnalysis)
        and isinstance(bare, TraceAnalysis)
    )
    assert graph.graphs.attributed_ops == 6
    # attention share by provenance: the same with the capture; without it, by kernel name only
    assert graph.share.attention.time_us == eager.share.attention.time_us == 50.0
    assert graph.share.attention.rules == eager.share.attention.rules
    assert bare.share.attention.name_only_us == 50.0 and eager.share.attention.name_only_us == 0.0
    # per-op FLOPs and rates from the captured shapes
    assert eager.perf_model is not None and graph.perf_model is not None and bare.perf_model is not None
    assert graph.perf_model.model_flops == eager.perf_model.model_flops > 0
    assert graph.perf_model.modelled_time_us == eager.perf_model.modelled_time_us == 130.0
    assert [(o.name, o.flops) for o in graph.ops] == [(o.name, o.flops) for o in eager.ops]
    assert bare.perf_model.model_flops == 0


# -- per-layer times: a replayed kernel is in the captured layer that held its captured op --------


def _per_layer(a: TraceAnalysis | object) -> list[tuple[int, float]]:
    assert isinstance(a, TraceAnalysis)
    (r,) = a.regions
    return [(p.gpu_ops, p.gpu_time_us) for p in r.per_instance]


def test_a_replayed_step_has_the_eager_steps_per_layer_times(tmp_path: Path) -> None:
    eager = analyze(write(tmp_path, "eager.json", _eager(2)), region="layer")
    cap = write(tmp_path, "cap.json", _captured(2))
    exe = write(tmp_path, "exec.json", _replayed(2))
    graph = analyze(exe, capture=cap, region="layer")
    # each layer: GEMM 40 + SDPA 25 + add 5 µs, in both runs
    assert _per_layer(graph) == _per_layer(eager) == [(3, 70.0), (3, 70.0)]
    assert isinstance(graph, TraceAnalysis) and isinstance(eager, TraceAnalysis)
    assert graph.regions[0].attribution.rules == {"capture": 3.0}
    assert eager.regions[0].attribution.rules == {"thread": 3.0}
    # a replayed layer ran no CPU ops of its own: the graph launch issued them all
    assert [p.cpu_time_us for p in graph.regions[0].per_instance] == [0.0, 0.0]
    assert (graph.regions[0].replayed_instances, eager.regions[0].replayed_instances) == (2, 0)
    # without the capture, the execution trace has no layer range to give
    with pytest.raises(UserError, match="--region 'layer' matches no annotation"):
        analyze(exe, region="layer")


def test_each_replay_of_a_captured_layer_is_its_own_instance(tmp_path: Path) -> None:
    # one graph replayed twice: two steps of two layers, as two eager steps would have them
    events = _replayed(2)
    k_t = 9000.0
    events.append(ev("cudaGraphLaunch", "cuda_runtime", 8000, 20, correlation=78))
    for _ in range(2):
        for _op, _inputs, kernel, dur in LAYER:
            events.append(ev(kernel, "kernel", k_t, dur, pid=0, tid=7, correlation=78, device=0, stream=7))
            k_t += dur + 2
    a = analyze(
        write(tmp_path, "exec.json", events),
        capture=write(tmp_path, "cap.json", _captured(2)),
        region="layer",
    )
    assert _per_layer(a) == [(3, 70.0)] * 4


def test_an_unmatched_replay_is_in_no_captured_layer(tmp_path: Path) -> None:
    events = _replayed(2)
    events.append(ev("cudaGraphLaunch", "cuda_runtime", 8000, 20, correlation=78))
    for i, (name, dur) in enumerate([("stray_kernel", 9.0), ("mul_kernel", 4.0)]):  # no graph has these
        events.append(
            ev(name, "kernel", 9000 + 20 * i, dur, pid=0, tid=7, correlation=78, device=0, stream=7)
        )
    a = analyze(
        write(tmp_path, "exec.json", events),
        capture=write(tmp_path, "cap.json", _captured(2)),
        region="layer",
    )
    assert isinstance(a, TraceAnalysis)
    assert a.graphs.replays_unmatched == 1 and a.graphs.unattributed_us == 13.0
    assert _per_layer(a) == [(3, 70.0), (3, 70.0)]
    # the stray kernels keep their graph launch: the step that launched it holds them, by thread
    step = analyze(
        write(tmp_path, "exec.json", events), capture=write(tmp_path, "cap.json", _captured(2)), region="step"
    )
    assert isinstance(step, TraceAnalysis)
    (p,) = step.regions[0].per_instance
    assert (p.gpu_ops, p.gpu_time_us) == (8, 153.0)
    assert step.regions[0].attribution.rules == {"thread": 8.0}


def test_a_range_of_the_execution_trace_around_the_launch_keeps_the_whole_replay(tmp_path: Path) -> None:
    # the capture records a "step" range too: the execution's step, which holds the graph
    # launch, keeps all six kernels, one instance, as the eager step has them
    cap = [*_captured(2), ev("step", "user_annotation", 5, 300)]
    a = analyze(
        write(tmp_path, "exec.json", _replayed(2)), capture=write(tmp_path, "cap.json", cap), region="step"
    )
    eager = analyze(write(tmp_path, "eager.json", _eager(2)), region="step")
    assert _per_layer(a) == _per_layer(eager) == [(6, 140.0)]
    assert isinstance(a, TraceAnalysis) and a.regions[0].attribution.rules == {"thread": 6.0}
    assert a.regions[0].replayed_instances == 0


def test_shared_vllm_pair_gets_per_layer_times_from_its_capture() -> None:
    # the capture records a range per compiled piece (one graph each: 23 layers share one
    # compiled graph) inside one capture_8192_PIECEWISE range around them all
    cap = load_trace(VLLM_CAPTURE)
    graphs = captured_graphs(cap)
    ann = cap.rows(Kind.ANNOTATION)
    layer = next(n for n in cap.names if n.startswith("## Call CompiledFxGraph fb3en3"))
    ranges = ann[cap.name[ann] == cap.names.index(layer)]
    # per captured layer range: the launches it holds, as the capture recorded them
    held = []
    for r in ranges[np.argsort(cap.ts[ranges])].tolist():
        s, e = cap.ts[r], cap.ts[r] + cap.dur[r]
        held.append(sum(int(((cap.ts[g.launches] >= s) & (cap.ts[g.launches] <= e)).sum()) for g in graphs))
    a = analyze(VLLM_EXEC, capture=VLLM_CAPTURE, region=layer)
    assert isinstance(a, TraceAnalysis)
    r = a.regions[0]
    assert r.instances == ranges.size == 23 and r.attribution.rules == {"capture": float(held[0])}
    assert [p.gpu_ops for p in r.per_instance] == held
    assert all(p.gpu_time_us > 0 for p in r.per_instance)
    # the range around every piece is one instance: each replayed kernel once
    whole = analyze(VLLM_EXEC, capture=VLLM_CAPTURE, region="capture_8192_PIECEWISE")
    assert isinstance(whole, TraceAnalysis)
    (p,) = whole.regions[0].per_instance
    assert p.gpu_ops == sum(g.launches.size for g in graphs) == a.graphs.attributed_ops
    assert p.gpu_time_us == pytest.approx(a.graphs.replayed_us, abs=0.01)


def test_a_pair_folder_with_two_captures_for_one_rank_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Which capture trace belongs to the execution trace is not recorded: two of them for rank 0
    are refused with the fix (give the pair with --capture); one of each is analysed."""
    from attnprof.cli import main

    doc = json.dumps(
        {
            "traceEvents": [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}
            ]
        }
    )
    (tmp_path / "capture_traces").mkdir()
    (tmp_path / "graph_execution.json").write_text(doc)
    (tmp_path / "capture_traces" / "graph_capture_rank_0.1.pt.trace.json").write_text(doc)
    assert main(["analyze", str(tmp_path), "--json"]) == 0
    capsys.readouterr()
    (tmp_path / "capture_traces" / "graph_capture_rank_0.2.pt.trace.json").write_text(doc)
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 execution and 2 capture traces" in err[0] and "--capture" in err[0], err
    assert "capture ranks 0)" in err[0]


def test_capture_traces_of_several_ranks_go_with_the_execution_traces_rank(tmp_path: Path) -> None:
    from attnprof.analysis.replay.replay import find_pair

    (tmp_path / "capture_traces").mkdir()
    for name in ("graph_capture_rank_0.1.pt.trace.json", "graph_capture_rank_1.1.pt.trace.json"):
        (tmp_path / "capture_traces" / name).write_text("{}")
    exe = tmp_path / "graph_execution_rank_1.json"
    exe.write_text("{}")
    assert find_pair(tmp_path) == (exe, tmp_path / "capture_traces" / "graph_capture_rank_1.1.pt.trace.json")
    exe.rename(tmp_path / "graph_execution.json")  # its name no longer says its rank
    with pytest.raises(UserError, match="no name pairs them by rank"):
        find_pair(tmp_path)


def _replays_with_ids(ids: bool) -> list[dict[str, Any]]:
    """GRAPH_A replayed twice; the second replay's ops start in the other order (two streams),
    so its kernel-name sequence matches no captured graph. With ids, each kernel records the
    graph id (7) and its node id (1, 2), as CUPTI gives them for graph kernels."""
    out = [ev("execute_step", "user_annotation", 0, 100_000)]
    for ri, order in enumerate(([0, 1], [1, 0])):
        corr, t = 500 + ri, 1000.0 + 1000 * ri
        out.append(ev("cudaGraphLaunch", "cuda_runtime", t, 10, correlation=corr))
        for slot, k in enumerate(order):
            _, _, name, grid = GRAPH_A[k]
            args: dict[str, Any] = {"correlation": corr, "device": 0, "stream": 7 + k, "grid": [grid, 1, 1]}
            args["block"] = [128, 1, 1]
            if ids:
                args |= {"graph id": 7, "graph node id": k + 1}
            out.append(ev(name, "kernel", t + 20 + 12 * slot, 10, pid=0, tid=7 + k, **args))
    return out


def test_a_replay_in_another_order_is_matched_by_its_graph_and_node_ids(tmp_path: Path) -> None:
    cap = write(tmp_path, "cap.json", capture_events([GRAPH_A]))
    exe = write(tmp_path, "exe.json", _replays_with_ids(ids=True))
    got = captured_op_names(exe, cap)
    assert sorted(got) == sorted(
        [("gemm_kernel_a", "aten::mm", [[64, 32], [32, 16]]), ("add_kernel", "aten::add", None)] * 2
    )
    g = analyze(exe, capture=cap).graphs
    assert (g.replays_matched, g.replays_by_graph_id, g.graphs_replayed) == (2, 1, 1)
    assert "graph id" in g.matched_by


def test_without_graph_ids_a_reordered_replay_stays_unmatched(tmp_path: Path) -> None:
    cap = write(tmp_path, "cap.json", capture_events([GRAPH_A]))
    exe = write(tmp_path, "exe.json", _replays_with_ids(ids=False))
    got = captured_op_names(exe, cap)
    assert [op for _, op, _ in got].count("-") == 2  # the second replay's two kernels
    g = analyze(exe, capture=cap).graphs
    assert (g.replays_matched, g.replays_by_graph_id, g.graphs_replayed) == (1, 0, None)
    assert "graph id" not in g.matched_by
