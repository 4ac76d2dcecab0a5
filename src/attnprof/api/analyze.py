"""`attnprof analyze`'s request: every flag checked once, and the routing of the arguments.

An argument is a trace file, a folder of rank traces (attnprof.analysis.ranks.folder) or a
capture pair (a trace given with --capture, or a folder laid out as vLLM's capture_traces/). Each
option either applies on every route it is given with or is refused here with one line:

- --threads, --peak and --ops shape the analysis of one trace; a folder's rank view has no
  place for them (its per-trace summaries are region-wide), so with a folder they are refused.
- --lang translates the terminal view of a trace and of a folder, and a folder's --html page and
  --md file; with --json alone (data) it is refused, and so with --ops (the per-op model's view
  is in English only).
- --executor and --ray-address say where a folder's traces are analysed: without a folder they
  are refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from attnprof.errors import UserError

if TYPE_CHECKING:
    from attnprof.analysis import TraceAnalysis
    from attnprof.analysis.ranks.folder import FolderProgress, FolderRun
    from attnprof.workload import Workload

__all__ = ["THREADS", "AnalyzeRequest", "AnalyzeResult", "parse_peak"]

THREADS = ("own", "all")
LANGS = ("en", "id", "th")


@dataclass(frozen=True, kw_only=True)
class AnalyzeRequest:
    """What `attnprof analyze` was asked, checked (build it with from_flags)."""

    traces: tuple[Path, ...]
    files: tuple[Path, ...]  # arguments analysed as one trace each
    folders: tuple[Path, ...]  # arguments analysed as a folder of rank traces
    pairs: dict[Path, tuple[Path, Path]] = field(default_factory=dict)  # argument -> (execution, capture)
    region: str | None = None
    threads: str = "own"
    top: int = 20
    as_json: bool = False
    workload: Workload | None = None
    peak: tuple[float, float] | None = None
    max_memory: float | None = None
    html: Path | None = None
    md: Path | None = None
    lang: str | None = None
    ops: bool = False
    executor: str = "local"
    ray_address: str | None = None

    @classmethod
    def from_flags(
        cls,
        traces: list[Path],
        *,
        region: str | None = None,
        threads: str | None = None,
        top: int = 20,
        as_json: bool = False,
        shape: str | None = None,
        dtype: str | None = None,
        causal: bool = True,
        max_memory: float | None = None,
        html: Path | None = None,
        md: Path | None = None,
        lang: str | None = None,
        capture: Path | None = None,
        ops: bool = False,
        peak: str | None = None,
        executor: str | None = None,
        ray_address: str | None = None,
    ) -> AnalyzeRequest:
        """The request, or UserError naming the first flag that is wrong or cannot apply here.
        threads and executor: None when not given ('own', 'local')."""
        workload = None
        if shape is not None:
            from attnprof.workload import Workload, parse_shape

            b, h, s, d = parse_shape(shape)
            workload = Workload(batch=b, heads=h, seq=s, head_dim=d, dtype=dtype or "fp32", causal=causal)
        elif dtype is not None:
            raise UserError("--dtype describes the workload for the roofline: give --shape B,H,S,D with it")
        if threads is not None and threads not in THREADS:
            raise UserError(f"--threads {threads!r}: use 'own' or 'all'")
        roofs = parse_peak(peak) if peak is not None else None
        if executor is not None and executor not in ("local", "ray"):
            raise UserError(f"--executor {executor!r}: use 'local' or 'ray'")
        if ray_address is not None and executor != "ray":
            raise UserError(
                "--ray-address is where --executor ray sends a folder's traces: add --executor ray"
            )
        if lang is not None and as_json and html is None and md is None:
            raise UserError(
                "--lang is the language of the terminal view, the --html page and the --md file; --json is "
                "data: drop --lang"
            )
        folders = [p for p in traces if p.is_dir()]
        pairs = _capture_pairs(traces, folders, capture)
        folders = [p for p in folders if p not in pairs]
        files = [p for p in traces if not p.is_dir() and p not in pairs]
        if lang is not None:
            from attnprof.report.i18n import Translator

            Translator(lang)  # an unknown language fails before any work
        if folders:
            named = ", ".join(str(d) for d in folders)
            for flag, given in (
                (f"--threads {threads}", threads is not None and threads != "own"),
                ("--peak", peak is not None),
                ("--ops", ops),
            ):
                if given:
                    raise UserError(
                        f"{flag} applies to the analysis of one trace; a folder's cross-rank view "
                        f"({named}) has no place for it: give the folder's trace files, or drop {flag.split()[0]}"
                    )
        elif executor is not None and executor != "local":
            raise UserError(
                f"--executor {executor} says where a folder's traces are analysed: give a folder, or drop it"
            )
        if ops and lang not in (None, "en") and not as_json:
            raise UserError(f"--lang {lang}: the per-op model's view (--ops) is in English only: drop --lang")
        for out, option in ((html, "--html"), (md, "--md")):
            if out is None:
                continue
            if not folders:
                raise UserError(f"{option} writes the cross-rank view of a folder of traces: give a folder")
            from attnprof.outputs import refuse_inputs

            refuse_inputs(out, traces, option=option)
        return cls(
            traces=tuple(traces),
            files=tuple(files),
            folders=tuple(folders),
            pairs=pairs,
            region=region,
            threads=threads or "own",
            top=top,
            as_json=as_json,
            workload=workload,
            peak=roofs,
            max_memory=max_memory,
            html=html,
            md=md,
            lang=lang,
            ops=ops,
            executor=executor or "local",
            ray_address=ray_address,
        )

    def run(
        self,
        *,
        load_progress: Callable[[list[Path]], AbstractContextManager[Any]] | None = None,
        folder_progress: Callable[[Path], AbstractContextManager[FolderProgress]] | None = None,
    ) -> AnalyzeResult:
        """Analyse every argument on its route. load_progress: a context around the load of the
        files (given them); folder_progress: the progress of one folder's analysis."""
        from attnprof.analysis import analyze

        # Every route reads the region, workload, top and memory bound alike; only a trace's own
        # analysis (a file or a capture pair) takes --threads and --peak.
        common = _Common(region=self.region, workload=self.workload, top=self.top, max_memory=self.max_memory)
        one_trace = _OneTrace(**common, threads=self.threads, peak=self.peak)
        files: list[str | os.PathLike[str]] = list(self.files)
        with load_progress(list(self.files)) if load_progress is not None else nullcontext():
            found = analyze(files, **one_trace)
        results: dict[Path, TraceAnalysis] = dict(zip(self.files, found, strict=True))
        for p, (exe, cap) in self.pairs.items():
            results[p] = analyze(exe, capture=cap, **one_trace)
        runs: dict[Path, list[FolderRun]] = {}
        if self.folders:
            from attnprof.analysis.ranks.folder import analyze_folder

            for folder in self.folders:
                with folder_progress(folder) if folder_progress is not None else nullcontext() as view:
                    runs[folder] = analyze_folder(
                        folder,
                        **common,
                        executor=self.executor,
                        ray_address=self.ray_address,
                        progress=view,
                    )
        return AnalyzeResult(request=self, traces=results, folders=runs)


class _Common(TypedDict):
    region: str | None
    workload: Workload | None
    top: int
    max_memory: float | None


class _OneTrace(_Common):
    threads: str
    peak: tuple[float, float] | None


@dataclass(frozen=True)
class AnalyzeResult:
    request: AnalyzeRequest
    traces: dict[Path, TraceAnalysis]  # a file or capture-pair argument -> its analysis
    folders: dict[Path, list[FolderRun]]  # a folder argument -> its runs

    def folder_runs(self) -> list[FolderRun]:
        return [r for d in self.request.folders for r in self.folders[d]]

    def items(self) -> Iterator[tuple[Path, TraceAnalysis | list[FolderRun]]]:
        """Every argument in the order given, with its analysis or its folder's runs."""
        for p in self.request.traces:
            yield p, (self.folders[p] if p in self.folders else self.traces[p])


def parse_peak(text: str) -> tuple[float, float]:
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
    if capture is None and not folders:
        return {}  # the replay module (and the analysis modules it needs) loads with the analysis
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
