"""`attnprof analyze TRACE|DIR...`: analyse profiler traces and print what they show.

A folder (as torch.profiler's tensorboard_trace_handler writes one per run) is analysed trace by
trace in parallel processes, and its ranks are put side by side (attnprof.analysis.ranks.folder). A
folder holding an execution trace and its graph capture trace (vLLM's capture_traces/ layout),
or a trace given with --capture, has its graph replays attributed to the captured CPU ops
(attnprof.analysis.replay.replay).

Thin: the flags become an attnprof.api.analyze.AnalyzeRequest (which checks them and routes each
argument), its result becomes the view. No torch, and no
pandas, on this path: the command must answer in well under half a second on a small trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from attnprof.cli import app
from attnprof.cli.options import NoColor
from attnprof.errors import UserError
from attnprof.trace.limits import MAX_MEMORY

if TYPE_CHECKING:
    from attnprof.analysis.ranks.folder import FolderRun
    from attnprof.report.folder_progress import FolderProgressView

__all__ = ["analyze_command"]


def _start_load_progress(files: list[Path], *, no_color: bool) -> tuple[Any, Any] | None:
    """(reporter, token) of the load progress of one large trace, else None."""
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
    threads: str | None = typer.Option(
        None,
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
    executor: str | None = typer.Option(
        None,
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
    from attnprof.api.analyze import AnalyzeRequest

    req = AnalyzeRequest.from_flags(
        traces,
        region=region,
        threads=threads,
        top=top,
        as_json=as_json,
        shape=shape,
        dtype=dtype,
        causal=causal,
        max_memory=max_memory,
        html=html,
        md=md,
        lang=lang,
        capture=capture,
        ops=ops,
        peak=peak,
        executor=executor,
        ray_address=ray_address,
    )
    result = req.run(
        load_progress=lambda files: _load_progress(files, no_color=bool(no_color)),
        folder_progress=lambda folder: _folder_progress(folder, no_color=bool(no_color)),
    )
    if req.folders and (req.html is not None or req.md is not None):
        from attnprof.outputs import write_atomic
        from attnprof.report.i18n import Translator
        from attnprof.report.ranks_report import render_ranks_html, render_ranks_markdown

        page_t = Translator(req.lang or "en")
        named = ", ".join(str(d) for d in req.folders)
        if req.html is not None:
            page = render_ranks_html(result.folder_runs(), page_t, folder=named)
            write_atomic(req.html, page, option="--html")
        if req.md is not None:
            text = render_ranks_markdown(result.folder_runs(), page_t, folder=named)
            write_atomic(req.md, text + "\n", option="--md")
    if req.as_json:
        import sys

        import orjson

        items = [
            _folder_json(p, got) if isinstance(got, list) else got.to_dict() for p, got in result.items()
        ]
        payload = items[0] if len(items) == 1 else items
        sys.stdout.buffer.write(
            orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)
        )
        sys.stdout.buffer.write(b"\n")
        return
    from attnprof.report.analysis_view import render_analysis
    from attnprof.report.console import make_console

    translator = None
    if req.lang is not None:
        from attnprof.report.i18n import Translator

        translator = Translator(req.lang)
    console = make_console(no_color=no_color)
    for _, got in result.items():
        if isinstance(got, list):
            from attnprof.report.ranks_view import render_folder

            for run in got:
                render_folder(run, console=console, lang=req.lang or "en")
        elif req.ops:
            from attnprof.report.perf_view import render_ops

            render_ops(got, console=console, top=req.top)
        else:
            render_analysis(got, console=console, t=translator)


@contextmanager
def _load_progress(files: list[Path], *, no_color: bool) -> Iterator[None]:
    """For one trace of PROGRESS_MIN bytes or more: its load's progress on stderr (a bar on a
    terminal, a line per stage on a pipe; report/load_progress.py)."""
    progress = _start_load_progress(files, no_color=no_color)
    try:
        yield
    finally:
        if progress is not None:
            progress[0].finished()
            from attnprof.trace.load import PROGRESS

            PROGRESS.reset(progress[1])


@contextmanager
def _folder_progress(folder: Path, *, no_color: bool) -> Iterator[FolderProgressView]:
    from attnprof.report.folder_progress import FolderProgressView

    view = FolderProgressView(str(folder), no_color=no_color)  # on stderr
    try:
        yield view
    finally:
        view.finished()


def _folder_json(folder: Path, runs: list[FolderRun]) -> dict[str, object]:
    # ranks (and its schema) only when a folder was given: one trace never imports it
    from attnprof.analysis.ranks.folder import SCHEMA

    return {"schema": SCHEMA, "folder": str(folder), "runs": [r.to_dict() for r in runs]}
