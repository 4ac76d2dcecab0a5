"""nn.Module frames (python_function "nn.Module: Name_N", with_modules=True) as --region
candidates: on the kernelforge transformer (three steps of one MultiheadAttention) the region's
device ops are those launched inside the module's frames, counted here from the JSON alone."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from _paths import trace
from attnprof.analysis import analyze
from attnprof.errors import UserError
from test_analysis_truth import ev, kernel, launch, run

KERNELFORGE = "marcalph__kernelforge__lambda-logs__log__transformer"
MHA = "nn.Module: MultiheadAttention_0"


def _launched_inside(events: list[dict[str, Any]], frame_name: str) -> tuple[int, int]:
    """(frames, device ops whose launch call lies inside one of them on its thread)."""
    frames = [e for e in events if e.get("cat") == "python_function" and e.get("name") == frame_name]
    corr = {
        e["args"]["correlation"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "correlation" in e.get("args", {})
        and any(f["tid"] == e["tid"] and f["ts"] <= e["ts"] <= f["ts"] + f["dur"] for f in frames)
    }
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    return len(frames), sum(1 for e in device if e.get("args", {}).get("correlation") in corr)


def test_an_nn_module_frame_is_a_region() -> None:
    path = trace(KERNELFORGE)
    with gzip.open(path) as f:
        events = json.loads(f.read())["traceEvents"]
    frames, ops = _launched_inside(events, MHA)
    r = analyze(path, region=MHA).regions[0]
    assert (r.name, r.selector, r.instances) == (MHA, "exact", frames) and frames == 3
    assert r.gpu_ops_per_instance * r.instances == ops > 0
    # a regex finds the module too, when no annotation or op matches it
    assert analyze(path, region="MultiheadAttention").regions[0].instances == frames


def test_an_annotation_of_the_same_name_comes_first(tmp_path: Path) -> None:
    events = [
        ev("block", "user_annotation", 0, 100),
        ev("nn.Module: block", "python_function", 200, 100),
        launch(10, 1),
        kernel("ampere_sgemm_128x64_nn", 20, 50, 1),
    ]
    # the annotation (0 to 100 us) holds the launch; the module frame (200 to 300 us) holds none
    for region in ("block", "bl.ck"):
        r = run(tmp_path, events, region=region).regions[0]
        assert (r.instances, r.gpu_ops_per_instance) == (1, 1), region


def test_without_module_frames_the_region_is_refused_in_one_line(tmp_path: Path) -> None:
    events = [ev("aten::mm", "cpu_op", 0, 10), launch(2, 1), kernel("ampere_sgemm_128x64_nn", 20, 50, 1)]
    with pytest.raises(UserError, match=r"matches no annotation, op or nn\.Module"):
        run(tmp_path, events, region="nn.Module: Linear_0")
