"""`attnprof sweep`, `attnprof results` and `attnprof recommend`: thin layers over attnprof.sweep,
attnprof.store and attnprof.recommend. Progress goes to stderr, results to stdout."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attnprof.cli import app
from attnprof.cli.options import NoColor, Variants
from attnprof.errors import Interrupted, UserError
from attnprof.extras import require

if TYPE_CHECKING:
    from attnprof.recommend import Bucket, Recommendation
    from attnprof.store import StoredResult
    from attnprof.sweep import SweepConfig, SweepPlan, SweepSummary

__all__: list[str] = []

StoreOpt = Annotated[Path, typer.Option("--store", help="SQLite results store.")]

# how the comma list of each list-valued flag parses; the flag is --NAME with "-" for "_"
_LIST_KINDS = {
    **dict.fromkeys(("batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim"), "int"),
    **dict.fromkeys(("causal", "compile", "backward"), "bool"),
    "mask": "semi",
    **dict.fromkeys(("phase", "dtype", "variants", "variant", "status", "device", "retry"), "str"),
}


def _parse_list(name: str, raw: str | list[str]) -> list[Any]:
    """The values of the list flag --NAME (a comma list, or repeated: a list of them)."""
    from attnprof.sweep.grid import parse_bools, parse_ints, parse_masks, parse_strs

    parsers: dict[str, Callable[[str, str], list[Any]]] = {
        "int": parse_ints,
        "bool": parse_bools,
        "str": parse_strs,
        # masks hold commas (padding=512,384): separated by ';' or given again
        "semi": parse_masks,
    }
    if _LIST_KINDS[name] == "semi" and isinstance(raw, list):
        raw = ";".join(raw)
    text = ",".join(raw) if isinstance(raw, list) else raw
    return parsers[_LIST_KINDS[name]](text, "--" + name.replace("_", "-"))


def _config(config: Path | None, axes: dict[str, Any], settings: list[tuple[str, str, Any]]) -> SweepConfig:
    """The config file (or the defaults) with the grid axes and (section, key, value) settings
    given on the command line put over it; None means not given."""
    from attnprof.sweep.grid import load_config

    cfg = load_config(config)
    for name, raw in axes.items():
        if raw is not None:
            setattr(cfg.grid, name, _parse_list(name, raw))
    for section, key, value in settings:
        if value is not None:
            setattr(getattr(cfg, section), key, value)
    return cfg


@app.command("sweep")
def sweep_command(
    config: Annotated[Path | None, typer.Argument(help="A sweep TOML file (flags override it).")] = None,
    batch: Annotated[str | None, typer.Option("-b", "--batch", help="Batch sizes, e.g. 1,8.")] = None,
    heads: Annotated[str | None, typer.Option("-H", "--heads", help="Query heads, e.g. 8,16.")] = None,
    kv_heads: Annotated[
        str | None, typer.Option("--kv-heads", help="KV heads (GQA); 0 = same as heads.")
    ] = None,
    seq: Annotated[str | None, typer.Option("-s", "--seq", help="Query lengths, e.g. 512,1024,2048.")] = None,
    kv_seq: Annotated[str | None, typer.Option("--kv-seq", help="KV lengths; 0 = same as seq.")] = None,
    head_dim: Annotated[str | None, typer.Option("-d", "--head-dim", help="Head dims, e.g. 64,128.")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Dtypes, e.g. fp32,bf16.")] = None,
    causal: Annotated[str | None, typer.Option("--causal", help="true, false or both.")] = None,
    mask: Annotated[
        list[str] | None,
        typer.Option(
            "--mask",
            help="Masks (repeat, or separate by ';'): causal, none, sliding=W, prefix=P, document=N, "
            "padding=L1,L2,..., alibi, bias.",
        ),
    ] = None,
    backward: Annotated[
        str | None, typer.Option("--backward", help="false, true or both (forward + backward).")
    ] = None,
    phase: Annotated[
        str | None,
        typer.Option("--phase", help="prefill, decode or both; in decode --seq is the new queries per step."),
    ] = None,
    variants: Variants = None,
    compile: Annotated[
        str | None, typer.Option("--compile", help="false, true or both (torch.compile twins).")
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="auto (default: cuda if there is a GPU), cpu, cuda (one worker per GPU) or cuda:N.",
        ),
    ] = None,
    store: Annotated[
        Path | None, typer.Option("--store", help="SQLite results store (default ./attnprof-results.db).")
    ] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="local or ray.")] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster address (default: a local instance).")
    ] = None,
    ray_num_cpus: Annotated[float | None, typer.Option("--ray-num-cpus", help="CPUs per Ray task.")] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Worker processes (default: one per GPU, 1 on CPU).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="Seconds per job before its worker is killed.")
    ] = None,
    keep_traces: Annotated[
        Path | None, typer.Option("--keep-traces", help="Keep every job's trace under this folder.")
    ] = None,
    tensorboard: Annotated[
        Path | None,
        typer.Option(
            "--tensorboard",
            metavar="DIR",
            help="Also write every job's traces as tensorboard_trace_handler does, one sub-folder per job.",
        ),
    ] = None,
    time_budget: Annotated[
        float | None, typer.Option("--time-budget", help="Seconds of clean timing per job.")
    ] = None,
    min_samples: Annotated[
        int | None, typer.Option("--min-samples", help="Fewest timing samples per job.")
    ] = None,
    warmup: Annotated[
        float | None, typer.Option("--warmup", help="Seconds of warm-up before each job's clean timing.")
    ] = None,
    no_profile: Annotated[
        bool, typer.Option("--no-profile", help="Time only: no profiler pass (no ops/forward).")
    ] = False,
    retry: Annotated[
        str | None,
        typer.Option("--retry", help="Run jobs stored with these statuses again, e.g. crashed,timeout."),
    ] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the expanded grid and job count; run nothing.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Run a grid of (configuration, variant) jobs in isolated workers; store every result; resume."""
    from attnprof.sweep import run_sweep
    from attnprof.sweep.grid import expand, render_config

    axes = {
        "batch": batch, "heads": heads, "kv_heads": kv_heads, "seq": seq, "kv_seq": kv_seq,
        "head_dim": head_dim, "dtype": dtype, "causal": causal, "variants": variants, "compile": compile,
        "mask": mask, "backward": backward,
        "phase": phase.replace("both", "prefill,decode") if phase else None,
    }  # fmt: skip
    settings: list[tuple[str, str, Any]] = [
        ("grid", "device", device),
        ("sweep", "store", str(store) if store else None),
        ("sweep", "executor", executor),
        ("sweep", "ray_address", ray_address),
        ("sweep", "ray_num_cpus", ray_num_cpus),
        ("sweep", "workers", workers),
        ("sweep", "timeout_s", timeout),
        ("sweep", "keep_traces", str(keep_traces) if keep_traces else None),
        ("sweep", "retry", _parse_list("retry", retry) if retry else None),
        ("run", "time_budget_s", time_budget),
        ("run", "min_samples", min_samples),
        ("run", "warmup_s", warmup),
        ("run", "profile", False if no_profile else None),
        ("run", "tensorboard_dir", str(tensorboard.resolve()) if tensorboard else None),
    ]
    cfg = _config(config, axes, settings)
    if cfg.sweep.executor not in ("local", "ray"):
        raise UserError(f"unknown --executor {cfg.sweep.executor!r}: use local or ray")
    if cfg.sweep.workers < 0:
        raise UserError("--workers must be >= 1 (or 0 for the default)")
    if cfg.sweep.timeout_s < 0:
        raise UserError("--timeout must be positive seconds (0 for none)")
    if print_config:
        jobs, notes = expand(cfg)
        sys.stdout.write(render_config(cfg, jobs, notes))
        return

    require("torch", "attnprof sweep")  # --print-config above needs none: it only expands the grid
    reporter = _Progress(enabled=not no_progress and not json_out)
    try:
        summary = run_sweep(cfg, on_start=reporter.start, on_result=reporter.update)
    except KeyboardInterrupt:
        reporter.stop()
        raise _interrupted(cfg, reporter) from None
    finally:
        reporter.stop()
    if json_out:
        sys.stdout.write(json.dumps(_summary_dict(summary), indent=2) + "\n")
    else:
        _print_summary(summary)


def _interrupted(cfg: SweepConfig, reporter: _Progress) -> Interrupted:
    """Ctrl-C or SIGTERM: every finished job is already committed; say how many, and how to go on."""
    import shlex

    from attnprof.cli import invoked_args

    store = cfg.sweep.store
    if reporter.total is None:
        return Interrupted(f"interrupted before the first job; nothing was added to {store}")
    done = reporter.already + reporter.ran
    return Interrupted(
        f"interrupted: {reporter.ran} result(s) stored in {store} by this sweep, {done} of "
        f"{reporter.total} job(s) done; resume with: attnprof {shlex.join(invoked_args())}"
    )


class _Progress:
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
        from attnprof.report.console import make_console

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


def _summary_dict(s: SweepSummary) -> dict[str, Any]:
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


def _print_summary(s: SweepSummary) -> None:
    from rich.table import Table

    from attnprof.report.console import make_console

    con = make_console()
    counts = ", ".join(f"{n} {status}" for status, n in sorted(s.counts.items())) or "nothing new"
    con.print(f"[bold]{s.ran} job(s) run[/bold] in {s.elapsed_s:.1f} s: {counts}")
    if s.already:
        con.print(f"{s.already} of {s.total} job(s) were already in the store (resumed)")
    if s.not_run:
        con.print(
            f"{s.not_run} job(s) were left to another sweep on the same store (finished or running there)"
        )
    if s.slowest:
        t = Table(title="slowest jobs", show_edge=False)
        t.add_column("wall s", justify="right")
        t.add_column("job")
        for wall, what in s.slowest:
            t.add_row(f"{wall:.2f}", what)
        con.print(t)
    store = str(s.store)
    con.print(f"store: {store}  (attnprof results --store {store}; attnprof recommend --store {store})")


# -- results ----------------------------------------------------------------------------------

_BAD_STATUS = {"crashed", "timeout", "error", "oom"}  # red; any other status that is not ok: yellow


def _status_style(status: str) -> str:
    return "" if status == "ok" else ("red" if status in _BAD_STATUS else "yellow")


def _short_variant(name: str) -> str:
    # user variants are stored with an absolute file path: show file:function
    if ":" in name and "/" in name:
        path, func = name.rsplit(":", 1)
        return f"{Path(path).name}:{func}"
    return name


def _fit(label: str, width: int = 32) -> str:
    """A variant as the tables show it: every built-in name (22 characters at most, ":compile"
    included) whole; a user's longer file.py:function keeps both ends (the json and csv output
    have the full name)."""
    if len(label) <= width:
        return label
    head = (width - 1) // 2
    return label[:head] + "…" + label[-(width - 1 - head) :]


def _label(r: StoredResult) -> str:
    return _fit(_short_variant(r.variant) + (":compile" if r.mode == "compile" else ""))


def _shape(r: StoredResult) -> str:
    """A configuration in a few characters: B,H,S,D (with /Hkv and /Skv only where K/V differ),
    the dtype, and "full" where there is no causal mask."""
    kvh = f"/{r.kv_heads}" if r.kv_heads != r.heads else ""
    kvs = f"/{r.kv_seq}" if r.kv_seq != r.seq else ""
    shape = f"{r.batch},{r.heads}{kvh},{r.seq}{kvs},{r.head_dim} {r.dtype}"
    if r.mask not in ("", "causal", "none"):
        shape += f" {r.mask}"
    elif not r.causal:
        shape += " full"
    return shape + (" bwd" if r.backward else "") + (" decode" if r.phase == "decode" else "")


def _device(r: StoredResult) -> str:
    return f"{r.device} ({r.device_name})" if r.device_name else r.device


def _config_key(r: StoredResult) -> tuple[Any, ...]:
    return (r.device, r.device_name, r.dtype, r.batch, r.heads, r.kv_heads, r.seq, r.kv_seq,
            r.head_dim, r.causal, r.mask, r.backward, r.phase)  # fmt: skip


def _speed_style(ratio: float) -> str:
    """Colour for a time relative to the fastest of its configuration (1.0 = the fastest)."""
    from attnprof.units import NOTABLE_SPEEDUP

    return "green" if ratio < NOTABLE_SPEEDUP else ("yellow" if ratio < 2 else "red")


def _tflops(x: float | None) -> str | None:
    if x is None:
        return None
    return f"{x:.3g}" if x >= 0.001 else f"{x:.1e}"  # at most 7 characters, the header's width


def _results_tables(rows: list[StoredResult]) -> list[Any]:
    """The results as tables that fit 100 columns, one per device (named in its title), each
    configuration a bold line over its variants; then dim lines: why the rows that are not ok
    are not, and what the notation means.

    The store gives the rows sorted by device and configuration. A row that is not ok has no
    timing: its status, coloured, stands where the timing would."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from attnprof.units import fmt_bytes, fmt_count, fmt_err, fmt_ms

    rows = sorted(rows, key=_device)  # stable: the store's order of configurations stays
    fastest: dict[tuple[Any, ...], float] = {}
    n_ok: dict[tuple[Any, ...], int] = {}
    for r in rows:
        if r.status == "ok" and r.median_ms and r.accuracy_ok is not False:  # wrong answers set no pace
            key = _config_key(r)
            fastest[key] = min(fastest.get(key, r.median_ms), r.median_ms)
            n_ok[key] = n_ok.get(key, 0) + 1

    def timing(r: StoredResult) -> Text:
        if r.status != "ok" or r.median_ms is None:
            return Text(r.status, style=_status_style(r.status))
        text = fmt_ms(r.median_ms) + (f" ± {fmt_ms(r.iqr_ms)}" if r.iqr_ms is not None else "")
        key = _config_key(r)
        if r.accuracy_ok is False or key not in fastest:
            return Text(text, style="red")
        return Text(text, style=_speed_style(r.median_ms / fastest[key]) if n_ok[key] > 1 else "")

    def err(r: StoredResult) -> Text | None:
        if r.max_abs_err is None:
            return None
        if r.accuracy_ok is False:  # the mark says it without colour too
            return Text(fmt_err(r.max_abs_err) + " ✗", style="red")
        return Text(fmt_err(r.max_abs_err))

    def ops(r: StoredResult) -> float | None:
        return r.gpu_ops_per_forward if r.device.startswith("cuda") else r.cpu_ops_per_forward

    # (header, justify, cell); a column with no value in any row is left out
    columns: list[tuple[str, str, Callable[[StoredResult], str | Text | None]]] = [
        ("variant", "left", lambda r: "  " + _label(r)),
        ("backend", "left", lambda r: r.backend),
        ("median ± IQR", "right", timing),
        ("ops", "right", lambda r: None if ops(r) is None else fmt_count(ops(r))),
        ("peak", "right", lambda r: None if r.peak_bytes is None else fmt_bytes(r.peak_bytes)),
        ("max err", "right", err),
        ("TFLOP/s", "right", lambda r: _tflops(r.tflops)),
    ]
    cells = [[cell(r) for r in rows] for _, _, cell in columns]
    keep = [i for i, col in enumerate(cells) if any(c is not None and str(c) for c in col)]

    out: list[Any] = []
    table: Any = None
    for n, r in enumerate(rows):
        if n == 0 or _device(r) != _device(rows[n - 1]):
            table = Table(
                title=f"results on {_device(r)}",
                title_justify="left",
                title_style="bold",
                box=box.SIMPLE_HEAD,
                show_edge=False,
                pad_edge=False,
                collapse_padding=True,
                header_style="bold",
            )
            for i in keep:
                header, justify, _ = columns[i]
                # only the timing wraps, and only where 100 columns cannot hold a row
                no_wrap = header != "median ± IQR"
                table.add_column(header, justify=justify, no_wrap=no_wrap)  # type: ignore[arg-type]
            out.append(table)
        if n == 0 or _config_key(r) != _config_key(rows[n - 1]):
            table.add_row(Text(_shape(r), style="bold"), *[""] * (len(keep) - 1))
        table.add_row(*(cells[i][n] if cells[i][n] is not None else "-" for i in keep))

    why: dict[tuple[str, str, str], int] = {}
    for r in rows:
        if r.status != "ok":
            lines = (r.reason or "").strip().splitlines()
            reason = lines[0].removeprefix(f"{r.variant}: ")[:240] if lines else "no reason given"
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
    if any(columns[i][0] == "ops" for i in keep):
        legend.append("ops: profiled operators per forward")
    if any(r.accuracy_ok is False for r in rows):
        legend.append("✗: outside the accuracy tolerance")
    if n_ok and max(n_ok.values()) > 1:
        legend.append("times coloured by how they compare with the fastest of their shape")
    out.append(Text("; ".join(legend), style="dim"))
    return out


def _print_results(con: Any, rows: list[StoredResult], store: Path) -> None:
    from rich.table import Table

    from attnprof.report.console import print_table

    if rows:
        for item in _results_tables(rows):
            if isinstance(item, Table):
                print_table(con, item)
            else:
                con.print(item)
    con.print(f"{len(rows)} result(s) in {store}")


@app.command("results")
def results_command(
    store: StoreOpt = Path("attnprof-results.db"),
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv, json or parquet.")] = "table",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file (needed for parquet).")
    ] = None,
    variant: Annotated[
        str | None, typer.Option("--variant", help="Only these variants (comma list).")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Only these statuses, e.g. ok or crashed,timeout.")
    ] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Only these dtypes.")] = None,
    seq: Annotated[str | None, typer.Option("--seq", help="Only these query lengths.")] = None,
    head_dim: Annotated[str | None, typer.Option("--head-dim", help="Only these head dims.")] = None,
    batch: Annotated[str | None, typer.Option("--batch", help="Only these batch sizes.")] = None,
    heads: Annotated[str | None, typer.Option("--heads", help="Only these head counts.")] = None,
    device: Annotated[str | None, typer.Option("--device", help="Only these devices.")] = None,
    causal: Annotated[str | None, typer.Option("--causal", help="true or false.")] = None,
    samples: Annotated[
        bool, typer.Option("--samples", help="json/parquet: include the raw timing samples.")
    ] = False,
    no_color: NoColor = False,
) -> None:
    """List, filter and export the results in a store."""
    from attnprof.store import Filters, Store, check_statuses
    from attnprof.store.export import FORMATS, export_rows

    if fmt not in FORMATS:
        raise UserError(f"unknown --format {fmt!r}: use one of {', '.join(FORMATS)}")
    f = Filters()
    lists = {
        "variant": variant, "status": status, "dtype": dtype, "seq": seq, "head_dim": head_dim,
        "batch": batch, "heads": heads, "device": device,
    }  # fmt: skip
    for name, raw in lists.items():
        if not raw:
            continue
        setattr(f, name, _parse_list(name, raw))
        f.status = check_statuses(f.status, "--status")  # checked as soon as --status is read
    if causal:
        values = _parse_list("causal", causal)
        if len(values) == 1:
            f.causal = values[0]
    with Store(store, readonly=True) as st:
        rows = st.query(f, samples=samples)
    if fmt == "table":
        if output is None:
            from attnprof.report.console import make_console

            _print_results(make_console(no_color=no_color), rows, store)
            return
        from rich.console import Console

        # on screen the table fits 100 columns; written to a file, the notes below it keep to one line
        with output.open("w") as fh:
            _print_results(Console(file=fh, width=200, highlight=False, force_terminal=False), rows, store)
        return
    text = export_rows(rows, fmt, path=output, samples=samples)
    if text is not None:
        sys.stdout.write(text)
    else:
        sys.stderr.write(f"wrote {len(rows)} result(s) to {output}\n")


# -- recommend --------------------------------------------------------------------------------


def _bucket_label(b: Bucket) -> str:
    """A bucket in a few characters: dtype, head dim, the lengths (S≤1024: 513 to 1024), gqa,
    and "full" where there is no causal mask (the device is in the table's title)."""
    seq = f"S≤{b.seq_max}" + (f" kv≤{b.kv_seq_max}" if b.kv_seq_max != b.seq_max else "")
    return f"{b.dtype} D={b.head_dim} {seq}{' gqa' if b.gqa else ''}{'' if b.causal else ' full'}"


def _recommend_tables(recs: list[Recommendation]) -> list[Any]:
    """One table per device (named in its title), each fitting 100 columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from attnprof.units import NOTABLE_SPEEDUP, fmt_ratio

    groups: dict[tuple[str, str], list[Recommendation]] = {}
    for r in recs:
        groups.setdefault((r.bucket.device, r.bucket.device_name), []).append(r)
    tables = []
    for (device, name), group in groups.items():
        t = Table(
            title=f"fastest per bucket on {device} ({name})" if name else f"fastest per bucket on {device}",
            title_justify="left",
            title_style="bold",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            collapse_padding=True,
            header_style="bold",
        )
        for col, justify in (
            ("bucket", "left"), ("n", "right"), ("fastest", "left"), ("margin", "right"),
            ("runner-up", "left"), ("best SDPA", "left"), ("PyTorch", "left"), ("pin?", "left"),
        ):  # fmt: skip
            # only the bucket wraps, and only where 100 columns cannot hold a row
            t.add_column(col, justify=justify, no_wrap=col != "bucket")  # type: ignore[arg-type]
        for r in group:
            margin = Text("-")
            if r.margin:
                style = "dim" if r.within_noise else ("green" if r.margin >= NOTABLE_SPEEDUP else "yellow")
                margin = Text(f"{fmt_ratio(r.margin)}x" + ("~" if r.within_noise else ""), style=style)
            flag = Text("?", style="dim")
            if r.verdict == "pin" and r.pin_gain:
                flag = Text(f"pin {fmt_ratio(r.pin_gain)}x", style="yellow")
            elif r.verdict == "default":
                if not r.pin_gain or r.pin_gain == 1.0:
                    flag = Text("no", style="dim")  # PyTorch's pick is the fastest pinned backend
                elif r.pin_gain > 1.0:  # faster, but its interval holds 1
                    flag = Text(f"tie {fmt_ratio(r.pin_gain)}x~", style="dim")
                else:
                    flag = Text(f"no {fmt_ratio(r.pin_gain)}x", style="dim")
            t.add_row(
                _bucket_label(r.bucket),
                str(r.configurations),
                Text(_fit(_short_variant(r.best.variant), 24))
                if r.best
                else Text("none correct", style="red"),
                margin,
                _fit(_short_variant(r.runner_up.variant), 24) if r.runner_up else "-",
                r.best_sdpa or "-",
                (r.default_backend or r.pytorch_choice or "?")
                + (" (sdpa)" if r.default_variant == "sdpa" else ""),
                flag,
            )
        tables.append(t)
    return tables


@app.command("recommend")
def recommend_command(
    store: StoreOpt = Path("attnprof-results.db"),
    json_out: Annotated[bool, typer.Option("--json", help="Print the recommendations as JSON.")] = False,
    policy_out: Annotated[
        Path | None, typer.Option("--policy-out", help="Write a policy file for attnprof.policy.")
    ] = None,
    no_color: NoColor = False,
) -> None:
    """Name the fastest correct variant per (device, dtype, shape bucket); flag PyTorch's own choice.

    For each bucket: the winner, its margin over the runner-up, the fastest pinned SDPA backend,
    and the backend PyTorch's own dispatch picks, flagged where they differ."""
    import msgspec

    from attnprof.recommend import SDPA_BACKENDS, build_policy, recommend
    from attnprof.store import Store

    with Store(store, readonly=True) as st:
        rows = st.query(samples=True)  # the samples give pinning's gain its interval
    if not rows:
        raise UserError(f"store {store} holds no results: run attnprof sweep --store {store} first")
    recs = recommend(rows)
    if policy_out is not None:
        policy = build_policy(recs, source=str(store.resolve()))
        policy_out.write_text(json.dumps(policy, indent=2) + "\n")
    if json_out:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(recs), indent=2).decode() + "\n")
        return
    from rich.text import Text

    from attnprof.report.console import make_console, print_table

    con = make_console(no_color=no_color)
    for table in _recommend_tables(recs):
        print_table(con, table)
    from attnprof.units import fmt_ratio

    for r in recs:
        if r.pin_gain is None or r.default_variant is None or r.best_sdpa is None:
            continue
        if r.default_variant == next(v for v, b in SDPA_BACKENDS.items() if b == r.best_sdpa):
            continue
        ci = (
            f", 95% interval {fmt_ratio(r.pin_gain_low)}–{fmt_ratio(r.pin_gain_high)}x"
            if r.pin_gain_low is not None
            else ", no samples for an interval"
        )
        what = "pin it" if r.verdict == "pin" else "keep PyTorch's choice"
        con.print(
            Text(
                f"{_bucket_label(r.bucket)}: {r.best_sdpa} pinned is {fmt_ratio(r.pin_gain)}x the speed of "
                f"PyTorch's default ({r.default_variant}, ran {r.default_backend or '?'}){ci}: {what}",
                style="yellow" if r.verdict == "pin" else "dim",
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
            "must exclude 1); ~: within the timing noise, a tie.",
            style="dim",
        )
    )
    if policy_out is not None:
        con.print(
            f"policy written to {policy_out} (apply it with attnprof.policy.scaled_dot_product_attention)"
        )
