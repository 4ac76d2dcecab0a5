"""The per-op performance model: hand-computed FLOPs and bytes per formula, torch's
FlopCounterMode on traces recorded here, TraceLens's published figures on the shared traces,
and the roofs (no percentage without a known peak)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from _paths import REPO, TRACES, trace
from attnprof.analysis import analyze
from attnprof.analysis.perf.op_model import OpCost, decode_inputs, model_op
from attnprof.analysis.records.result import TraceAnalysis
from attnprof.formulas import attention_pairs

TRACELENS = REPO.parent / "shared" / "checks" / "perf_model" / "tracelens_ops.jsonl"


def cost(name: str, dims: list[Any], types: list[str], concrete: list[str] | None = None) -> OpCost:
    sig = (json.dumps(dims).encode(), json.dumps(types).encode(), json.dumps(concrete or []).encode())
    args = decode_inputs(sig)
    assert args is not None
    c = model_op(name, args)
    assert c is not None, name
    return c


BF, F32 = "c10::BFloat16", "float"


# -- formulas, by hand ------------------------------------------------------------------------
def test_gemm_flops_and_bytes_by_hand() -> None:
    # addmm(bias[N], a[M, K], b[K, N]) in bf16: 2*M*N*K + M*N (bias); A, B, bias, C at 2 bytes
    c = cost("aten::addmm", [[512], [141, 512], [512, 512], [], []], [BF, BF, BF, "Scalar", "Scalar"])
    assert c.flops == 2 * 141 * 512 * 512 + 141 * 512
    assert c.bytes == 2 * (512 + 141 * 512 + 512 * 512 + 141 * 512)
    assert c.dtype == "bf16" and c.family == "gemm" and c.matrix
    # linear(x[2, 3, 8], w[5, 8]) without bias: M = 6
    c = cost("aten::linear", [[2, 3, 8], [5, 8], []], [F32, F32, ""])
    assert c.flops == 2 * 6 * 5 * 8 and c.bytes == 4 * (48 + 40 + 30)
    # bmm and matmul with broadcasting: [4, 1, 6, 8] @ [3, 8, 2] -> batch 4*3
    assert cost("aten::bmm", [[7, 6, 8], [7, 8, 2]], [F32, F32]).flops == 7 * 2 * 6 * 2 * 8
    assert cost("aten::matmul", [[4, 1, 6, 8], [3, 8, 2]], [F32, F32]).flops == 12 * 2 * 6 * 2 * 8
    # fp8 _scaled_mm: 1-byte operands, out_dtype 15 (bf16) written at 2 bytes
    e4 = "c10::Float8_e4m3fn"
    c = cost(
        "aten::_scaled_mm",
        [[64, 128], [128, 32], [], [], [], [], [], []],
        [e4, e4, F32, F32, "", "", "Scalar", "Scalar"],
        ["", "", "", "", "", "", "15", "False"],
    )
    assert c.flops == 2 * 64 * 32 * 128 and c.dtype == "fp8"
    assert c.bytes == 64 * 128 + 128 * 32 + 2 * 64 * 32


def test_attention_pairs_causal_alignments_and_windows() -> None:
    # Sq 3, Skv 5: top-left rows see 1, 2, 3 keys; bottom-right rows see 3, 4, 5
    assert attention_pairs(3, 5, causal="top-left") == 6
    assert attention_pairs(3, 5, causal="bottom-right") == 12
    assert attention_pairs(3, 5) == 15
    # Sq 5 > Skv 3: top-left rows 1, 2, 3, 3, 3; bottom-right rows 0, 0, 1, 2, 3
    assert attention_pairs(5, 3, causal="top-left") == 12
    assert attention_pairs(5, 3, causal="bottom-right") == 6
    # a causal sliding window of 2 keys back (flash_attn window (2, 0)) on a square 6 x 6:
    # rows see 1, 2, 3, 3, 3, 3
    assert attention_pairs(6, 6, window_left=2, window_right=0) == 15
    # every case against a brute force over the (query, key) grid
    for sq, skv in ((1, 9), (9, 1), (7, 7), (4, 11), (11, 4)):
        for causal in (None, "top-left", "bottom-right"):
            for wl, wr in ((None, None), (3, None), (2, 0), (1, 4)):
                off = skv - sq if causal == "bottom-right" or (causal is None and wl is not None) else 0
                right = 0 if causal else wr
                want = sum(
                    1
                    for i in range(sq)
                    for j in range(skv)
                    if (wl is None or j >= i + off - wl) and (right is None or j <= i + off + right)
                )
                assert attention_pairs(sq, skv, causal=causal, window_left=wl, window_right=wr) == want


def test_sdpa_causal_gqa_decode_and_backward_by_hand() -> None:
    # SDPA is_causal on Sq 128 != Skv 256 is top-left: rows see 1..128 keys
    q, kv = [2, 8, 128, 64], [2, 2, 256, 64]  # GQA: 8 query heads, 2 KV heads
    c = cost(
        "aten::scaled_dot_product_attention",
        [q, kv, kv, [], [], [], [], []],
        [BF, BF, BF, "", "Scalar", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "", "0.", "True", "", "True"],
    )
    pairs = 128 * 129 // 2
    assert c.flops == 4 * 2 * 8 * pairs * 64 and "causal top-left" in c.formula and "GQA 8/2" in c.formula
    # bytes: Q and O with 8 heads, K and V with 2
    assert c.bytes == 2 * (2 * 8 * 128 * 64 * 2 + 2 * 2 * 256 * 64 * 2)
    assert not c.decode
    # the efficient kernel's custom_mask_type 2 (CausalBias lower_right) is bottom-right
    c = cost(
        "aten::_efficient_attention_forward",
        [[1, 128, 4, 32], [1, 256, 4, 32], [1, 256, 4, 32], [], [], [], [], [], [], [], [], [], [], []],
        [BF, BF, BF] + [""] * 11,
        ["", "", "", "", "", "", "", "", "0.", "2", "True", "", "", ""],
    )
    assert c.flops == 4 * 4 * attention_pairs(128, 256, causal="bottom-right") * 32
    assert "causal bottom-right" in c.formula
    # decode: one query against 4096 keys is judged by bytes (K and V read once)
    c = cost(
        "aten::_scaled_dot_product_flash_attention",
        [[1, 32, 1, 128], [1, 8, 4096, 128], [1, 8, 4096, 128], [], [], [], []],
        [BF, BF, BF, "Scalar", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "0.", "False", "False", ""],
    )
    assert c.decode and "decode" in c.formula and c.flops == 4 * 32 * 4096 * 128
    # flash_attn's sliding window (window_size 64, 0) with causal: bottom-right rows of <= 65 keys
    c = cost(
        "flash_attn::_flash_attn_forward",
        [[1, 512, 4, 64], [1, 512, 4, 64], [1, 512, 4, 64], [], [], [], [], [], [], [], []],
        [BF, BF, BF] + ["Scalar"] * 8,
        ["", "", "", "0.", "0.125", "True", "64", "0", "0.", "", "False"],
    )
    assert c.flops == 4 * 4 * attention_pairs(512, 512, window_left=64, window_right=0) * 64
    assert attention_pairs(512, 512, window_left=64, window_right=0) == 65 * 512 - 64 * 65 // 2
    # backward: 2.5x the forward's FLOPs over the same pairs
    c = cost(
        "aten::_scaled_dot_product_flash_attention_backward",
        [[1, 2, 64, 16]] * 6 + [[]] * 9,
        [F32] * 6 + ["Scalar"] * 9,
        [""] * 11 + ["True"] + [""] * 3,
    )
    assert c.flops == 2.5 * 4 * 2 * (64 * 65 // 2) * 16 and "bwd" in c.formula


def test_conv_groups_stride_and_backward_by_hand() -> None:
    # conv2d x[2, 8, 15, 15], w[16, 4, 3, 3], stride 2, padding 1, groups 2: out 8 x 8
    c = cost(
        "aten::convolution",
        [[2, 8, 15, 15], [16, 4, 3, 3], [16], [], [], [], [], [], []],
        [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "2"],
    )
    assert c.flops == 2 * 2 * 16 * 8 * 8 * 4 * 9
    assert c.bytes == 4 * (2 * 8 * 15 * 15 + 16 * 4 * 9 + 16 + 2 * 16 * 8 * 8)
    # backward: input and weight gradients, each the forward's count
    c = cost(
        "aten::convolution_backward",
        [[2, 16, 8, 8], [2, 8, 15, 15], [16, 4, 3, 3], [], [], [], [], [], [], [], []],
        [F32, F32, F32, "ScalarList"] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar", "ScalarList"],
        ["", "", "", "[16]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "2", "[True, True, False]"],
    )
    assert c.flops == 2 * (2 * 2 * 16 * 8 * 8 * 4 * 9) and "dgrad + wgrad" in c.formula


def test_unknown_ops_and_unreadable_inputs_are_unmodelled() -> None:
    args = decode_inputs((b"[[4, 4]]", b'["float"]', b"[]"))
    assert args is not None and model_op("aten::some_custom_op", args) is None
    # varlen attention whose k and v carry no dtype: not read (tests/test_op_varlen_flex.py has
    # the varlen model itself)
    args = decode_inputs((b"[[100, 4, 64], [100, 4, 64], [100, 4, 64]]", b'["c10::BFloat16"]', b"[]"))
    assert args is not None and model_op("flash_attn::_flash_attn_varlen_forward", args) is None
    # a GEMM whose inner dimensions disagree is not counted
    args = decode_inputs((b"[[4, 5], [6, 7]]", b'["float", "float"]', b"[]"))
    assert args is not None and model_op("aten::mm", args) is None


# -- TraceLens's published figures on the shared traces ---------------------------------------
# where attnprof counts on purpose otherwise (docs/analysis.md "Per-op performance model"):
# norms (7 FLOPs per element with an affine weight and bias) and copies (they compute nothing)
_DIFFERS = {"aten::layer_norm", "aten::native_layer_norm", "aten::copy_"}


def _tracelens_rows() -> dict[str, list[dict[str, Any]]]:
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for line in TRACELENS.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            by_trace.setdefault(row["trace"], []).append(row)
    return by_trace


def _tracelens_names() -> list[str]:
    """The traces TraceLens's figures name; where the file is missing, its own name, so that
    collecting this module never fails (tests/conftest.py stops a session without ../shared) and
    the one test that reads it says which file is missing."""
    return sorted(_tracelens_rows()) if TRACELENS.is_file() else [TRACELENS.name]


@pytest.mark.parametrize("name", _tracelens_names())
def test_agrees_with_tracelens_where_both_model_the_op(name: str) -> None:
    rows = _tracelens_rows()  # a missing file fails here, by its path
    a = analyze(TRACES / name)
    assert isinstance(a, TraceAnalysis)
    ours = {(o.name, json.dumps(o.input_dims), json.dumps(o.input_types)): o for o in a.ops}
    compared = 0
    for row in rows[name]:
        dims = json.dumps(ast.literal_eval(row["input_dims"]))
        types = json.dumps(ast.literal_eval(row["input_types"]))
        o = ours.get((row["op"], dims, types))
        assert o is not None, (row["op"], dims, types)
        if row["op"] in _DIFFERS:
            continue
        compared += 1
        assert o.flops == pytest.approx(row["gflops"] * 1e9, rel=0.01), row["op"]
        # TraceLens keys shapes by strides too: two of its rows can be one of ours; its count
        # then is part of ours, and the medians are of different sets of calls
        assert o.count >= row["count"]
        if o.count == row["count"] and o.tflops is not None:
            assert o.tflops == pytest.approx(row["tflops_median"], rel=0.10), row["op"]
    assert compared >= 6


# -- the whole trace, the roofs, nesting -------------------------------------------------------
def test_roofs_from_the_table_and_none_for_an_unknown_device(tmp_path: Path) -> None:
    a = analyze(
        TRACES / "AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    )
    assert isinstance(a, TraceAnalysis) and a.perf_model is not None
    big = next(o for o in a.ops if o.name == "aten::addmm" and o.input_dims[0] == [30522])
    assert big.peak_tflops == 989.0 and big.peak_tbps == 3.35 and big.pct_of_bound is not None
    # nested ops (addmm inside linear) are listed but counted once in the summary
    assert any(o.nested for o in a.ops) and any(not o.nested for o in a.ops)
    pm = a.perf_model
    outer_flops = sum(o.flops * o.count for o in a.ops if not o.nested)
    assert pm.model_flops == pytest.approx(outer_flops)
    parts = (pm.compute_bound_pct or 0) + (pm.memory_bound_pct or 0) + (pm.bound_unknown_pct or 0)
    assert parts + (pm.unmodelled.pct or 0) == pytest.approx(100.0, abs=0.05)
    assert pm.mfu_pct == pytest.approx(100.0 * (pm.achieved_tflops or 0) / 989.0, rel=1e-3)
    # the same trace on a device the table does not name: rates, and no percentage anywhere
    doc = _json(
        TRACES / "AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    )
    for p in doc.get("deviceProperties", []):
        p["name"] = "Acme Accelerator 9000"
    path = tmp_path / "acme.json"
    path.write_text(json.dumps(doc))
    b = analyze(path)
    assert isinstance(b, TraceAnalysis) and b.perf_model is not None
    assert all(o.pct_of_bound is None and o.bound is None and o.peak_tflops is None for o in b.ops)
    assert any(o.tflops for o in b.ops) and b.perf_model.mfu_pct is None
    assert "no bf16 peak is known" in b.perf_model.note
    # --peak replaces the roofs
    c = analyze(path, peak=(100.0, 1.0))
    assert isinstance(c, TraceAnalysis) and c.perf_model is not None
    assert all(o.peak_tflops == 100.0 and o.peak_tbps == 1.0 for o in c.ops)
    assert c.perf_model.peak_source == "--peak" and c.perf_model.mfu_pct is not None


def _json(path: Path) -> dict[str, Any]:
    import gzip

    with gzip.open(path, "rt") as f:
        return json.load(f)  # type: ignore[no-any-return]


def test_a_trace_without_shapes_says_so() -> None:
    a = analyze(TRACES / "HazyResearch__zoology__trace.json.gz")
    assert isinstance(a, TraceAnalysis) and a.perf_model is not None
    if not a.perf_model.shapes_recorded:
        assert a.ops == [] and "record_shapes=True" in a.perf_model.note
        assert a.perf_model.unmodelled.pct in (100.0, None)


# -- torch's FlopCounterMode on traces recorded here (CPU) -------------------------------------
def test_gemm_and_conv_flops_agree_with_flop_counter_mode(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    a, b = torch.randn(24, 40), torch.randn(40, 56)
    x3, y3 = torch.randn(3, 24, 40), torch.randn(3, 40, 8)
    lin = torch.nn.Linear(40, 72, bias=False)
    conv = torch.nn.Conv2d(8, 12, kernel_size=3, stride=2, padding=1, groups=4, bias=False)
    img = torch.randn(2, 8, 17, 17)

    calls = {
        "aten::mm": lambda: torch.mm(a, b),
        "aten::bmm": lambda: torch.bmm(x3, y3),
        "aten::linear": lambda: lin(a),
        "aten::convolution": lambda: conv(img),
    }
    with torch.no_grad():
        for name, fn in calls.items():
            with FlopCounterMode(display=False) as counter:
                fn()
            want = counter.get_total_flops()
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                fn()
            path = tmp_path / f"{name.split('::')[1]}.json"
            prof.export_chrome_trace(str(path))
            got = analyze(path)
            assert isinstance(got, TraceAnalysis)
            op = next(o for o in got.ops if o.name == name)
            assert op.flops == want, name
            assert op.cpu_time_us is not None and op.device_time_us is None


# -- the command ------------------------------------------------------------------------------
def _cli(*args: str) -> Any:
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-c", "from attnprof.cli import main; main()", "analyze", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_analyze_ops_prints_the_per_shape_table_and_json_has_the_fields() -> None:
    qwen = str(TRACES / "AMD-AGI__TraceLens__tests__traces__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    p = _cli("--ops", "--top", "3", qwen)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "Per-op performance model" in out and "MFU" in out and "aten::linear" in out
    assert "%roof" in out and "Not modelled:" in out
    # the JSON contract gains ops and perf_model, with the fields the issue lists
    p = _cli("--json", qwen)
    doc = json.loads(p.stdout)
    assert doc["schema"] == "attnprof.analysis/1"
    op = doc["ops"][0]
    for key in (
        "name",
        "input_dims",
        "input_types",
        "count",
        "device_time_us",
        "cpu_time_us",
        "flops",
        "bytes",
        "tflops",
        "tbps",
        "intensity",
        "bound",
        "pct_of_bound",
        "formula",
    ):
        assert key in op, key
    pm = doc["perf_model"]
    for key in ("model_flops", "mfu_pct", "peak_tflops", "peak_source", "unmodelled"):
        assert key in pm, key


def test_peak_option_bad_input_is_one_line_and_exit_2() -> None:
    bert = str(
        TRACES / "AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert-small-uncased__1016001.json.gz"
    )
    for bad in ("989", "989,x", "-1,2", "0,3"):
        p = _cli("--ops", "--peak", bad, bert)
        assert p.returncode == 2, (bad, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "--peak" in lines[0] and "Traceback" not in p.stderr
    p = _cli("--ops", "--peak", "100,1", bert)
    assert p.returncode == 0 and "--peak" in p.stdout


# -- findings from the model: each must fire, and must not --------------------------------------
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}


def one_op_trace(
    tmp_path: Path,
    name: str,
    dims: list[Any],
    types: list[str],
    kernel_us: float,
    concrete: list[str] | None = None,
    device: dict[str, Any] | None = H100,
    kernel: str = "some_kernel",
) -> Path:
    """A trace file of one op with recorded inputs that launches one kernel of `kernel_us`
    (tests/test_op_varlen_flex.py builds its traces with it too)."""
    args = {
        "External id": 1,
        "Input Dims": dims,
        "Input type": types,
        "Concrete Inputs": concrete or [""] * len(dims),
    }
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 0, "dur": 50, "args": args},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "dur": 5,
            "args": {"correlation": 7, "External id": 1},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": kernel,
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": kernel_us,
            "args": {"correlation": 7, "External id": 1, "device": 0},
        },
    ]
    doc: dict[str, Any] = {"traceEvents": events}
    if device is not None:
        doc["deviceProperties"] = [device]
    p = tmp_path / f"{name.split('::')[-1]}_{kernel_us:g}.json"
    p.write_text(json.dumps(doc))
    return p


def _one_op(
    tmp_path: Path,
    name: str,
    dims: list[Any],
    types: list[str],
    kernel_us: float,
    concrete: list[str] | None = None,
    device: dict[str, Any] | None = H100,
) -> TraceAnalysis:
    """The analysis of one_op_trace's trace."""
    a = analyze(one_op_trace(tmp_path, name, dims, types, kernel_us, concrete, device))
    assert isinstance(a, TraceAnalysis)
    return a


def test_memory_bound_gemm_fires_on_a_skinny_gemm_and_not_on_a_square_one(tmp_path: Path) -> None:
    skinny = _one_op(tmp_path, "aten::mm", [[16, 4096], [4096, 4096]], [BF, BF], 40.0)
    f = skinny.finding("MEMORY_BOUND_GEMM")
    assert f is not None and f.evidence["shapes"][0]["intensity"] < f.evidence["ridge_flop_per_byte"]
    assert f.evidence["share_pct"] == 100.0
    square = _one_op(tmp_path, "aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF], 400.0)
    assert square.ops[0].bound == "compute" and square.finding("MEMORY_BOUND_GEMM") is None
    # no roof known: no bound, so no finding
    acme = _one_op(
        tmp_path, "aten::mm", [[16, 4096], [4096, 4096]], [BF, BF], 40.0, device={"id": 0, "name": "Acme X1"}
    )
    assert acme.ops[0].bound is None and acme.finding("MEMORY_BOUND_GEMM") is None


_SDPA_TYPES = [BF, BF, BF, "Scalar", "Scalar", "Scalar", "Scalar"]


def test_attention_below_roof_fires_when_slow_and_not_when_near_the_roof(tmp_path: Path) -> None:
    q = [4, 16, 2048, 64]
    dims = [q, q, q, [], [], [], []]
    conc = ["", "", "", "0.", "False", "False", ""]
    # 68.7 GFLOP: 231 us is 30% of 989 TFLOP/s
    slow = _one_op(tmp_path, "aten::_scaled_dot_product_flash_attention", dims, _SDPA_TYPES, 2000.0, conc)
    f = slow.finding("ATTENTION_BELOW_ROOF")
    assert f is not None and f.evidence["shapes"][0]["pct_of_bound"] < 30
    fast = _one_op(tmp_path, "aten::_scaled_dot_product_flash_attention", dims, _SDPA_TYPES, 100.0, conc)
    assert fast.ops[0].pct_of_bound is not None and fast.ops[0].pct_of_bound > 30
    assert fast.finding("ATTENTION_BELOW_ROOF") is None


def test_decode_below_bandwidth_fires_when_far_from_the_bandwidth_roof_only(tmp_path: Path) -> None:
    dims = [[1, 32, 1, 128], [1, 8, 8192, 128], [1, 8, 8192, 128], [], [], [], []]
    conc = ["", "", "", "0.", "False", "False", ""]
    # about 33.6 MB read: 10 us at 3.35 TB/s
    slow = _one_op(tmp_path, "aten::_scaled_dot_product_flash_attention", dims, _SDPA_TYPES, 200.0, conc)
    assert slow.ops[0].decode and slow.ops[0].bound == "memory"
    assert slow.finding("DECODE_BELOW_BANDWIDTH") is not None and slow.finding("ATTENTION_BELOW_ROOF") is None
    fast = _one_op(tmp_path, "aten::_scaled_dot_product_flash_attention", dims, _SDPA_TYPES, 15.0, conc)
    assert fast.finding("DECODE_BELOW_BANDWIDTH") is None


def test_op_above_roof_is_flagged_and_never_printed_silently(tmp_path: Path) -> None:
    # 137 GFLOP in 50 us is 2.7x the H100's 989 TFLOP/s: a wrong peak or model
    a = _one_op(tmp_path, "aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF], 50.0)
    f = a.finding("OP_ABOVE_ROOF")
    assert f is not None and f.severity == "error" and f.evidence["shapes"][0]["pct_of_bound"] > 100
    from attnprof.report.console import terminal_words
    from attnprof.report.perf_tables import ops_table

    row = ops_table(a.ops, terminal_words()).rows[0]
    assert any(c.emphasis == "alarm" and "!" in c for c in row)
    # fp32 above the fp32 roof: the hint names TF32
    f32 = _one_op(tmp_path, "aten::mm", [[4096, 4096], [4096, 4096]], [F32, F32], 400.0)
    g = f32.finding("OP_ABOVE_ROOF")
    assert g is not None and "TF32" in g.message
    ok = _one_op(tmp_path, "aten::mm", [[4096, 4096], [4096, 4096]], [BF, BF], 200.0)
    assert ok.finding("OP_ABOVE_ROOF") is None


# -- reports ----------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["en", "id", "th"])
def test_trace_report_has_the_per_shape_table_and_roofline_in_each_language(
    tmp_path: Path, lang: str
) -> None:
    pytest.importorskip("matplotlib")
    from attnprof.cli import main
    from attnprof.report.i18n import Translator

    t = Translator(lang)
    qwen = TRACES / "AMD-AGI__TraceLens__tests__traces__mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    html = tmp_path / f"r.{lang}.html"
    assert main(["report", str(qwen), "--lang", lang, "-o", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    section = page[page.index('<section id="perf">') :]
    section = section[: section.index("</section>")]
    assert t("perf.h") in section and t("perf.col.pct_bound") in section
    roof = section[section.index('<figure class="plot roofline">') :]
    assert "<svg" in roof[:2000] and t("perf.axis.intensity").split(" (")[0] in roof
    assert section.count("<tr") >= 11  # the header and the 15 largest shapes
    md = tmp_path / f"r.{lang}.md"
    assert main(["report", str(qwen), "--lang", lang, "-o", str(md)]) == 0
    text = md.read_text(encoding="utf-8")
    assert f"## {t('perf.h')}" in text and "aten::linear" in text


def test_vector_ops_and_grouped_gemm_by_hand() -> None:
    # broadcast mul [16, 559, 1024] * [16, 559, 1] fp32: one FLOP per output element; bytes are
    # both inputs as recorded plus the output
    c = cost("aten::mul", [[16, 559, 1024], [16, 559, 1]], [F32, F32])
    assert c.flops == 16 * 559 * 1024 and c.bytes == 4 * (2 * 16 * 559 * 1024 + 16 * 559)
    # a 0-dim double tensor does not promote a float tensor's result to double
    c = cost("aten::add", [[8, 4], [], []], [F32, "double", "Scalar"])
    assert c.bytes == 4 * 32 + 8 + 4 * 32
    # copy_ between dtypes reads the source and writes the destination, and computes nothing
    c = cost("aten::copy_", [[10, 10], [10, 10], []], [BF, F32, "Scalar"])
    assert (c.flops, c.bytes) == (0.0, 2 * 100 + 4 * 100) and c.family == "copy"
    # mean over the last dim with keepdim: the output has one element per row
    c = cost(
        "aten::mean", [[6, 5, 8], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""]
    )
    assert c.flops == 240 and c.bytes == 4 * (240 + 30)
    # layer norm with an affine weight and bias: 7 FLOPs per element
    c = cost(
        "aten::layer_norm",
        [[2, 3, 16], [], [16], [16], [], []],
        [BF, "ScalarList", BF, BF, "Scalar", "Scalar"],
    )
    assert c.flops == 7 * 96 and c.bytes == 2 * (96 + 16 + 16 + 96)
    # embedding: the indices read, each row read and written
    c = cost(
        "aten::embedding", [[1000, 64], [4, 9], [], [], []], [F32, "long int", "Scalar", "Scalar", "Scalar"]
    )
    assert c.flops == 0 and c.bytes == 8 * 36 + 2 * 36 * 64 * 4
    # MoE: the tokens of every expert [M, K] against the experts' weights [G, K, N]
    c = cost("aten::_grouped_mm", [[512, 256], [8, 256, 128], [8], [], []], [BF, BF, "int", "", "Scalar"])
    assert c.flops == 2 * 512 * 256 * 128
    # (the group offsets, G integers, are bookkeeping, not the GEMM's traffic)
    assert c.bytes == 2 * (512 * 256 + 8 * 256 * 128 + 512 * 128)


def test_legacy_cudnn_convolution_backward_by_hand() -> None:
    # PyTorch <= 1.10: cudnn_convolution_backward_input(self_size, grad_output, weight, ...) with
    # no Concrete Inputs: the input gradient from grad_output's spatial size and the weight
    c = cost(
        "aten::cudnn_convolution_backward_input",
        [[], [32, 2048, 7, 7], [2048, 512, 1, 1], [], [], [], [], [], [], []],
        ["GenericList", F32, F32, "GenericList", "GenericList", "GenericList", "Int", "Bool", "Bool", "Bool"],
    )
    assert c.flops == 2 * 32 * 2048 * 49 * 512 and "dgrad" in c.formula
    # cudnn_convolution_backward(input, grad_output, weight, ...): both gradients when the
    # output_mask is not recorded
    c = cost(
        "aten::cudnn_convolution_backward",
        [[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1]] + [[]] * 8,
        [F32, F32, F32] + ["GenericList"] * 3 + ["Int", "Bool", "Bool", "Bool", "GenericList"],
    )
    assert c.flops == 2 * (2 * 32 * 2048 * 49 * 512) and "dgrad + wgrad" in c.formula


def test_chunk_boundaries_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # the per-op model and the idle stage read ops in chunks (bounded temporaries on a large
    # trace); a chunk of 3 cuts this trace's ops, keys and launches at many places
    from attnprof.analysis.perf import perf_model
    from attnprof.analysis.timeline import idle

    path = trace("facebookresearch__HolisticTraceAnalysis__tests__data__amd_trace__mi250_minitoy")
    whole = analyze(path)
    assert isinstance(whole, TraceAnalysis) and whole.perf_model is not None
    assert len(whole.ops) > 3 and whole.perf_model.unmodelled.time_us > 0
    monkeypatch.setattr(perf_model, "_CHUNK", 3)
    monkeypatch.setattr(idle, "_CHUNK", 3)
    cut = analyze(path)
    assert isinstance(cut, TraceAnalysis) and cut.to_dict() == whole.to_dict()
