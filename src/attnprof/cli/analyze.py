"""`attnprof analyze TRACE|DIR...`: analyse profiler traces and print what they show.

A folder (as torch.profiler's tensorboard_trace_handler writes one per run) is analysed trace by
trace in parallel processes, and its ranks are put side by side (attnprof.analysis.ranks.folder). A
folder holding an execution trace and its graph capture trace (vLLM's capture_traces/ layout),
or a trace given with --capture, has its graph replays attributed to the captured CPU ops
(attnprof.analysis.replay.replay).

Thin: parse options, call attnprof.analysis.analyze with keywords, render. No torch, and no
pandas, on this path: the command must answer in well under half a second on a small trace.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from attnprof.cli import app
from attnprof.cli.options import NoColor
from attnprof.errors import UserError
from attnprof.trace.limits import MAX_MEMORY

if TYPE_CHECKING:
    from attnprof.analysis.ranks.folder import FolderRun

__all__ = ["analyze_command"]


def _load_progress(files: list[str | os.PathLike[str]], *, no_color: bool) -> tuple[Any, Any] | None:
    """For one trace of PROGRESS_MIN bytes or more: its load's progress on stderr (a bar on a
    terminal, a line per stage on a pipe; report/load_progress.py), as (reporter, token)."""
    if len(files) != 1:
        return None
    from attnprof.report.load_progress import PROGRESS_MIN, LoadProgress
    from attnprof.trace.limits import check_input

    path = Path(files[0])
    try:
        raw = check_input(path, max_memory=0)
    except UserError:
        return None  # the load says what is wrong with it
    if raw < PROGRESS_MIN:
        return None
    from attnprof.trace.load import PROGRESS

    reporter = LoadProgress(path.name, raw, no_color=no_color)
    return reporter, PROGRESS.set(reporter)


@app.command("analyze")
def analyze_command(
    traces: list[Path] = typer.Argument(
        ...,
        metavar="TRACE|DIR",
        help="Trace files (.json or .json.gz), from any PyTorch profiler run, or folders of per-rank "
        "traces (tensorboard_trace_handler's layout, sub-folders included).",
    ),
    region: str | None = typer.Option(
        None,
        "--region",
        help="Annotation to split the trace by: a record_function name or a regex "
        "(default: attn_fwd, else ProfilerStep#N, else the whole trace).",
    ),
    threads: str = typer.Option(
        "own",
        "--threads",
        help="Device work a region owns: 'own' (launched on its thread or by the autograd threads "
        "for it) or 'all' (also every other thread of the process while it is open).",
    ),
    top: int = typer.Option(20, "--top", min=0, help="Kernels to list, by total time (0: all)."),
    as_json: bool = typer.Option(
        False, "--json", help="Print JSON: one object for one trace, an array for several."
    ),
    shape: str | None = typer.Option(
        None, "--shape", help="Workload B,H,S,D for the roofline, e.g. 8,16,1024,64."
    ),
    dtype: str | None = typer.Option(
        None, "--dtype", help="Workload dtype for the roofline: fp32, fp16, bf16."
    ),
    causal: bool = typer.Option(True, "--causal/--no-causal", help="Workload causal mask (with --shape)."),
    max_memory: float = typer.Option(
        MAX_MEMORY,
        "--max-memory",
        min=0.0,
        help="Refuse a trace whose analysis would need more than this fraction of the memory "
        "available (0: no limit).",
    ),
    html: Path | None = typer.Option(
        None,
        "--html",
        metavar="FILE",
        help="Also write the cross-rank view of the folder(s) as a self-contained HTML page.",
    ),
    md: Path | None = typer.Option(
        None,
        "--md",
        metavar="FILE",
        help="Also write the cross-rank view of the folder(s) as Markdown (the --html page's content).",
    ),
    lang: str | None = typer.Option(
        None, "--lang", help="Language of the terminal view, the --html page and the --md file: en, id or th."
    ),
    capture: Path | None = typer.Option(
        None,
        "--capture",
        metavar="CAPTURE_TRACE",
        help="The graph capture trace (vLLM / SGLang) of the one execution trace given: each "
        "graph replay's kernels get the CPU op, shapes and ranges recorded when it was captured.",
    ),
    ops: bool = typer.Option(
        False,
        "--ops",
        help="Print the per-op performance model: FLOPs, bytes, achieved TFLOP/s and TB/s, bound "
        "and % of the roof per op shape, by time (--top rows; needs record_shapes=True traces).",
    ),
    peak: str | None = typer.Option(
        None,
        "--peak",
        metavar="TFLOPS,TBPS",
        help="Roofs for the per-op model instead of the device table's, e.g. 989,3.35.",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where a folder's traces are analysed: local (a process pool here) or ray (one Ray "
        "task per trace; a local Ray on 127.0.0.1 unless --ray-address).",
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="With --executor ray: the cluster to use (e.g. ray://head:10001, auto)."
    ),
    no_color: NoColor = False,
) -> None:
    """Analyse PyTorch profiler traces: kernels, categories, regions, occupancy, findings."""
    from attnprof.analysis import analyze

    workload = None
    if shape is not None:
        from attnprof.workload import Workload, parse_shape

        b, h, s, d = parse_shape(shape)
        workload = Workload(batch=b, heads=h, seq=s, head_dim=d, dtype=dtype or "fp32", causal=causal)
    elif dtype is not None:
        raise UserError("--dtype describes the workload for the roofline: give --shape B,H,S,D with it")
    roofs = _parse_peak(peak) if peak is not None else None
    if executor not in ("local", "ray"):
        raise UserError(f"--executor {executor!r}: use 'local' or 'ray'")
    if ray_address is not None and executor != "ray":
        raise UserError("--ray-address is where --executor ray sends a folder's traces: add --executor ray")
    if lang is not None and as_json and html is None and md is None:
        raise UserError(
            "--lang is the language of the terminal view, the --html page and the --md file; --json is "
            "data: drop --lang"
        )
    folders = [p for p in traces if p.is_dir()]
    pairs = _capture_pairs(traces, folders, capture)
    folders = [p for p in folders if p not in pairs]
    translator = None
    if lang is not None:
        from attnprof.report.i18n import Translator

        translator = Translator(lang)  # an unknown language fails before any work
    for out, option in ((html, "--html"), (md, "--md")):
        if out is None:
            continue
        from attnprof.report.i18n import Translator

        if not folders:
            raise UserError(f"{option} writes the cross-rank view of a folder of traces: give a folder")
        translator = Translator(lang or "en")  # an unknown language fails before any work
        from attnprof.outputs import refuse_inputs

        refuse_inputs(out, traces, option=option)
    files: list[str | os.PathLike[str]] = [p for p in traces if not p.is_dir() and p not in pairs]
    progress = _load_progress(files, no_color=bool(no_color))
    try:
        results = dict(
            zip(
                files,
                analyze(
                    files,
                    region=region,
                    workload=workload,
                    top=top,
                    max_memory=max_memory,
                    threads=threads,
                    peak=roofs,
                ),
                strict=True,
            )
        )
    finally:
        if progress is not None:
            progress[0].finished()
            from attnprof.trace.load import PROGRESS

            PROGRESS.reset(progress[1])
    for p, (exe, cap) in pairs.items():
        results[p] = analyze(
            exe,
            region=region,
            workload=workload,
            top=top,
            max_memory=max_memory,
            threads=threads,
            capture=cap,
            peak=roofs,
        )
    runs: dict[Path, list[FolderRun]] = {}
    if folders:
        from attnprof.analysis.ranks.folder import analyze_folder
        from attnprof.report.folder_progress import FolderProgressView

        for folder in folders:
            view = FolderProgressView(str(folder), no_color=bool(no_color))  # on stderr
            try:
                runs[folder] = analyze_folder(
                    folder,
                    region=region,
                    workload=workload,
                    top=top,
                    max_memory=max_memory,
                    executor=executor,
                    ray_address=ray_address,
                    progress=view,
                )
            finally:
                view.finished()
    if html is not None and translator is not None:
        from attnprof.report.ranks_report import render_ranks_html

        page = render_ranks_html(
            [r for d in folders for r in runs[d]], translator, folder=", ".join(str(d) for d in folders)
        )
        from attnprof.outputs import write_atomic

        write_atomic(html, page, option="--html")
    if md is not None and translator is not None:
        from attnprof.outputs import write_atomic
        from attnprof.report.ranks_report import render_ranks_markdown

        text = render_ranks_markdown(
            [r for d in folders for r in runs[d]], translator, folder=", ".join(str(d) for d in folders)
        )
        write_atomic(md, text + "\n", option="--md")
    if as_json:
        import sys

        import orjson

        items = [_folder_json(p, runs[p]) if p in runs else results[p].to_dict() for p in traces]
        payload = items[0] if len(items) == 1 else items
        sys.stdout.buffer.write(
            orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        )
        sys.stdout.buffer.write(b"\n")
        return
    from attnprof.report.analysis_view import render_analysis
    from attnprof.report.console import make_console

    console = make_console(no_color=no_color)
    for p in traces:
        if p in runs:
            from attnprof.report.ranks_view import render_folder

            for run in runs[p]:
                render_folder(run, console=console)
        elif ops:
            from attnprof.report.perf_view import render_ops

            render_ops(results[p], console=console, top=top)
        else:
            render_analysis(results[p], console=console, t=translator)


def _parse_peak(text: str) -> tuple[float, float]:
    """--peak TFLOPS,TBPS: two positive, finite numbers."""
    parts = [p.strip() for p in text.split(",")]
    try:
        tf, bw = (float(p) for p in parts) if len(parts) == 2 else (0.0, 0.0)
    except ValueError:
        tf = bw = 0.0
    if not (0 < tf < float("inf") and 0 < bw < float("inf")):
        raise UserError(f"--peak {text!r}: give two positive numbers, TFLOP/s and TB/s, e.g. --peak 989,3.35")
    return tf, bw


def _capture_pairs(
    traces: list[Path], folders: list[Path], capture: Path | None
) -> dict[Path, tuple[Path, Path]]:
    """argument -> (execution trace, capture trace): the one trace given with --capture, and each
    folder laid out as vLLM writes an execution trace and its capture trace."""
    from attnprof.analysis.replay.replay import find_pair

    if capture is not None:
        if len(traces) != 1 or traces[0].is_dir():
            raise UserError(
                "--capture CAPTURE_TRACE belongs to one execution trace: give one trace file with it"
            )
        if not capture.is_file():
            raise UserError(f"--capture {capture}: no such file")
        return {traces[0]: (traces[0], capture)}
    out = {}
    for folder in folders:
        pair = find_pair(folder)
        if pair is not None:
            out[folder] = pair
    return out


def _folder_json(folder: Path, runs: list[FolderRun]) -> dict[str, object]:
    # ranks (and its schema) only when a folder was given: one trace never imports it
    from attnprof.analysis.ranks.folder import SCHEMA

    return {"schema": SCHEMA, "folder": str(folder), "runs": [r.to_dict() for r in runs]}
