"""Each modelled op says how its FLOPs were counted (flops_convention), so that a reader comparing
them with TraceLens's sees why causal attention differs: exact pairs S(S+1)/2 against S²/2."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from _paths import REPO, trace
from attnprof.analysis import analyze
from attnprof.analysis.records.result import TraceAnalysis

TRACELENS = REPO.parent / "shared" / "checks" / "perf_model" / "tracelens_ops.jsonl"
QWEN = "AMD-AGI__TraceLens__tests__traces__mi300__Qwen_Qwen1.5-0.5B-Chat"


def _write(tmp: Path, ops: list[tuple[str, list, list, list]]) -> Path:
    events = [
        {
            "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 10 + 100 * i, "dur": 50,
            "args": {"Input Dims": dims, "Input type": types, "Concrete Inputs": conc, "External id": i + 1},
        }
        for i, (name, dims, types, conc) in enumerate(ops)
    ]  # fmt: skip
    path = tmp / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_each_family_names_its_convention(tmp_path: Path) -> None:
    q = [2, 4, 128, 64]
    bf = "c10::BFloat16"
    sdpa = "aten::_scaled_dot_product_flash_attention"
    path = _write(
        tmp_path,
        [
            ("aten::mm", [[768, 15360], [15360, 3072]], [bf, bf], ["", ""]),
            (
                sdpa,
                [q, q, q, [], [], []],
                [bf, bf, bf, "Scalar", "Scalar", "Scalar"],
                ["", "", "", "0.", "True", ""],
            ),
            (
                sdpa,
                [q, q, q, [], [], []],
                [bf, bf, bf, "Scalar", "Scalar", "Scalar"],
                ["", "", "", "0.", "False", ""],
            ),
            ("aten::add", [[8, 8], [8, 8], []], ["float", "float", "Scalar"], ["", "", "1"]),
        ],
    )
    a = analyze(path)
    assert isinstance(a, TraceAnalysis)
    got = {(o.name, o.flops): o.flops_convention for o in a.ops}
    assert got[("aten::mm", 2.0 * 768 * 15360 * 3072)] == "dense"
    s = 128
    causal = 4.0 * 2 * 4 * 64 * s * (s + 1) / 2
    assert got[(sdpa, causal)] == "causal pairs S(S+1)/2"
    assert got[(sdpa, 4.0 * 2 * 4 * 64 * s * s)] == "dense"
    assert got[("aten::add", 64.0)] == "per element"


def test_causal_attention_differs_from_tracelens_by_the_diagonal_only() -> None:
    rows = [json.loads(x) for x in TRACELENS.read_text().splitlines() if x.strip()]
    row = next(r for r in rows if r["trace"].startswith(QWEN) and r["category"] == "SDPA_fwd")
    assert row["params"]["causal"] == "True"
    s = int(row["params"]["N_Q"])
    a = analyze(trace(QWEN))
    assert isinstance(a, TraceAnalysis)
    ours = next(
        o
        for o in a.ops
        if o.name == row["op"] and json.dumps(o.input_dims) == json.dumps(ast.literal_eval(row["input_dims"]))
    )
    assert ours.flops_convention == "causal pairs S(S+1)/2"
    # S(S+1)/2 against TraceLens's S²/2: exactly (S+1)/S, 0.18% at S = 559
    assert ours.flops == pytest.approx(row["gflops"] * 1e9 * (s + 1) / s, rel=1e-9)


def test_a_gemm_of_an_unknown_dtype_has_flops_from_its_dims_and_bytes_not_measured(tmp_path: Path) -> None:
    """TraceLens models `aten::mm [[768, 15360], [15360, 3072]]` from its dims whatever the type
    string; attnprof did not (FLOPs None). FLOPs need only dims; bytes need element sizes."""
    dims = [[768, 15360], [15360, 3072]]
    odd = "c10::Float8_e8m0fnu"  # a recorded type attnprof has no element size for
    path = _write(
        tmp_path,
        [
            ("aten::mm", dims, [odd, odd], ["", ""]),
            ("aten::mm", [[64, 32], [32, 16]], ["float", "float"], ["", ""]),
        ],
    )
    a = analyze(path)
    assert isinstance(a, TraceAnalysis)
    by_m = {o.input_dims[0][0]: o for o in a.ops}
    odd_op, known_op = by_m[768], by_m[64]
    assert odd_op.flops == 2.0 * 768 * 15360 * 3072
    assert odd_op.bytes is None and odd_op.intensity is None and odd_op.bound is None
    assert odd_op.dtype == odd
    # must not: a known dtype keeps its bytes, (64*32 + 32*16 + 64*16) * 4
    assert known_op.flops == 2.0 * 64 * 16 * 32
    assert known_op.bytes == (64 * 32 + 32 * 16 + 64 * 16) * 4.0
