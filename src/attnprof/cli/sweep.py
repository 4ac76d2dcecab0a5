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
from attnprof.errors import UserError

if TYPE_CHECKING:
    from attnprof.recommend import Recommendation
    from attnprof.store import StoredResult
    from attnprof.sweep import SweepConfig, SweepPlan, SweepSummary

__all__: list[str] = []

StoreOpt = Annotated[Path, typer.Option("--store", help="SQLite results store.")]

# how the comma list of each list-valued flag parses; the flag is --NAME with "-" for "_"
_LIST_KINDS = {
    **dict.fromkeys(("batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim"), "int"),
    **dict.fromkeys(("causal", "compile"), "bool"),
    **dict.fromkeys(("dtype", "variants", "variant", "status", "device", "retry"), "str"),
}


def _parse_list(name: str, raw: str | list[str]) -> list[Any]:
    """The values of the list flag --NAME (a comma list, or repeated: a list of them)."""
    from attnprof.sweep.grid import parse_bools, parse_ints, parse_strs

    parsers: dict[str, Callable[[str, str], list[Any]]] = {
        "int": parse_ints,
        "bool": parse_bools,
        "str": parse_strs,
    }
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
    variants: Annotated[
        list[str] | None,
        typer.Option(
            "--variants",
            "--variant",
            "-v",
            help="Variants (comma list or repeated); file.py:func for your own.",
        ),
    ] = None,
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

    reporter = _Progress(enabled=not no_progress and not json_out)
    try:
        summary = run_sweep(cfg, on_start=reporter.start, on_result=reporter.update)
    finally:
        reporter.stop()
    if json_out:
        sys.stdout.write(json.dumps(_summary_dict(summary), indent=2) + "\n")
    else:
        _print_summary(summary)


class _Progress:
    """A rich progress bar on stderr: done/total, failures so far, ETA."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Any = None
        self.task: Any = None

    def start(self, plan: SweepPlan) -> None:
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
        if self.progress is None:
            return
        last = f"{row.variant} S={row.workload.seq} {row.workload.dtype}: {row.result.status}"
        self.progress.update(self.task, advance=1, failures=summary.failures, last=last)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


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
        con.print(f"{s.not_run} job(s) were finished meanwhile by another sweep on the same store")
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


def _fmt(x: float | None, spec: str) -> str:
    return "" if x is None else format(x, spec)


def _bytes(n: int | None) -> str:
    if n is None:
        return ""
    from attnprof.harness.memory import format_bytes

    return format_bytes(n)


def _short_variant(name: str) -> str:
    # user variants are stored with an absolute file path: show file:function
    if ":" in name and "/" in name:
        path, func = name.rsplit(":", 1)
        return f"{Path(path).name}:{func}"
    return name


def _results_table(rows: list[StoredResult]) -> Any:
    from rich.table import Table

    t = Table(show_edge=False, header_style="bold")
    for col, just in (
        ("variant", "left"), ("shape B,H/Hkv,S/Skv,D", "left"), ("dtype", "left"), ("mask", "left"),
        ("status", "left"), ("backend", "left"), ("median ms", "right"), ("IQR ms", "right"),
        ("ops/fwd", "right"), ("peak", "right"), ("max err", "right"), ("TFLOP/s", "right"), ("reason", "left"),
    ):  # fmt: skip
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        kvh = f"/{r.kv_heads}" if r.kv_heads != r.heads else ""
        kvs = f"/{r.kv_seq}" if r.kv_seq != r.seq else ""
        ops = r.gpu_ops_per_forward if r.device.startswith("cuda") else r.cpu_ops_per_forward
        style = {"ok": "green", "crashed": "red", "timeout": "red", "error": "red", "oom": "red"}.get(
            r.status, "yellow"
        )
        t.add_row(
            _short_variant(r.variant) + (":compile" if r.mode == "compile" else ""),
            f"{r.batch},{r.heads}{kvh},{r.seq}{kvs},{r.head_dim}",
            r.dtype,
            "causal" if r.causal else "full",
            f"[{style}]{r.status}[/{style}]",
            r.backend or "",
            _fmt(r.median_ms, ".4g"),
            _fmt(r.iqr_ms, ".2g"),
            _fmt(ops, ".0f"),
            _bytes(r.peak_bytes),
            _fmt(r.max_abs_err, ".2g"),
            _fmt(r.tflops, ".3g"),
            (r.reason or "")[:80],
        )
    return t


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
) -> None:
    """List, filter and export the results in a store."""
    from attnprof.store import STATUSES, Filters, Store
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
        bad = set(f.status) - set(STATUSES)  # checked as soon as --status is read
        if bad:
            raise UserError(
                f"--status {','.join(sorted(bad))}: not a status; use some of {', '.join(STATUSES)}"
            )
    if causal:
        values = _parse_list("causal", causal)
        if len(values) == 1:
            f.causal = values[0]
    with Store(store, readonly=True) as st:
        rows = st.query(f, samples=samples)
    if fmt == "table":
        from rich.console import Console

        from attnprof.report.console import make_console

        # a table written to a file keeps every column on one line; on screen it fits 100 columns
        con = make_console() if output is None else Console(file=output.open("w"), width=200)
        con.print(_results_table(rows))
        con.print(f"{len(rows)} result(s) in {store}")
        return
    text = export_rows(rows, fmt, path=output, samples=samples)
    if text is not None:
        sys.stdout.write(text)
    else:
        sys.stderr.write(f"wrote {len(rows)} result(s) to {output}\n")


# -- recommend --------------------------------------------------------------------------------


def _recommend_table(recs: list[Recommendation]) -> Any:
    from rich.table import Table

    t = Table(show_edge=False, header_style="bold")
    for col in (
        "device",
        "bucket",
        "configs",
        "fastest correct",
        "margin",
        "runner-up",
        "best SDPA",
        "PyTorch picks",
        "",
    ):
        t.add_column(col)
    for r in recs:
        flag = (
            "[yellow]differs[/yellow]" if r.differs else ("same" if r.pytorch_choice and r.best_sdpa else "")
        )
        if r.differs and r.gain_over_pytorch:
            flag += f" (x{r.gain_over_pytorch:.2f}{', within noise' if r.gain_within_noise else ''})"
        t.add_row(
            f"{r.bucket.device} {r.bucket.device_name[:28]}",
            r.bucket.describe(),
            str(r.configurations),
            _short_variant(r.best.variant) if r.best else "[red]none correct[/red]",
            (f"x{r.margin:.2f}" + (" (noise)" if r.within_noise else "")) if r.margin else "",
            _short_variant(r.runner_up.variant) if r.runner_up else "",
            r.best_sdpa or "",
            r.pytorch_choice or "?",
            flag,
        )
    return t


@app.command("recommend")
def recommend_command(
    store: StoreOpt = Path("attnprof-results.db"),
    json_out: Annotated[bool, typer.Option("--json", help="Print the recommendations as JSON.")] = False,
    policy_out: Annotated[
        Path | None, typer.Option("--policy-out", help="Write a policy file for attnprof.policy.")
    ] = None,
) -> None:
    """Name the fastest correct variant per (device, dtype, shape bucket); flag PyTorch's own choice.

    For each bucket: the winner, its margin over the runner-up, the fastest pinned SDPA backend,
    and the backend PyTorch's own dispatch picks, flagged where they differ."""
    import msgspec

    from attnprof.recommend import build_policy, recommend
    from attnprof.store import Store

    with Store(store, readonly=True) as st:
        rows = st.query()
    if not rows:
        raise UserError(f"store {store} holds no results: run attnprof sweep --store {store} first")
    recs = recommend(rows)
    if policy_out is not None:
        policy = build_policy(recs, source=str(store.resolve()))
        policy_out.write_text(json.dumps(policy, indent=2) + "\n")
    if json_out:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(recs), indent=2).decode() + "\n")
        return
    from attnprof.report.console import make_console

    con = make_console()
    con.print(_recommend_table(recs))
    n = sum(r.differs for r in recs)
    con.print(
        f"{len(recs)} bucket(s); PyTorch's own dispatch differs from the fastest SDPA backend in {n}. "
        "margin = runner-up time / fastest time (geometric mean over the bucket's configurations); "
        "(noise): smaller than the timing noise, a tie."
    )
    if policy_out is not None:
        con.print(
            f"policy written to {policy_out} (apply it with attnprof.policy.scaled_dot_product_attention)"
        )
