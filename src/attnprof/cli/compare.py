"""`attnprof compare` and `attnprof report`: thin commands over attnprof.compare.compare,
attnprof.compare.expect and attnprof.report."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from attnprof.cli import app

__all__ = ["compare_cmd", "report_cmd"]


@app.command("compare")
def compare_cmd(
    paths: list[Path] = typer.Argument(
        ..., help="Run directories and/or trace files (.json, .json.gz), mixed."
    ),
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="Variant or trace to compare against (default: naive-inplace, else the first).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON (attnprof.compare/1)."),
    expect: str | None = typer.Option(
        None, "--expect", help="Expectations to check: a TOML file, or a built-in name: cpu, blog-cuda."
    ),
    strict: bool = typer.Option(False, "--strict", help="Exit 3 when any expectation is not met."),
    diff: bool = typer.Option(
        False,
        "--diff",
        help="Kernel-level diff: two traces, two runs (per variant), or each variant vs the baseline.",
    ),
    mixed_workloads: bool = typer.Option(
        False,
        "--mixed-workloads",
        help="Compare runs of different workloads (shape, dtype, device, mask) against one baseline; "
        "the output says so. Without it such runs are refused.",
    ),
    no_color: bool = typer.Option(False, "--no-color", help="Plain text, no colours."),
) -> None:
    """Compare variants and traces side by side; optionally diff kernels and check expectations."""
    import msgspec

    from attnprof.api.compare import CompareRequest

    req = CompareRequest.from_flags(
        paths, baseline=baseline, expect=expect, strict=strict, diff=diff, mixed_workloads=mixed_workloads
    )
    got = req.run()
    comp, spec, results = got.comparison, got.spec, got.expectations
    if json_out:
        payload = msgspec.to_builtins(comp)
        if spec is not None:  # same top level either way; scripts find the results beside the rows
            payload["expectations"] = msgspec.to_builtins(results)
            payload["expectation_file"] = spec.path
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(payload), indent=2).decode() + "\n")
    else:
        from attnprof.report.console import make_console
        from attnprof.report.terminal import render_comparison, render_diff, render_expectations

        console = make_console(no_color=no_color)
        render_comparison(console, comp)
        for d in comp.diffs:
            render_diff(console, d)
        if spec is not None:
            render_expectations(console, results, title=f"Expectations: {spec.title or Path(spec.path).name}")
    got.enforce()


@app.command("report")
def report_cmd(
    run_dir: Path | None = typer.Argument(
        None,
        help="A run directory (or a folder of run directories, for scaling), or a trace file "
        "(.json, .json.gz) alone.",
    ),
    store: Path | None = typer.Option(
        None,
        "--store",
        help="Report a sweep's results store instead: scaling curves, results, recommendations.",
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="html or md. Default: md for an -o file ending in .md, else html."
    ),
    lang: str = typer.Option("en", "--lang", help="Language: en, id (Indonesian) or th (Thai)."),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        "--out",
        help="Output file ('-' for stdout). Default: RUN_DIR/report.<lang>.html (a trace file, or "
        "--store: <name>.report.<lang>.html beside it); md goes to stdout.",
    ),
    summary_only: bool = typer.Option(False, "--summary-only", help="Only the bullet summary (Markdown)."),
    expect: str = typer.Option(
        "auto",
        "--expect",
        help="Expectations to show: a TOML file, cpu, blog-cuda, auto (by device) or none.",
    ),
    baseline: str | None = typer.Option(None, "--baseline", help="Variant to compare against."),
) -> None:
    """Write a report of a run or of a sweep's store: HTML (self-contained, offline) or Markdown,
    in en, id or th."""
    from attnprof.api.report import ReportRequest
    from attnprof.outputs import path_error, write_atomic

    req = ReportRequest.from_flags(
        run_dir, store=store, fmt=fmt, lang=lang, output=output, summary_only=summary_only, expect=expect,
        baseline=baseline,
    )  # fmt: skip
    report = req.render()
    if report.target is None:
        sys.stdout.write(report.text)
        return
    try:
        report.target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise path_error(report.target.parent, exc, option="-o/--output") from None
    write_atomic(report.target, report.text, option="-o/--output")  # whole or not at all
    sys.stdout.write(f"{report.target}\n")
