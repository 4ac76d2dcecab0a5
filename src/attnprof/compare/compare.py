"""Side-by-side comparison of variants and traces: the orchestration. compare() builds the rows
(compare/build.py), adds the run-level checks (compare/checks.py), groups them by workload,
sets each against its baseline by the rule of compare/rank.py and picks the pairs to diff
(compare/diff.py). The records are compare/records.py's (re-exported here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from attnprof.compare.build import _analyse_into, _dedupe_labels, _row_from_result, load_sources, trace_label
from attnprof.compare.causes import why_faster
from attnprof.compare.checks import _cold_check, _fault_check, _gate, _peak_check, _total_check
from attnprof.compare.diff import diff_rows
from attnprof.compare.rank import speed
from attnprof.compare.records import (
    COMPARE_SCHEMA,
    DEFAULT_BASELINE,
    INCORRECT,
    Comparison,
    Diff,
    OpStat,
    Row,
    Source,
    TimelineOp,
)
from attnprof.errors import UserError

__all__ = [
    "COMPARE_SCHEMA",
    "DEFAULT_BASELINE",
    "INCORRECT",
    "Comparison",
    "OpStat",
    "Row",
    "Source",
    "TimelineOp",
    "against_baseline",
    "baseline_for",
    "choose_baseline",
    "compare",
    "diffs_for",
    "load_sources",
]


def choose_baseline(rows: Sequence[Row], name: str | None) -> str | None:
    """--baseline NAME matches a label, a variant or a trace name; default naive-inplace, else
    the first row with a timing, else the first row."""
    if name:
        for key in ("label", "variant"):
            for r in rows:
                if getattr(r, key) == name:
                    if r.status == INCORRECT:
                        raise UserError(
                            f"--baseline {name!r} gave incorrect output ({r.reason}); pick a correct variant"
                        )
                    return r.label
        valid = ", ".join(r.label for r in rows)
        raise UserError(f"--baseline {name!r} is not among the compared rows: {valid}")
    # never an incorrect one: a wrong answer is no yardstick
    rows = [r for r in rows if r.status != INCORRECT]
    timed = [r for r in rows if r.median_ms is not None]
    for r in timed or rows:
        if r.variant == DEFAULT_BASELINE and r.mode != "compile":
            return r.label
    pool = timed or list(rows)
    return pool[0].label if pool else None


def compare(
    paths: Iterable[str | Path | Source],
    *,
    baseline: str | None = None,
    analyse: bool = True,
    diff: bool = False,
    mixed_workloads: bool = False,
    group_workloads: bool = False,
) -> Comparison:
    """Build one Row per variant (run directories) or per trace file, then speedups against the
    baseline; with diff=True also the kernel-level diffs (see diffs_for).

    Runs of different workloads (WorkloadId: shape, GQA, KV length, dtype, device, mask, backward,
    phase) are not compared by default: that is
    a UserError. group_workloads=True compares each workload's rows against that workload's own
    baseline (reports of a folder of several shapes); mixed_workloads=True sets them all against
    one baseline, and the comparison says so (mixed_workloads, a note)."""
    sources = load_sources(paths)
    rows: list[Row] = []
    notes: list[str] = []
    for i, src in enumerate(sources):
        if src.kind == "run":
            ctx = src.context
            assert ctx is not None
            record = ctx.record
            if record.interrupted and record.resume is not None:
                pending = record.resume.pending
                notes.append(
                    f"{src.path}: interrupted run; not run yet: {', '.join(pending)} "
                    f"(attnprof run --resume {src.path})"
                )
            busy = record.environment.busy_peak_note()
            if busy and busy not in notes:
                notes.append(busy)
            for res in record.results:
                row = _row_from_result(src, res, record)
                if not analyse:
                    row.analysis_error = "trace analysis not requested"
                elif row.trace:
                    if Path(row.trace).is_file():
                        # the run's workload, peak and what the variant executes come with ctx
                        # (a model run's workload describes no traced region: no roofline)
                        _analyse_into(row, Path(row.trace), ctx, notes)
                    else:
                        row.analysis_error = f"trace {row.trace} is missing"
                        notes.append(f"{row.label}: {row.analysis_error}")
                _peak_check(row, ctx)
                _fault_check(row)
                _cold_check(row, res.timing)
                _total_check(row)
                _gate(row, res, record.workload.dtype)
                row.input = i
                rows.append(row)
        else:
            row = Row(label=trace_label(src.path), kind="trace", source=src.path, trace=src.path)
            if analyse:
                _analyse_into(row, Path(src.path), None, notes)
            else:
                row.analysis_error = "trace analysis not requested"
            row.input = i
            rows.append(row)
    _dedupe_labels(rows)
    workloads = list(dict.fromkeys(r.workload for r in rows if r.workload))
    groups: list[list[Row]] = [rows]
    if len(workloads) > 1 and not mixed_workloads:
        if not group_workloads:
            where = "; ".join(
                f"{w} in {', '.join(sorted({Path(r.source).name for r in rows if r.workload == w}))}"
                for w in workloads
            )
            raise UserError(
                f"the runs hold different workloads ({where}): compare one workload at a time, or pass "
                "--mixed-workloads to set them against one baseline anyway (the output says so)"
            )
        # each workload against its own baseline; bare traces go with the first workload
        groups = [
            [r for r in rows if r.workload == w or (r.workload is None and w == workloads[0])]
            for w in workloads
        ]
    if len(workloads) > 1 and mixed_workloads:
        notes.insert(0, f"mixed workloads: speed ratios set {' vs '.join(workloads)} against one baseline")
    baselines: dict[str, str] = {}
    base: str | None = None
    for group in groups:
        name = baseline
        if name and len(groups) > 1 and not any(name in (r.label, r.variant) for r in group):
            name = None  # --baseline names a variant another workload has: this one uses its default
        gbase = choose_baseline(group, name)
        base = base or gbase
        base_row = next((r for r in group if r.label == gbase), None)
        if base_row is not None and base_row.workload and len(groups) > 1:
            baselines[base_row.workload] = base_row.label
        against_baseline(group, base_row)
    for reason in dict.fromkeys(x for r in rows for x in r.load_reasons):
        notes.append(f"unreliable timing: {reason}")
    result = Comparison(
        baseline=base,
        rows=rows,
        sources=[s.path for s in sources],
        notes=notes,
        workloads=workloads,
        baselines=baselines,
        mixed_workloads=mixed_workloads and len(workloads) > 1,
    )
    if diff:
        result.diffs = diffs_for(result, [s.kind for s in sources])
    return result


def against_baseline(rows: Sequence[Row], base_row: Row | None) -> None:
    """Each row against the baseline, by the rule of compare/rank.py: its speedup, the claim and
    its interval or range, and (compare/causes.py) why the faster of the two beats the other."""
    if base_row is None:
        return
    for r in rows:
        r.why = None
        if r.status == INCORRECT:
            continue
        sp = speed(r, base_row)
        if sp is None:
            continue
        r.speedup = sp.ratio
        if r is base_row:
            continue
        r.speedup_claim = sp.claim
        r.speedup_low, r.speedup_high = sp.low, sp.high
        r.speedup_range_low, r.speedup_range_high = sp.range_low, sp.range_high
        if base_row.ok:
            # the claim from the faster side's view (the ratio above is the baseline's over this one's)
            fast, slow = (r, base_row) if sp.ratio > 1.0 else (base_row, r)
            r.why = why_faster(fast, slow, speed(fast, slow) or sp)


def baseline_for(comp: Comparison, row: Row) -> Row | None:
    """The row `row` was measured against: its workload's baseline in a grouped comparison."""
    label = comp.baselines.get(row.workload or "", comp.baseline)
    return next((r for r in comp.rows if r.label == label), None)


# -- kernel-level diff (the pair itself: compare/diff.py) ----------------------------------------


def diffs_for(comp: Comparison, kinds: Sequence[str]) -> list[Diff]:
    """Which pairs to diff: two traces -> that pair; two runs -> each variant present in both;
    otherwise (one run, or a mix) every row against the baseline."""
    rows = [r for r in comp.rows if r.ok or r.kind == "trace"]
    if len(comp.sources) == 2 and list(kinds) == ["trace", "trace"] and len(rows) == 2:
        return [diff_rows(rows[0], rows[1])]
    if len(comp.sources) == 2 and list(kinds) == ["run", "run"]:
        first = [r for r in rows if r.input == 0]
        second = {(r.variant, r.mode): r for r in rows if r.input == 1}
        return [diff_rows(r, second[(r.variant, r.mode)]) for r in first if (r.variant, r.mode) in second]
    out = []
    for r in rows:
        base = baseline_for(comp, r)
        if base is None or r.label == base.label:
            continue
        if r.compiled_region != base.compiled_region:
            compiled, eager = (r, base) if r.compiled_region else (base, r)
            note = (
                f"{compiled.label} runs as compiled code (one generated region in its trace): "
                f"not diffed op by op against eager {eager.label}"
            )
            if note not in comp.notes:
                comp.notes.append(note)
            continue
        out.append(diff_rows(base, r))
    return out
