"""A trace without device time is shared by CPU self time (issue 18): recorded here with
torch.profiler on a small CPU conv model, and a CPU SDPA call whose ops are attention."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnprof.analysis import analyze
from attnprof.report.analysis_view import render_analysis
from attnprof.report.console import make_console
from test_analysis_truth import kernel, launch, run

torch = pytest.importorskip("torch")


def _record(tmp_path: Path, fn: object, name: str) -> Path:
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        for _ in range(2):
            fn()  # type: ignore[operator]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                fn()  # type: ignore[operator]
    path = tmp_path / f"{name}.json"
    prof.export_chrome_trace(str(path))
    return path


def _conv_model() -> object:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 32 * 32, 10),
    )
    x = torch.randn(4, 3, 32, 32)
    return lambda: net(x)


def test_cpu_conv_model_is_shared_by_cpu_self_time_with_conv_first(tmp_path: Path) -> None:
    a = analyze(_record(tmp_path, _conv_model(), "conv"))
    sh = a.share
    assert sh.device_time_us == 0 and sh.cpu_self_time_us and sh.cpu_self_time_us > 0
    assert "CPU self time" in sh.basis
    assert sh.norm is not None and sh.elementwise is not None
    parts = {
        "conv": sh.conv.time_us,
        "gemm": sh.gemm.time_us,
        "attention": sh.attention.time_us,
        "norm": sh.norm.time_us,
        "elementwise": sh.elementwise.time_us,
        "memory": sh.memory.time_us,
        "communication": sh.communication.time_us,
        "other": sh.other.time_us,
    }
    assert max(parts, key=parts.__getitem__) == "conv"  # two convolutions outweigh one small GEMM
    assert sh.gemm.time_us > 0 and sh.elementwise.time_us > 0 and sh.attention.time_us == 0
    assert abs(sum(parts.values()) - sh.cpu_self_time_us) < 0.01 * sh.cpu_self_time_us

    console = make_console(width=100)
    with console.capture() as cap:
        render_analysis(a, console)
    text = cap.get()
    assert "CPU self time" in text and "(no device time)" in text
    by_time = next(line for line in text.splitlines() if "CPU ops by self time" in line)
    assert "conv" in by_time.split(":", 1)[1].split(",")[0]  # the costliest op first, not the most frequent


def test_cpu_sdpa_call_is_attention(tmp_path: Path) -> None:
    q, k, v = (torch.randn(1, 4, 128, 32) for _ in range(3))
    a = analyze(_record(tmp_path, lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), "sdpa"))
    assert a.share.attention.pct is not None and a.share.attention.pct > 50


def test_a_trace_with_device_time_keeps_the_device_share(tmp_path: Path) -> None:
    a = run(tmp_path, [launch(0, 1), kernel("ampere_sgemm_128x64_tn", 10, 50, 1)])
    assert a.share.device_time_us == 50 and a.share.cpu_self_time_us is None and a.share.norm is None
    assert "CPU self time" not in a.share.basis
