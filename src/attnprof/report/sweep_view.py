"""Terminal views of sweeps and their stores: the progress of `attnprof sweep` and its summary,
the results of `attnprof results`, the recommendations of `attnprof recommend`.

Tables are report/table.py's model drawn with rich, each fitting 100 columns; the recommendation
table is the store report's own (store_report.recommendation_table) in the terminal's words.
Progress goes to stderr, everything else to the console given.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.text import Text

from attnprof.compare.rank import MIN_INTERVAL_SAMPLES, NOTABLE
from attnprof.records import variant_label
from attnprof.report.console import make_console, print_table, terminal_words
from attnprof.report.store_report import recommendation_table, short_variant
from attnprof.report.table import Cell, Column, Table, fit, to_rich
from attnprof.units import fmt_bytes, fmt_count, fmt_err, fmt_ms, fmt_num, fmt_ratio
from attnprof.workload import WorkloadId

if TYPE_CHECKING:
    from attnprof.recommend import Recommendation
    from attnprof.store import StoredResult
    from attnprof.sweep import SweepPlan, SweepSummary

__all__ = [
    "SweepProgress",
    "print_recommendations",
    "print_results",
    "print_summary",
    "results_tables",
    "summary_dict",
]

# the sweep views' tables: a bold title over a bare head rule, no outer edges
_LAYOUT: dict[str, Any] = {
    "title_justify": "left",
    "title_style": "bold",
    "box": box.SIMPLE_HEAD,
    "show_edge": False,
    "pad_edge": False,
    "collapse_padding": True,
    "header_style": "bold",
}


# -- sweep ------------------------------------------------------------------------------------


class SweepProgress:
    """A rich progress bar on stderr: done/total, failures so far, ETA. It also counts, for the
    line printed when the sweep is interrupted."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Any = None
        self.task: Any = None
        self.total: int | None = None
        self.already = 0
        self.ran = 0

    def start(self, plan: SweepPlan) -> None:
        self.total, self.already = len(set(plan.keys)), plan.already
        err = make_console(stderr=True)
        already = f", {plan.already} already in the store" if plan.already else ""
        for note in plan.notes:
            err.print(f"[dim]{note}[/dim]")
        err.print(f"sweep: {len(set(plan.keys))} jobs{already}, {len(plan.todo)} to run")
        if not self.enabled or not plan.todo:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("sweep"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failures: {task.fields[failures]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[last]}", style="dim"),
            console=err,
            transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task("sweep", total=len(plan.todo), failures=0, last="")

    def update(self, row: Any, summary: SweepSummary) -> None:
        self.ran = summary.ran
        if self.progress is None:
            return
        last = f"{row.variant} S={row.workload.seq} {row.workload.dtype}: {row.result.status}"
        self.progress.update(self.task, advance=1, failures=summary.failures, last=last)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def summary_dict(s: SweepSummary) -> dict[str, Any]:
    """The summary as `attnprof sweep --json` prints it."""
    return {
        "store": str(s.store),
        "jobs": s.total,
        "already_stored": s.already,
        "ran": s.ran,
        "finished_elsewhere": s.not_run,
        "by_status": dict(sorted(s.counts.items())),
        "failures": s.failures,
        "slowest": [{"wall_s": round(t, 3), "job": what} for t, what in s.slowest],
        "elapsed_s": round(s.elapsed_s, 2),
        "sweep_id": s.sweep_id,
    }


def print_summary(s: SweepSummary, con: Console | None = None) -> None:
    con = con or make_console()
    counts = ", ".join(f"{n} {status}" for status, n in sorted(s.counts.items())) or "nothing new"
    con.print(f"[bold]{s.ran} job(s) run[/bold] in {fmt_num(s.elapsed_s, '.1f')} s: {counts}")
    if s.already:
        con.print(f"{s.already} of {s.total} job(s) were already in the store (resumed)")
    if s.not_run:
        con.print(
            f"{s.not_run} job(s) were left to another sweep on the same store (finished or running there)"
        )
    if s.slowest:
        table = Table(columns=[Column("wall s", numeric=True), Column("job")], title="slowest jobs")
        for wall, what in s.slowest:
            table.add([Cell(fmt_num(wall, ".2f"), wall, "s"), what])
        con.print(to_rich(table, show_edge=False))
    store = str(s.store)
    con.print(f"store: {store}  (attnprof results --store {store}; attnprof recommend --store {store})")


# -- results ----------------------------------------------------------------------------------

_BAD_STATUS = {
    "crashed",
    "timeout",
    "error",
    "oom",
    "incorrect",
}  # red; any other status that is not ok: yellow


def _status_emphasis(status: str) -> str:
    return "" if status == "ok" else ("bad" if status in _BAD_STATUS else "warn")


def _label(r: StoredResult) -> str:
    """Every built-in name (22 characters at most, ":compile" included) whole; a user's longer
    file.py:function keeps both ends (the json and csv output have the full name)."""
    return fit(variant_label(short_variant(r.variant), r.mode), 32)


def _shape(r: StoredResult) -> str:
    """A configuration in a few characters: its workload's label without the device, which the
    row beside it names (workload.py WorkloadId.label)."""
    w = WorkloadId.of(r)
    return f"{w.shape} {w.dtype}{w.kind}"


def _device(r: StoredResult) -> str:
    return f"{r.device} ({r.device_name})" if r.device_name else r.device


def _config_key(r: StoredResult) -> tuple[Any, ...]:
    """One configuration: the workload's identity on one device (by its name too: two hosts'
    cuda:0 are two devices)."""
    return (WorkloadId.of(r), r.device_name)


def _speed_emphasis(ratio: float) -> str:
    """A time relative to the fastest of its configuration (1.0 = the fastest)."""
    return "good" if ratio < NOTABLE else ("warn" if ratio < 2 else "bad")


def _tflops(x: float | None) -> Cell | None:
    if x is None:
        return None
    # at most 7 characters, the header's width
    return Cell(fmt_num(x, ".3g") if x >= 0.001 else fmt_num(x, ".1e"), x, "TFLOP/s")


def results_tables(rows: list[StoredResult]) -> list[Table | Text]:
    """The results as tables that fit 100 columns, one per device (named in its title), each
    configuration a bold line over its variants; then dim lines: why the rows that are not ok
    are not, and what the notation means.

    The store gives the rows sorted by device and configuration. A row that is not ok has no
    timing: its status, emphasised, stands where the timing would."""
    rows = sorted(rows, key=_device)  # stable: the store's order of configurations stays
    fastest: dict[tuple[Any, ...], float] = {}
    n_ok: dict[tuple[Any, ...], int] = {}
    for r in rows:
        if r.status == "ok" and r.median_ms and r.accuracy_ok is not False:  # wrong answers set no pace
            key = _config_key(r)
            fastest[key] = min(fastest.get(key, r.median_ms), r.median_ms)
            n_ok[key] = n_ok.get(key, 0) + 1

    def timing(r: StoredResult) -> Cell:
        if r.status != "ok" or r.median_ms is None:
            return Cell(r.status, emphasis=_status_emphasis(r.status))
        text = fmt_ms(r.median_ms) + (f" ± {fmt_ms(r.iqr_ms)}" if r.iqr_ms is not None else "")
        if r.load is not None and r.load.unreliable:
            text += " !"  # timed while the machine was busy (legend)
        key = _config_key(r)
        if r.accuracy_ok is False or key not in fastest:
            return Cell(text, r.median_ms, "ms", "bad")
        emphasis = _speed_emphasis(r.median_ms / fastest[key]) if n_ok[key] > 1 else ""
        return Cell(text, r.median_ms, "ms", emphasis)

    def err(r: StoredResult) -> Cell | None:
        if r.max_abs_err is None:
            return None
        if r.accuracy_ok is False:  # the mark says it without colour too
            return Cell(fmt_err(r.max_abs_err) + " ✗", r.max_abs_err, emphasis="bad")
        return Cell(fmt_err(r.max_abs_err), r.max_abs_err)

    def ops(r: StoredResult) -> Cell | None:
        n = r.gpu_ops_per_forward if r.device.startswith("cuda") else r.cpu_ops_per_forward
        return None if n is None else Cell(fmt_count(n), n)

    def peak(r: StoredResult) -> Cell | None:
        return None if r.peak_bytes is None else Cell(fmt_bytes(r.peak_bytes), r.peak_bytes, "B")

    # (column, cell); a column with no value in any row is left out; only the timing wraps, and
    # only where 100 columns cannot hold a row
    columns: list[tuple[Column, Callable[[StoredResult], str | Cell | None]]] = [
        (Column("variant", no_wrap=True), lambda r: "  " + _label(r)),
        (Column("backend", no_wrap=True), lambda r: r.backend),
        (Column("median ± IQR", numeric=True), timing),
        (Column("ops", numeric=True, no_wrap=True), ops),
        (Column("peak", numeric=True, no_wrap=True), peak),
        (Column("max err", numeric=True, no_wrap=True), err),
        (Column("TFLOP/s", numeric=True, no_wrap=True), lambda r: _tflops(r.tflops)),
    ]
    cells = [[cell(r) for r in rows] for _, cell in columns]
    keep = [i for i, col in enumerate(cells) if any(c is not None and str(c) for c in col)]

    out: list[Table | Text] = []
    table = Table(columns=[])
    for n, r in enumerate(rows):
        if n == 0 or _device(r) != _device(rows[n - 1]):
            table = Table(columns=[columns[i][0] for i in keep], title=f"results on {_device(r)}")
            out.append(table)
        if n == 0 or _config_key(r) != _config_key(rows[n - 1]):
            table.add([Cell(_shape(r), emphasis="strong"), *[""] * (len(keep) - 1)])
        table.add([cells[i][n] for i in keep])

    why: dict[tuple[str, str, str], int] = {}
    for r in rows:
        if r.status != "ok":
            lines = (r.reason or "").strip().splitlines()
            reason = lines[0].removeprefix(f"{r.variant}: ")[:240] if lines else "no reason given"
            if r.status == "incorrect" and not lines:  # the harness's verdict is the stored check
                worst = fmt_num(r.max_abs_err, ".3g") if r.max_abs_err is not None else "unknown"
                reason = f"outside the {r.dtype} tolerance (max abs error {worst})"
            k = (_label(r), r.status, reason)
            why[k] = why.get(k, 0) + 1
    for (label, status, reason), count in why.items():
        times = f" ({count} rows)" if count > 1 else ""
        out.append(Text(f"{label}{times}: {status}: {reason}", style="dim"))
    legend = ["shape lines: B,H,S,D dtype"]
    if any(r.kv_heads != r.heads or r.kv_seq != r.seq for r in rows):
        legend.append("/N after H or S: K/V heads or length where they differ")
    if not all(r.causal for r in rows):
        legend.append("full: no causal mask")
    if any(columns[i][0].header == "ops" for i in keep):
        legend.append("ops: profiled operators per forward")
    if any(r.accuracy_ok is False for r in rows):
        legend.append("✗: outside the accuracy tolerance")
    if n_ok and max(n_ok.values()) > 1:
        legend.append("times coloured by how they compare with the fastest of their shape")
    if any(r.load is not None and r.load.unreliable for r in rows):
        legend.append("!: timed while the machine was busy (other processes, load): not a sound comparison")
    out.append(Text("; ".join(legend), style="dim"))
    return out


def print_results(con: Console, rows: list[StoredResult], store: Path) -> None:
    if rows:
        for item in results_tables(rows):
            if isinstance(item, Table):
                print_table(con, to_rich(item, **_LAYOUT))
            else:
                con.print(item)
    con.print(f"{len(rows)} result(s) in {store}")


# -- recommend --------------------------------------------------------------------------------


def print_recommendations(con: Console, recs: list[Recommendation]) -> None:
    """One table per device (named in its title), each fitting 100 columns; then where pinning
    the fastest SDPA backend differs from PyTorch's default, the counts, and the legend."""
    from attnprof.recommend import SDPA_BACKENDS

    groups: dict[tuple[str, str], list[Recommendation]] = {}
    for r in recs:
        groups.setdefault((r.bucket.device, r.bucket.device_name), []).append(r)
    for (device, name), group in groups.items():
        table = recommendation_table(group, terminal_words(), compact=True)
        table.title = (
            f"fastest per bucket on {device} ({name})" if name else f"fastest per bucket on {device}"
        )
        print_table(con, to_rich(table, **_LAYOUT))
    for r in recs:
        if r.pin_gain is None or r.default_variant is None or r.best_sdpa is None:
            continue
        if r.default_variant == next(v for v, b in SDPA_BACKENDS.items() if b == r.best_sdpa):
            continue
        if r.verdict == "unknown":
            con.print(
                Text(
                    f"{r.bucket.label()}: timing unreliable ({'; '.join(r.unreliable[:2])}): no verdict on "
                    "pinning; sweep again on a quiet machine",
                    style="yellow",
                )
            )
            continue
        if r.same_kernel:
            con.print(
                Text(
                    f"{r.bucket.label()}: PyTorch's default ({r.default_variant}) already runs "
                    f"{r.best_sdpa}, the fastest pinned backend: nothing to pin",
                    style="dim",
                )
            )
            continue
        ci = (
            f", 95% interval {fmt_ratio(r.pin_gain_low)}–{fmt_ratio(r.pin_gain_high)}x"
            if r.pin_gain_low is not None
            else f", too few samples to tell ({r.pin_samples or 0} a side"
            + (
                f", the ratios range {fmt_ratio(r.pin_gain_range_low)}–{fmt_ratio(r.pin_gain_range_high)}x"
                if r.pin_gain_range_low is not None
                else ""
            )
            + f"; a 95% interval needs {MIN_INTERVAL_SAMPLES})"
        )
        what = "pin it" if r.verdict == "pin" else "keep PyTorch's choice"
        if r.verdict == "default" and (r.pin_gain_low or 0.0) > 1.0:
            what += " (inside the 10% that separate CPU jobs drift)"
        con.print(
            Text(
                f"{r.bucket.label()}: {r.best_sdpa} pinned is {fmt_ratio(r.pin_gain)}x the speed of "
                f"PyTorch's default ({r.default_variant}, ran {r.default_backend or '?'}){ci}: {what}",
                style="yellow" if r.verdict == "pin" else "dim",
            )
        )
    busy = [r for r in recs if r.unreliable]
    if busy:
        con.print(
            Text(
                f"timed while the machine was busy in {len(busy)} of {len(recs)} bucket(s) "
                f"({'; '.join(busy[0].unreliable[:2])}{'; ...' if len(busy[0].unreliable) > 2 else ''}): their "
                "margins count as ties and pinning gets "
                "no verdict",
                style="yellow",
            )
        )
    n = sum(r.differs for r in recs)
    pins = sum(r.verdict == "pin" for r in recs)
    con.print(
        f"{len(recs)} bucket(s); PyTorch's own dispatch differs from the fastest SDPA backend in {n}; "
        f"pinning beats it beyond noise in {pins}."
    )
    b = recs[0].bucket
    con.print(
        Text(
            f"S≤{b.seq_max}: query lengths {b.seq_min} to {b.seq_max}; "
            "n: configurations in the bucket; margin: runner-up "
            "time / fastest time (geometric mean over the bucket's configurations); PyTorch: the "
            "backend PyTorch's own dispatch ran ((sdpa): measured as the sdpa variant); pin?: "
            "whether pinning the best SDPA backend beats that, by this factor (its 95% interval "
            "must exclude 1, on CPU also 1.1: separate jobs drift that much); ~: within the "
            "timing noise (on CPU also within 10%), or the same kernel (sdpa and the backend it "
            "ran pinned), a tie; busy: timed while the machine was busy, "
            "no verdict.",
            style="dim",
        )
    )
