"""Profile one forward call the way the blog does.

torch.profiler with schedule(wait, warmup, active, repeat=1), CPU activity plus CUDA on a GPU,
record_function("attn_fwd") around each forward, under torch.no_grad() (the caller's); with
--backward, autograd on and record_function("attn_bwd") around the backward that follows each
forward, so an analysis can take either region (analyze --region attn_bwd). When the active steps
end, the trace is exported as .json.gz (Perfetto and TensorBoard load it) and the
key_averages table is written (.txt; sorted by device time on GPU, CPU time on CPU). With a
tensorboard_dir, torch.profiler.tensorboard_trace_handler also writes the trace there as
`<worker>.<timestamp>.pt.trace.json.gz`, the layout TensorBoard, HTA and `attnprof analyze DIR` read.
Two passes profile the same steps: a lean one (CPU + CUDA activity only, no shapes, memory or
stacks), whose trace gives the times that reports split into per-op and per-category shares,
timelines and diffs, then a rich one (shapes and memory) for everything else. With a trace_path
the lean trace is kept beside it as `<name>.lean.json.gz` (lean_trace_path: `traces/<tag>.json.gz`
-> `traces/<tag>.lean.json.gz`); the tensorboard layout gets the rich trace only.
Per-forward figures are counted in the exported trace by attnprof.analysis.attribution.regions, the one
definition of which ops and device ops belong to an instance of an annotation (an analysis of
the same trace reports the same counts); the CPU peak memory comes from the profiler's own event
tree (its allocation events, which the trace shows as [memory] events).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnprof.harness.memory import peak_rise
from attnprof.outputs import write_atomic
from attnprof.records import ProfileSummary

__all__ = [
    "ANNOTATION",
    "BACKWARD_ANNOTATION",
    "LEAN_SUFFIX",
    "ProfileOutcome",
    "lean_trace_path",
    "profile_call",
]

ANNOTATION = "attn_fwd"
BACKWARD_ANNOTATION = "attn_bwd"
# the lean pass's trace beside the rich one: traces/<tag>.json.gz -> traces/<tag>.lean.json.gz
LEAN_SUFFIX = ".lean"


def lean_trace_path(trace_path: Path) -> Path:
    """Where the lean pass's trace of `trace_path` (the rich one) is kept: the same name with
    .lean before its .json / .json.gz (or .pt.trace.json.gz) suffix."""
    name = trace_path.name
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json"):
        if name.endswith(suffix):
            return trace_path.with_name(name[: -len(suffix)] + LEAN_SUFFIX + suffix)
    return trace_path.with_name(name + LEAN_SUFFIX)


@dataclass
class ProfileOutcome:
    summary: ProfileSummary
    op_names: set[str] = field(default_factory=set)
    cpu_peak_bytes: int | None = None
    lean_trace_path: Path | None = None  # the lean pass's kept trace; None when not kept


@dataclass
class _PerInstance:
    """One annotation's instances in an exported trace, as attnprof.analysis.attribution.regions finds them
    (the same ops and device ops an analysis of the trace counts per instance)."""

    instances: int = 0
    cpu_ops: int = 0
    gpu_ops: int = 0
    cpu_us: float = 0.0
    gpu_us: float = 0.0
    counts: Counter[str] = field(default_factory=Counter)  # CPU op name -> count, in order seen


def _per_instance(trace_path: Path, names: tuple[str, ...]) -> dict[str, _PerInstance]:
    """For each annotation in `names` the trace holds: its instances, their CPU ops (every
    nesting depth, on the annotation's thread), their device ops and times."""
    from attnprof.analysis.attribution.links import link
    from attnprof.analysis.attribution.regions import find_region
    from attnprof.trace.load import load_trace
    from attnprof.trace.model import Keep

    # the op counts read no Python frame and no recorded input: neither is kept
    trace = load_trace(trace_path, keep=Keep(frames=False, inputs=False))
    links = link(trace)
    out: dict[str, _PerInstance] = {}
    for name in names:
        if name not in trace.names:
            continue
        region = find_region(trace, links, name)
        agg = _PerInstance(instances=len(region.instances))
        gpu_dur = trace.dur[links.gpu_rows]
        for inst in region.instances:
            agg.cpu_ops += int(inst.cpu_ops.size)
            agg.gpu_ops += int(inst.gpu.size)
            agg.cpu_us += inst.cpu_time_us
            agg.gpu_us += float(gpu_dur[inst.gpu].sum()) if inst.gpu.size else 0.0
            agg.counts.update(trace.names[int(i)] for i in trace.name[inst.cpu_ops].tolist())
        out[name] = agg
    return out


def _summarize(trace_path: Path, cuda: bool, annotation: str) -> tuple[ProfileSummary, set[str]]:
    regions = _per_instance(trace_path, (annotation, BACKWARD_ANNOTATION))
    fwd = regions.get(annotation, _PerInstance())
    n = max(1, fwd.instances)
    summary = ProfileSummary(
        forwards=fwd.instances,
        cpu_ops_per_forward=fwd.cpu_ops / n,
        gpu_ops_per_forward=fwd.gpu_ops / n if cuda else 0.0,
        cpu_time_us_per_forward=fwd.cpu_us / n,
        gpu_time_us_per_forward=fwd.gpu_us / n if cuda else 0.0,
        top_ops=[name for name, _ in fwd.counts.most_common(10)],
    )
    bwd = regions.get(BACKWARD_ANNOTATION)
    if bwd is not None and bwd.instances:
        # device work the autograd engine launches from its own threads (CUDA) belongs to
        # attn_bwd too (the analysis's "autograd thread" rule)
        nb = bwd.instances
        summary.backwards = nb
        summary.cpu_ops_per_backward = bwd.cpu_ops / nb
        summary.cpu_time_us_per_backward = bwd.cpu_us / nb
        summary.gpu_ops_per_backward = bwd.gpu_ops / nb if cuda else 0.0
        summary.gpu_time_us_per_backward = bwd.gpu_us / nb if cuda else 0.0
    return summary, set(fwd.counts)


def _cpu_memory(
    prof: Any, annotation: str, backward: bool
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """From the profiler's own event tree: (time, CPU Total Allocated) at every allocation and
    free, and one range per step to look for the peak in: the annotation, or with a backward
    from the forward's start to the end of the backward that follows it (so the peak includes
    what the forward saved for the backward). Nanoseconds, one clock for both."""
    from torch._C._profiler import _EventType

    totals: list[tuple[int, int]] = []
    fwd: list[tuple[int, int]] = []
    bwd_ends: list[int] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        tag, extra = e.typed
        if tag == _EventType.Allocation and extra.device.type == "cpu":
            totals.append((e.start_time_ns, int(extra.total_allocated)))
        elif tag == _EventType.TorchOp and e.name == annotation:
            fwd.append((e.start_time_ns, e.end_time_ns))
        elif tag == _EventType.TorchOp and e.name == BACKWARD_ANNOTATION:
            bwd_ends.append(e.end_time_ns)
    ranges = sorted(fwd)
    if backward:
        ends = sorted(bwd_ends)
        ranges = [(s, next((x for x in ends if x >= e), e)) for s, e in ranges]
    return totals, ranges


def _table(prof: Any, cuda: bool) -> str:
    averages = prof.key_averages()
    for key in ("cuda_time_total", "device_time_total") if cuda else ("cpu_time_total",):
        try:
            # wide name column: the default cuts kernel names at 55 characters
            return str(averages.table(sort_by=key, row_limit=25, max_name_column_width=100))
        except (AttributeError, KeyError, ValueError):
            continue
    return str(averages.table(row_limit=25))


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Hold Ctrl-C (and SIGTERM where the CLI turns it into one) until the block ends, then raise
    it. For torch.profiler's state transitions (start, step, stop): a KeyboardInterrupt landing
    inside one leaves the profiler half made, and its __exit__ then raises "AssertionError:
    Profiler must be initialized" in the interrupt's place or crashes in C++ (seen on torch 2.13:
    a segfault in _start_trace). The transitions take milliseconds (the last step exports the
    trace), so Ctrl-C is still honoured at once. Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if callable(handler):  # Python raises on it (default_int_handler, the CLI's SIGTERM)
            previous[sig] = signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            raise KeyboardInterrupt


@contextmanager
def _transitions_whole(prof: Any) -> Iterator[Any]:
    """`with prof:`, with its start and stop shielded from Ctrl-C (sigint_deferred)."""
    with sigint_deferred():
        prof.__enter__()
    try:
        yield prof
    finally:
        with sigint_deferred():
            prof.__exit__(None, None, None)


@dataclass(frozen=True)
class _Steps:
    """The profiled steps both passes run: wait + warmup + active steps of `call` under the
    annotation."""

    call: Callable[[], Any]
    cuda: bool
    device: str
    steps: tuple[int, int, int]
    annotation: str

    def run(self, *, backward: Callable[[Any], Any] | None, rich: bool, ready: Callable[[Any], None]) -> None:
        """Profile the steps (each with `backward` under attn_bwd when given). rich: record
        shapes and memory for the analysis; lean: CPU (+ CUDA) activity only, which costs the
        profiler less per op. `ready` gets the profiler once the active steps end."""
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function, schedule

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        wait, warmup, active = self.steps
        prof = profile(
            activities=activities,
            schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
            on_trace_ready=ready,
            record_shapes=rich,
            profile_memory=rich,
            with_stack=False,
        )
        with _transitions_whole(prof):
            for _ in range(wait + warmup + active):
                with record_function(self.annotation):
                    out = self.call()
                if backward is not None:
                    with record_function(BACKWARD_ANNOTATION):
                        backward(out)
                del out
                if self.cuda:
                    # keep each step's GPU work inside its step; the annotation itself stays as in the blog
                    torch.cuda.synchronize(self.device)
                with sigint_deferred():
                    prof.step()


def _lean_pass(steps: _Steps, keep: Path | None) -> tuple[float, float] | None:
    """(CPU, GPU) µs per forward from a lean profiler pass (no shapes, memory or stacks). The
    rich pass that follows records shapes and memory for the analysis and costs more per op;
    the two against the clean time give the profiler's inflation with and without that
    recording. Its trace is exported after the active steps (outside what it measures) to
    `keep` (the times reports split into shares are read from it), else to a temporary file,
    and counted like the rich pass's."""
    with tempfile.TemporaryDirectory() as tmp:
        path = keep if keep is not None else Path(tmp) / "lean.json.gz"

        def ready(prof: Any) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(path))

        steps.run(backward=None, rich=False, ready=ready)
        if not path.exists():
            return None
        fwd = _per_instance(path, (steps.annotation,)).get(steps.annotation)
    if fwd is None or not fwd.instances:
        return None
    n = fwd.instances
    return fwd.cpu_us / n, fwd.gpu_us / n if steps.cuda else 0.0


def profile_call(
    call: Callable[[], Any],
    *,
    device: str,
    steps: tuple[int, int, int],
    trace_path: Path | None,
    table_path: Path | None,
    tensorboard_dir: Path | None = None,
    worker_name: str | None = None,
    annotation: str = ANNOTATION,
    backward: Callable[[Any], Any] | None = None,
) -> ProfileOutcome:
    """Run `call` for wait + warmup + active profiler steps and return what the active ones showed.
    Each call runs inside record_function(annotation): attn_fwd for one attention call, model_step
    for a whole model step (attnprof model). With `backward`, each step also runs backward(output)
    under attn_bwd."""
    # Kineto prints "USDT: ... profiler_start/stop" on stderr for every profiled variant, at its
    # USDT log level (5). Level 6 silences it; read at each profiler start, so set here. A value
    # the user exported (to see Kineto's own errors: KINETO_LOG_LEVEL=4) is kept.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    cuda = device.startswith("cuda")
    captured: dict[str, Any] = {}
    profiled = _Steps(call=call, cuda=cuda, device=device, steps=steps, annotation=annotation)
    keep = lean_trace_path(trace_path) if trace_path is not None else None
    if keep is not None:
        keep.unlink(missing_ok=True)  # a stale one from an earlier run must not pass for this one's
    lean = _lean_pass(profiled, keep)
    with tempfile.TemporaryDirectory() as tmp:
        # the per-forward figures are read from the exported trace: one without a trace_path
        # goes to a temporary file
        path = trace_path if trace_path is not None else Path(tmp) / "trace.json.gz"

        def ready(prof: Any) -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if tensorboard_dir is not None:
                # Kineto saves a trace once: the handler writes it, and the run directory gets a copy
                from torch.profiler import tensorboard_trace_handler

                worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"  # the handler's default
                pattern = f"{worker}.*.pt.trace.json.gz"
                before = set(tensorboard_dir.glob(pattern))
                tensorboard_trace_handler(str(tensorboard_dir), worker_name=worker, use_gzip=True)(prof)
                written = sorted(set(tensorboard_dir.glob(pattern)) - before)
                if written:
                    shutil.copyfile(written[-1], path)
            else:
                prof.export_chrome_trace(str(path))
            if table_path is not None:
                table_path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(table_path, _table(prof, cuda) + "\n")
            if not cuda:
                captured["memory"] = _cpu_memory(prof, annotation, backward is not None)

        profiled.run(backward=backward, rich=True, ready=ready)
        summary, names = _summarize(path, cuda, annotation)
    if lean is not None:
        summary.lean_cpu_time_us_per_forward, summary.lean_gpu_time_us_per_forward = lean
    outcome = ProfileOutcome(summary=summary, op_names=names)
    if keep is not None and keep.is_file():
        if lean is not None:
            outcome.lean_trace_path = keep
        else:  # no forward in it: nothing a report could read, and no file the record does not name
            keep.unlink()
    if "memory" in captured:
        outcome.cpu_peak_bytes = peak_rise(*captured["memory"])
    return outcome
