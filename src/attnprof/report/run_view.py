"""Terminal rendering for `attnprof run` and `attnprof list` (rich)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from attnprof.records import is_incorrect
from attnprof.report.console import make_console, print_table
from attnprof.units import fmt_bytes, fmt_ms, fmt_num
from attnprof.workload import WorkloadId

if TYPE_CHECKING:
    from attnprof.records import RunRecord, RunResult
    from attnprof.variants.registry import Decision, Variant
    from attnprof.workload import Workload

__all__ = ["ProgressReporter", "render_list", "render_run"]


def _console(no_color: bool, stderr: bool = False) -> Console:
    return make_console(no_color=no_color, stderr=stderr)


class ProgressReporter:
    """A progress bar on stderr while variants run; callable as the harness's progress hook."""

    def __init__(self, *, total: int, workload: Workload, quiet: bool, no_color: bool) -> None:
        self.console = _console(no_color, stderr=True)
        self.quiet = quiet
        self.workload = workload
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=quiet,
        )
        self.task = self.progress.add_task("starting", total=total)

    def __enter__(self) -> ProgressReporter:
        if not self.quiet:
            self.console.print(f"[bold]attnprof run[/]: {self.workload.describe()}")
        self.progress.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.progress.stop()

    def __call__(self, label: str, stage: str) -> None:
        if stage == "done":
            self.progress.advance(self.task)
        else:
            self.progress.update(self.task, description=f"{label}: {stage}")


def _versus(record: RunRecord, out: Path) -> tuple[dict[str, str], list[str]]:
    """Each result's "vs fastest" cell, by compare's rows and compare/rank.py's rule (the ranked
    timing: forward + backward with --backward; a tie only where no variant is faster beyond
    noise), and the reasons the run's timing is unreliable (as compare and report say them)."""
    from attnprof.compare.compare import Source, compare
    from attnprof.compare.rank import fastest, ranked_median
    from attnprof.run_context import RunContext

    ctx = RunContext.from_record(record, out)
    comp = compare([Source(path=str(out), kind="run", context=ctx)], analyse=False)
    cells: dict[str, str] = {}
    top = fastest(comp.rows)
    if top is not None:
        best = ranked_median(top.fastest) or 0.0
        tied = {r.label for r in top.tied}
        untold = {r.label for r in top.untold}
        for r in comp.rows:
            mine = ranked_median(r)
            if not r.ok or mine is None or best <= 0:
                continue
            ratio = mine / best
            if r is top.fastest:
                cells[r.label] = "[green]fastest[/]"
            elif r.label in tied:
                cells[r.label] = f"[green]tie {fmt_num(ratio, '.2f')}x[/]"
            elif r.label in untold:
                cells[r.label] = f"{fmt_num(ratio, '.2f')}x ?"
            else:
                cells[r.label] = f"[{'yellow' if ratio < 2 else 'red'}]{fmt_num(ratio, '.2f')}x[/]"
    reasons = list(dict.fromkeys(x for r in comp.rows for x in r.load_reasons))
    return cells, reasons


def _total_cell(r: RunResult) -> str:
    """Forward + backward as one call, marked where it is shorter than the backward alone (a
    measurement problem: compare's TOTAL_BELOW_BACKWARD)."""
    if r.timing_total is None:
        return "-"
    text = fmt_ms(r.timing_total.median_ms)
    if r.timing_bwd is not None and r.timing_total.median_ms < r.timing_bwd.median_ms:
        text += " [red]< bwd![/]"
    return text


def render_run(record: RunRecord, out: Path, *, no_color: bool = False) -> None:
    from attnprof.compare.rank import MIN_INTERVAL_SAMPLES

    console = _console(no_color)
    backward = record.workload.backward
    versus_cells, unreliable = _versus(record, out)
    if unreliable:  # first, above the table: its ranking cannot be trusted as it stands
        console.print(f"[bold yellow]unreliable: {'; '.join(unreliable)}[/]")
    wide = console.width >= 130
    table = Table(header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    columns = [
        ("variant", "left"),
        ("backend", "left"),
        ("fwd median\n± IQR" if backward else "median ± IQR", "right"),
    ]
    if backward:
        columns += [("bwd median", "right"), ("fwd+bwd", "right"), ("grad err", "right")]
    # the long headers on two lines: a numeric column is as wide as its widest line
    columns.insert(5 if backward else 3, ("fwd+bwd\nvs fastest" if backward else "vs fastest", "right"))
    columns += [("peak mem", "right"), ("max err", "right")] + ([("trace", "left")] if wide else [])
    for col, justify in columns:
        # numbers never wrap ("62.1" on one line, "ms" on the next): print_table leaves a
        # column out instead, and names it
        table.add_column(col, justify=justify, no_wrap=justify == "right")  # type: ignore[arg-type]
    traces: list[str] = []
    for r in record.results:
        if not r.ran or r.timing is None:
            continue
        versus = versus_cells.get(r.label, "-")
        if r.incorrect:
            versus = "[bold red]incorrect[/]"
        err = "-"
        if r.accuracy:
            acc = r.accuracy
            # a max error over the finite values of a non-finite output says nothing: say what it holds
            err = acc.error_text()
            err += "" if acc.ok else " [red]✗[/]"
        mem = fmt_bytes(r.memory.peak_bytes if r.memory else None)
        row = [
            r.label + (" [yellow]~[/]" if r.timing.noisy else ""),
            r.backend or "-",
            f"{fmt_ms(r.timing.median_ms)} ± {fmt_ms(r.timing.iqr_ms)}",
        ]
        if not backward:
            row.append(versus)
        if backward:
            grads = list(r.grad_accuracy.values())
            grad_err = "-"
            if grads:
                grad_err = max(grads, key=lambda a: a.rank_error()).error_text() + (
                    "" if all(a.ok for a in grads) else " [red]✗[/]"
                )
            row += [
                fmt_ms(r.timing_bwd.median_ms) if r.timing_bwd else "-",
                _total_cell(r),
                grad_err,
            ]
            row.insert(5, versus)
        row += [mem, err]
        if wide:
            row.append(Path(r.trace).name if r.trace else "-")
        elif r.trace:
            traces.append(r.trace)
        table.add_row(*row)
    print_table(console, table)
    for r in record.results:
        if r.timing_total and r.timing_bwd and r.timing_total.median_ms < r.timing_bwd.median_ms:
            console.print(
                f"[yellow]{r.label}: forward + backward as one call is shorter than the backward alone: "
                "a measurement problem, not a speed[/]"
            )
    for r in record.results:
        if r.ran and r.accuracy is not None and is_incorrect(r.accuracy):
            console.print(f"[bold red]{r.label}: {r.accuracy.failure(record.workload.dtype)}[/]")
    for r in record.results:  # slow calls, above-peak, CUDA: on screen, not only in run.json
        told = r.accuracy.failure(record.workload.dtype) if r.accuracy and is_incorrect(r.accuracy) else None
        for w in r.warnings:
            if not w.startswith("noisy") and w != told:
                console.print(f"[yellow]warning: {r.label}: {w}[/]", markup=True)
    _render_workload_notes(console, record)
    busy = record.environment.busy_peak_note()
    if busy:
        console.print(f"[yellow]{busy}[/]")
    for r in record.results:
        if r.status == "unsupported":
            console.print(f"[dim]not available: {r.reason}[/]")
        elif not r.ran:
            console.print(f"[yellow]{r.label}: {r.status}: {r.reason}[/]")
    if traces:
        console.print(
            f"[dim]traces: {out}/traces/ ({', '.join(Path(t).name.split('_', 4)[-1].removesuffix('.json.gz') for t in traces)})[/]"
        )
    env = record.environment
    ok = [r for r in record.results if r.status == "ok" and r.timing and not r.incorrect]
    threads = ok[0].timing.threads if ok and ok[0].timing else env.threads
    # every field that changes the work, as compare and the reports write it (WorkloadId.label)
    ident = WorkloadId.of(record.workload)
    shape = f"{ident.shape}{ident.kind}"
    console.print(
        f"[dim]{shape} "
        f"{record.workload.dtype} on {env.device_name} ({env.device}, {threads} threads), torch {env.torch_version}; "
        f"~ marks noisy timings (IQR > 10% of median)[/]"
    )
    # a legend, not a verdict: each cell is its own claim (compare/rank.py's rule); "tie: ..." as
    # the line's first words read as the run's verdict beside a table showing 1.11x
    legend = (
        "each variant's time over the fastest's; 'tie': the ratio's 95% interval holds 1x and no "
        "variant is faster beyond noise"
    )
    if any(c.endswith(" ?") for c in versus_cells.values()):
        legend += f"; ?: too few samples to tell (a 95% interval needs {MIN_INTERVAL_SAMPLES} a side)"
    console.print(f"[dim]vs fastest ({'forward + backward' if backward else 'forward'}): {legend}[/]")
    console.print(
        f"run directory: {out}  (run.json, traces/, tables/; open a trace in https://ui.perfetto.dev)"
    )


def _render_workload_notes(console: Any, record: RunRecord) -> None:
    """Under the table: per direction the FLOP convention and TFLOP/s, and for a mask other than
    plain causal (or decode) how each variant expressed it and what that let it skip."""
    w = record.workload
    ran = [r for r in record.results if r.ran]
    if w.backward and ran:
        conv = next((r.flop_convention for r in ran if r.flop_convention), None)
        parts = []
        for r in ran:
            f = fmt_num(r.tflops_useful, ".3g") if r.tflops_useful is not None else "-"
            b = fmt_num(r.tflops_useful_bwd, ".3g") if r.tflops_useful_bwd is not None else "-"
            parts.append(f"{r.label} {f} fwd / {b} bwd")
        console.print(f"[dim]useful TFLOP/s: {'; '.join(parts)}; {conv}[/]")
        for r in ran:
            bad = [n for n, a in r.grad_accuracy.items() if not a.ok]
            if bad:
                console.print(f"[bold red]{r.label}: incorrect gradient(s) {', '.join(bad)}[/]")
    if w.mask in ("", "causal") and w.phase != "decode":
        return
    useful = record.results[0].flops_useful if record.results else 0.0
    dense = 4.0 * w.batch * w.heads * w.seq * w.kv_seq * w.head_dim
    share = f"{fmt_num(useful / dense, '.1%')} of pairs visible" if dense else ""
    console.print(f"mask {w.mask or ('causal' if w.causal else 'none')}: {share}")
    for r in ran:
        line = f"  {r.label}: {r.mask_path or 'unknown'}"
        if r.block_sparsity is not None:
            line += f"; skips {fmt_num(r.block_sparsity, '.1%')} of its blocks"
        if r.flops_executed and dense:
            line += f"; computes {fmt_num(r.flops_executed / dense, '.0%')} of the dense FLOPs"
        console.print(line)
    sdpa = next((r for r in ran if r.backend_rules), None)
    if sdpa is not None:
        rules = "; ".join(f"{b} {why}" for b, why in sdpa.backend_rules.items())
        pick = f"PyTorch's dispatch picks {sdpa.pytorch_choice}; " if sdpa.pytorch_choice else ""
        console.print(f"  [dim]SDPA for this mask: {pick}{rules}[/]")


def render_list(
    workload: Workload, rows: list[tuple[Variant, Decision]], *, json_out: bool, no_color: bool
) -> None:
    if json_out:
        import json

        import msgspec

        data: list[dict[str, Any]] = [
            {
                "variant": v.name,
                "available": d.accepted,
                "reason": d.reason,
                "layout": v.layout,
                "description": v.description,
                "reason_code": msgspec.to_builtins(d.reason_code),
            }
            for v, d in rows
        ]
        sys.stdout.write(
            json.dumps({"device": workload.device, "dtype": workload.dtype, "variants": data}, indent=2)
            + "\n"
        )
        return
    console = _console(no_color)
    table = Table(header_style="bold", pad_edge=False)
    table.add_column("variant")
    table.add_column("here", justify="center")
    table.add_column("what it is / why not", overflow="fold")
    for v, d in rows:
        mark = "[green]yes[/]" if d.accepted else "[red]no[/]"
        why = (d.reason or "unavailable").removeprefix(f"{v.name}: ")
        table.add_row(v.name, mark, v.description if d.accepted else why)
    console.print(f"variants on {workload.device} ({workload.dtype}):")
    print_table(console, table)
    console.print("[dim]your own: --variants path/to/file.py:function (takes q, k, v, is_causal=, scale=)[/]")
