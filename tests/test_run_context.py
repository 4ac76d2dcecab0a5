"""RunContext: run.json decoded once into what analysis, compare and report need, and
`materialises` recorded per variant instead of guessed back from the FLOP counts."""

from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from attnprof.records import RunRecord, encode_json
from attnprof.run_context import RunContext


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunRecord]:
    """A real run with no mask: useful and executed FLOPs are the same for every variant, so
    only the recorded field can say which one materialises the scores."""
    from attnprof.harness.run import RunOptions, run
    from attnprof.workload import Workload

    out = tmp_path_factory.mktemp("full") / "r"
    record = run(
        Workload(batch=1, heads=2, seq=64, head_dim=16, causal=False),
        ["naive", "sdpa-flash"],
        out=out,
        options=RunOptions(time_budget_s=0.05, min_samples=3),
    )
    return out, record


def _without_materialises(run_dir: Path, dest: Path) -> Path:
    """A copy of the run as an attnprof that predates the field wrote it."""
    shutil.copytree(run_dir, dest)
    doc = msgspec.json.decode((dest / "run.json").read_bytes())
    for res in doc["results"]:
        del res["materialises"]
    (dest / "run.json").write_bytes(encode_json(doc))
    return dest


def test_materialises_is_recorded_even_without_a_mask(full_run: tuple[Path, RunRecord]) -> None:
    out, record = full_run
    naive, flash = (next(r for r in record.results if r.variant == v) for v in ("naive", "sdpa-flash"))
    assert naive.status == flash.status == "ok"
    # the FLOP counts cannot tell them apart: every pair is visible without a mask
    assert naive.flops_executed == naive.flops_useful == flash.flops_executed == flash.flops_useful
    ctx = RunContext.load(out)
    assert ctx.variant("naive").materialises is True  # type: ignore[union-attr]
    assert ctx.variant("sdpa-flash").materialises is False  # type: ignore[union-attr]
    assert ctx.for_trace(out / str(naive.trace)) == ctx.variant("naive")
    assert not ctx.workload.causal and ctx.device == "cpu" and not ctx.model_run


def test_old_record_without_the_field_reads_as_unknown(
    cpu_run: tuple[Path, RunRecord], tmp_path: Path
) -> None:
    """A causal run's naive executes more FLOPs than are useful; an old record still says
    "unknown" rather than materialising, and its traces analyse as before."""
    from attnprof.analysis import analyze

    out, record = cpu_run
    naive = next(r for r in record.results if r.label == "naive")
    assert naive.materialises is True and naive.flops_executed > naive.flops_useful
    old = _without_materialises(out, tmp_path / "old")
    ctx = RunContext.load(old)
    assert {v.materialises for v in ctx.variants} == {None}
    roof_new = analyze(out / str(naive.trace)).roofline
    roof_old = analyze(old / str(naive.trace), context=ctx).roofline
    assert roof_new is not None and roof_old is not None
    # the executed FLOPs come from what the variant recorded, in both
    assert roof_old.flops_executed == roof_new.flops_executed == naive.flops_executed


def test_peak_and_its_provenance_come_from_the_environment(
    cpu_run: tuple[Path, RunRecord], tmp_path: Path
) -> None:
    from attnprof.analysis import analyze

    out, record = cpu_run
    ctx = RunContext.load(out)
    env = record.environment
    assert env.peak_tflops and env.peak_source  # the harness measures one on CPU
    assert ctx.peak is not None and ctx.peak.tflops == env.peak_tflops
    assert ctx.peak.source == f"run.json peak_tflops ({env.peak_source})"
    trace = out / str(record.results[0].trace)
    roof = analyze(trace, context=ctx).roofline
    assert roof is not None and (roof.peak_tflops, roof.peak_source) == (
        ctx.peak.tflops,
        ctx.peak.source,
    )
    # a bare copy of the same trace has no run beside it: no peak, no workload, no roofline
    bare = tmp_path / trace.name
    shutil.copyfile(trace, bare)
    assert RunContext.beside_trace(bare) is None
    assert analyze(bare).roofline is None


def test_a_report_decodes_run_json_once(
    full_run: tuple[Path, RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """report -> compare -> analysis of every trace: one read of run.json in all."""
    from attnprof.report.data import build_report_data

    out, record = full_run
    reads: list[Path] = []
    original = Path.read_bytes

    def counting(self: Path) -> bytes:
        if self.name == "run.json":
            reads.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    data = build_report_data(out, expect=None)
    assert len(reads) == 1
    assert [r.label for r in data.comparison.rows] == [r.label for r in record.results]
    assert all(r.analysis_error is None for r in data.comparison.rows)  # every trace was analysed


def test_a_user_variant_records_materialises_as_unknown(tmp_path: Path) -> None:
    """Its score tensors are an assumption for the memory gate, not knowledge."""
    from attnprof.variants.registry import get_variant

    f = tmp_path / "mine.py"
    f.write_text("def attn(q, k, v, is_causal=False, scale=None):\n    return q\n")
    user = get_variant(f"{f}:attn")
    assert user.materialises and user.known_materialises is None
    assert get_variant("naive").known_materialises is True
    assert get_variant("sdpa-flash").known_materialises is False
