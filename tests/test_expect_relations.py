"""Expectations as relations, exact counts as information (issue 32): blog-cuda asserts the
blog's facts in a form a cuBLAS or cuDNN version cannot break (a Memcpy in naive and none in
place, math many times a fused backend's ops, one attention kernel per fused backend, plain
`sdpa` on whichever fused backend PyTorch picks) and prints the blog's exact counts as `info`
rows that never fail --strict."""

from __future__ import annotations

from pathlib import Path

import pytest

from _paths import trace
from attnprof.cli import main
from attnprof.compare.compare import Comparison, Row
from attnprof.compare.expect import (
    CHECKS,
    check_comparison,
    check_expectations,
    enforce,
    load_expectations,
    summarize_results,
)
from attnprof.errors import ExpectationMismatch, UserError

H100_FLASH = "AMD-AGI__TraceLens__tests__traces__h100"
A100_UNFUSED = "harryjmoss__particle_transformer"


def _cuda_row(label: str, **kw: object) -> Row:
    """A row of a blog-shaped CUDA run (the workload keys blog-cuda's [when] asks for)."""
    base: dict[str, object] = dict(
        label=label, variant=label, kind="run", source="r", device="cuda:0", dtype="bf16",
        mask="causal", gqa=False, direction="fwd", phase="prefill", median_ms=1.0,
        memcpy_per_forward=0.0, attention_kernels_per_forward=0.0, findings=[],
    )  # fmt: skip
    base.update(kw)
    return Row(**base)  # type: ignore[arg-type]


def _fused(label: str, backend: str, ops: float, family: str) -> Row:
    return _cuda_row(
        label, backend=backend, gpu_ops_per_forward=ops, attention_kernels_per_forward=1.0,
        fused_families=[family], families=[family], median_ms=0.15,
    )  # fmt: skip


def _newer_libraries() -> list[Row]:
    """The blog's run as a newer cuBLAS / cuDNN might give it: every exact count moved (a split
    GEMM adds a kernel to naive and in-place, math has 23 ops, each fused backend a helper op
    beside its one attention kernel), and plain sdpa ran cuDNN, not flash. The facts hold."""
    return [
        _cuda_row("naive", backend="aten", gpu_ops_per_forward=7.0, memcpy_per_forward=1.0),
        _cuda_row("naive-inplace", backend="aten", gpu_ops_per_forward=6.0, tensor_core_share=1.0),
        _cuda_row(
            "sdpa-math", backend="math", gpu_ops_per_forward=23.0, median_ms=3.7, tensor_core_share=0.0
        ),
        _fused("sdpa", "cudnn", 2.0, "cuDNN SDPA"),
        _fused("sdpa-flash", "flash", 2.0, "PyTorch flash (FA2)"),
        _fused("sdpa-efficient", "efficient", 2.0, "memory-efficient (xformers)"),
        _fused("sdpa-cudnn", "cudnn", 2.0, "cuDNN SDPA"),
    ]


def _comparison(rows: list[Row]) -> Comparison:
    """The rows with the findings blog-cuda asks of each (the analyser's part, not tested here)."""
    from attnprof.analysis.records.result import Finding

    spec = load_expectations("blog-cuda")
    for r in rows:
        codes = [c for e in spec.expectations if e.variant == r.label for c in e.checks.get("findings", [])]
        r.findings = [Finding(code=c, severity="info", message="") for c in dict.fromkeys(codes)]
    return Comparison(baseline="naive-inplace", rows=rows, sources=["r"])


def _checked(results, checks):  # type: ignore[no-untyped-def]
    return {(r.row, r.check): r for r in results if r.check in checks}


def test_blog_cuda_states_the_blog_as_relations_and_its_counts_as_info() -> None:
    spec = load_expectations("blog-cuda")
    assert not [e.variant for e in spec.expectations if {"gpu_ops_per_forward", "categories"} & set(e.checks)]
    info = {
        e.variant: e.info["gpu_ops_per_forward"] for e in spec.expectations if "gpu_ops_per_forward" in e.info
    }
    assert [
        info[v] for v in ("naive", "naive-inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn")
    ] == [(6, 6), (5, 5), (20, 20), (1, 1), (1, 1), (1, 1)]
    by = {e.variant: e.checks for e in spec.expectations if not e.when}
    assert by["sdpa-math"]["gpu_ops_ratio"] == ("sdpa-flash", 5.0, float("inf"))
    for v in ("sdpa", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "hub-flash"):
        assert by[v]["attention_kernels_per_forward"] == (1, 1), v
    # plain sdpa: whichever fused backend PyTorch's own dispatch picks on this build
    assert by["sdpa"]["backend"] == ["flash", "cudnn", "efficient"]
    assert by["naive"]["memcpy"] is True and by["naive-inplace"]["memcpy"] is False


def test_newer_library_counts_are_info_and_strict_still_passes() -> None:
    results = check_comparison(_comparison(_newer_libraries()), load_expectations("blog-cuda"))
    counts = summarize_results(results)
    assert counts["not met"] == 0, [
        (r.row, r.check, r.expected, r.observed) for r in results if r.status == "not met"
    ]
    enforce(results, strict=True)  # no exception: only relations are enforced
    info = _checked([r for r in results if r.status == "info"], {"gpu_ops_per_forward"})
    # the blog's counts are printed beside what this machine gave, with whether they agree
    assert (
        info[("naive", "gpu_ops_per_forward")].expected,
        info[("naive", "gpu_ops_per_forward")].observed,
    ) == (
        "6",
        "7",
    )
    assert all(r.agrees is False for r in info.values()), info
    met = _checked([r for r in results if r.status == "met"], {"backend", "gpu_ops_ratio", "memcpy"})
    assert met[("sdpa", "backend")].observed == "cudnn"  # the check says which one ran
    assert met[("sdpa", "backend")].expected == "flash or cudnn or efficient"
    ratio = met[("sdpa-math", "gpu_ops_ratio")]
    assert (ratio.expected, ratio.observed) == (">= 5x of sdpa-flash", "11.50x (23 vs 2 per forward)")
    assert met[("naive", "memcpy")].observed == "1 per forward"


@pytest.mark.parametrize(
    ("label", "change", "check"),
    [
        ("naive-inplace", {"memcpy_per_forward": 1.0}, "memcpy"),  # the Memcpy did not go away
        ("sdpa-math", {"gpu_ops_per_forward": 6.0}, "gpu_ops_ratio"),  # 6 vs 2: not many kernels
        ("sdpa-flash", {"attention_kernels_per_forward": 2.0}, "attention_kernels_per_forward"),
        ("sdpa", {"backend": "math"}, "backend"),  # PyTorch fell back to math
    ],
)
def test_a_broken_fact_still_fails_strict(label: str, change: dict[str, object], check: str) -> None:
    rows = _newer_libraries()
    for r in rows:
        if r.label == label:
            for k, v in change.items():
                setattr(r, k, v)
    results = check_comparison(_comparison(rows), load_expectations("blog-cuda"))
    failed = [(r.row, r.check) for r in results if r.status == "not met"]
    assert failed == [(label, check)], failed
    with pytest.raises(ExpectationMismatch, match=f"{label} {check}"):
        enforce(results, strict=True)


def test_a_relation_to_a_variant_not_in_the_run_is_skipped() -> None:
    rows = [r for r in _newer_libraries() if r.label != "sdpa-flash"]
    results = check_comparison(_comparison(rows), load_expectations("blog-cuda"))
    (ratio,) = [r for r in results if r.check == "gpu_ops_ratio"]
    assert (ratio.status, ratio.observed, ratio.observed_code) == (
        "skipped",
        "sdpa-flash is not in this run",
        "other_not_in_run",
    )
    rows = _newer_libraries()
    rows[4].status = "error"
    (ratio,) = [
        r
        for r in check_comparison(_comparison(rows), load_expectations("blog-cuda"))
        if r.check == "gpu_ops_ratio"
    ]
    assert (ratio.status, ratio.observed) == ("skipped", "sdpa-flash did not run: error")


def test_relations_attention_kernels_and_info_on_real_gpu_traces(tmp_path: Path) -> None:
    """Real traces (an H100 BERT with 4 flash kernels a step, an A100 model with none): the
    attention kernel count and a ratio of GPU ops between two traces, read by the analyser."""
    spec = tmp_path / "rel.toml"
    spec.write_text(f'''
[[expect]]
variant = "{H100_FLASH}*"
attention_kernels_per_forward = 4
info = {{ gpu_ops_per_forward = 60, attention_kernels_per_forward = 1 }}

[[expect]]
variant = "{A100_UNFUSED}*"
attention_kernels_per_forward = 0
gpu_ops_ratio = {{ to = "{H100_FLASH}*", min = 5 }}
''')
    results = check_expectations([trace(H100_FLASH), trace(A100_UNFUSED)], spec)
    by = {(r.variant.split("_")[0], r.check, r.status): r for r in results}
    assert by[("AMD-AGI", "attention_kernels_per_forward", "met")].observed == "4"
    assert by[("harryjmoss", "attention_kernels_per_forward", "met")].observed == "0"
    ratio = by[("harryjmoss", "gpu_ops_ratio", "met")]
    assert ratio.observed == "9.18x (560 vs 61 per forward)", ratio.observed
    info = {r.check: r for r in results if r.status == "info"}
    assert (info["gpu_ops_per_forward"].observed, info["gpu_ops_per_forward"].agrees) == ("61", False)
    assert info["attention_kernels_per_forward"].agrees is False
    enforce(results, strict=True)  # info never fails


def test_info_and_cpu_ops_ratio_on_a_live_cpu_run(
    cpu_run: tuple[Path, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real CPU run: sdpa-math's CPU ops against sdpa-flash's as a relation (63 vs 19 on torch
    2.13); a wrong exact count as info is shown and never fails --strict."""
    spec = tmp_path / "cpu_rel.toml"
    spec.write_text("""
[[expect]]
variant = "sdpa-math"
cpu_ops_ratio = { to = "sdpa-flash", min = 2 }
info = { cpu_ops_per_forward = 999 }

[[expect]]
variant = "naive"
cpu_ops_ratio = { to = "naive-inplace", min = 1.01 }
""")
    results = check_expectations(cpu_run[0], spec)
    got = {(r.row, r.check): r for r in results}
    assert got[("sdpa-math", "cpu_ops_ratio")].status == "met", got[("sdpa-math", "cpu_ops_ratio")]
    assert got[("naive", "cpu_ops_ratio")].status == "met"  # the clone's ops: naive has more
    info = got[("sdpa-math", "cpu_ops_per_forward")]
    assert (info.status, info.expected, info.agrees) == ("info", "999", False)
    assert main(["compare", str(cpu_run[0]), "--expect", str(spec), "--strict", "--no-color"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "cpu_ops_per_forward" in x)
    assert line.split()[:3] == ["sdpa-math", "cpu_ops_per_forward", "999"] and line.split()[-1] == "info"
    assert "2 met, 0 not met, 0 skipped, 1 info (not enforced)" in out
    # and the same ratio asked too high fails --strict
    spec.write_text('[[expect]]\nvariant = "sdpa-math"\ncpu_ops_ratio = { to = "sdpa-flash", min = 50 }\n')
    assert main(["compare", str(cpu_run[0]), "--expect", str(spec), "--strict", "--no-color"]) == 3
    assert "sdpa-math cpu_ops_ratio expected >= 50x of sdpa-flash" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu_ops_ratio = 5\n", 'expected { to = "VARIANT"'),
        ("gpu_ops_ratio = { to = 'sdpa-flash' }\n", "give min, max or both"),
        ("gpu_ops_ratio = { to = 'x', min = 9, max = 2 }\n", "is empty"),
        ("info = { gpu_ops = 6 }\n", "`info` takes a table of checks"),
        ("info = 6\n", "`info` takes a table of checks"),
    ],
)
def test_bad_relations_and_info_are_user_errors(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "e.toml"
    f.write_text("[[expect]]\nvariant = 'sdpa-math'\n" + text)
    with pytest.raises(UserError) as err:
        load_expectations(f)
    assert message in str(err.value), str(err.value)
    assert {"gpu_ops_ratio", "cpu_ops_ratio", "attention_kernels_per_forward"} <= set(CHECKS)


def test_a_file_of_info_only_loads() -> None:
    """An entry may state only information (a table of the blog's counts to print)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "i.toml"
        f.write_text("[[expect]]\nvariant = 'naive'\ninfo = { gpu_ops_per_forward = 6 }\n")
        (e,) = load_expectations(f).expectations
        assert (e.checks, e.info) == ({}, {"gpu_ops_per_forward": (6.0, 6.0)})
