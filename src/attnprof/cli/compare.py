"""`attnprof compare` and `attnprof report`: thin commands over attnprof.compare.compare,
attnprof.compare.expect and attnprof.report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from attnprof.cli import app

if TYPE_CHECKING:
    from attnprof.report.i18n import Translator

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

    from attnprof.compare.compare import compare
    from attnprof.compare.expect import check_comparison, enforce, load_expectations
    from attnprof.errors import UserError
    from attnprof.store import is_store_file

    for p in paths:
        if is_store_file(p):
            raise UserError(
                f"{p} is a sweep's results store, not a run or a trace: see it with "
                f"`attnprof results --store {p}`, `attnprof recommend --store {p}` or `attnprof report {p}`"
            )
    spec = load_expectations(expect) if expect else None  # a bad file fails before any work
    comp = compare(paths, baseline=baseline, diff=diff, mixed_workloads=mixed_workloads)
    results = check_comparison(comp, spec) if spec is not None else []
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
    enforce(results, strict=strict)


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
    from attnprof.errors import UserError
    from attnprof.report.i18n import Translator
    from attnprof.store import is_store_file

    if store is None and run_dir is not None and is_store_file(run_dir):
        run_dir, store = None, run_dir  # a sweep's store given as the path: report it as one
    if (run_dir is None) == (store is None):
        raise UserError(
            "give either a run directory or --store FILE, not both"
            if run_dir is not None
            else "give a run directory to report, or --store FILE for a sweep's results store"
        )
    if fmt is None:
        # `-o report.md` means Markdown: writing HTML into a .md file would surprise everyone
        fmt = "md" if output is not None and output.suffix.lower() in (".md", ".markdown") else "html"
    if fmt not in ("html", "md"):
        raise UserError(f"--format {fmt!r}: use html or md")
    t = Translator(lang)  # an unknown language fails before any work
    from attnprof.outputs import refuse_inputs

    refuse_inputs(output, [p for p in (run_dir, store) if p is not None], option="-o/--output")
    if store is not None:
        if expect not in ("auto", "none"):
            raise UserError("--expect applies to a run directory, not to --store")
        _report_store(store, fmt=fmt, t=t, output=output, summary_only=summary_only, baseline=baseline)
        return
    assert run_dir is not None
    from attnprof.report.data import build_report_data

    data = build_report_data(run_dir, expect=None if expect == "none" else expect, baseline=baseline)
    # a trace file's report goes beside it, as a store's does; links are relative to that folder
    here = Path(run_dir).parent if data.record is None else Path(run_dir)
    if summary_only or fmt == "md":
        from attnprof.report.markdown import render_markdown, summary_markdown

        target = output if output is not None and str(output) != "-" else None
        text = (
            summary_markdown(data, t)
            if summary_only
            else render_markdown(data, t, out_dir=target.parent if target else here)
        )
        _write(text, target)
        return
    from attnprof.report.html import render_html

    if output is not None and str(output) == "-":
        sys.stdout.write(render_html(data, t, out_dir=here))
        return
    default = (
        here / f"report.{t.lang}.html"
        if data.record is not None
        else Path(run_dir).with_name(f"{_stem(Path(run_dir))}.report.{t.lang}.html")
    )
    target = output or default
    _mkdir(target.parent)
    _write(render_html(data, t, out_dir=target.parent), target)


def _stem(trace: Path) -> str:
    """The trace's name without .json or .json.gz."""
    return trace.name.removesuffix(".gz").removesuffix(".json")


def _write(text: str, target: Path | None) -> None:
    """To the file, whole or not at all (printing its path), or to stdout when there is none."""
    from attnprof.outputs import write_atomic

    if target is None:
        sys.stdout.write(text)
    else:
        write_atomic(target, text, option="-o/--output")
        sys.stdout.write(f"{target}\n")


def _mkdir(folder: Path) -> None:
    from attnprof.outputs import path_error

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise path_error(folder, exc, option="-o/--output") from None


def _report_store(
    store: Path, *, fmt: str, t: Translator, output: Path | None, summary_only: bool, baseline: str | None
) -> None:
    from attnprof.errors import UserError
    from attnprof.report.store_report import (
        build_store_report_data,
        render_store_html,
        render_store_markdown,
        store_summary,
    )

    if baseline is not None:
        raise UserError("--baseline applies to a run directory, not to --store")
    data = build_store_report_data(store)
    to_stdout = output is not None and str(output) == "-"
    if summary_only or fmt == "md":
        text = (
            "".join(f"- {line}\n" for line in store_summary(data, t))
            if summary_only
            else render_store_markdown(data, t)
        )
        _write(text, None if output is None or to_stdout else output)
        return
    html = render_store_html(data, t)
    if to_stdout:
        sys.stdout.write(html)
        return
    target = output or store.with_name(f"{store.stem}.report.{t.lang}.html")
    _mkdir(target.parent)
    _write(html, target)
