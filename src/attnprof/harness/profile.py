"""Profile one forward call the way the blog does.

torch.profiler with schedule(wait, warmup, active, repeat=1), CPU activity plus CUDA on a GPU,
record_function("attn_fwd") around each forward, under torch.no_grad() (the caller's); with
--backward, autograd on and record_function("attn_bwd") around the backward that follows each
forward, so an analysis can take either region (analyze --region attn_bwd). When the active steps
end, the trace is exported as .json.gz (Perfetto and TensorBoard load it) and the
key_averages table is written (.txt; sorted by device time on GPU, CPU time on CPU). With a
tensorboard_dir, torch.profiler.tensorboard_trace_handler also writes the trace there as
`<worker>.<timestamp>.pt.trace.json.gz`, the layout TensorBoard, HTA and `attnprof analyze DIR` read. Per-forward
figures come from the profiler's own event tree: ops under each attn_fwd, kernels they launched.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnprof.harness.memory import peak_from_trace_events
from attnprof.records import ProfileSummary

__all__ = ["ANNOTATION", "BACKWARD_ANNOTATION", "ProfileOutcome", "profile_call"]

ANNOTATION = "attn_fwd"
BACKWARD_ANNOTATION = "attn_bwd"


@dataclass
class ProfileOutcome:
    summary: ProfileSummary
    op_names: set[str] = field(default_factory=set)
    cpu_peak_bytes: int | None = None


def _descendants(event: Any) -> list[Any]:
    out: list[Any] = []
    stack = list(event.cpu_children)
    while stack:
        e = stack.pop()
        out.append(e)
        stack.extend(e.cpu_children)
    return out


def _region(events: list[Any], name: str) -> tuple[int, int, int, float, float, set[str], dict[str, int]]:
    """(instances, cpu ops, gpu ops, cpu us, gpu us, op names, op counts) under `name`."""
    from torch.autograd import DeviceType

    anns = [e for e in events if e.name == name and e.device_type == DeviceType.CPU]
    names: set[str] = set()
    cpu_ops = gpu_ops = 0
    cpu_us = gpu_us = 0.0
    counts: dict[str, int] = {}
    for ann in anns:
        desc = _descendants(ann)
        cpu_ops += len(desc)
        cpu_us += ann.cpu_time_total
        for e in desc:
            names.add(e.name)
            counts[e.name] = counts.get(e.name, 0) + 1
            for k in getattr(e, "kernels", []) or []:
                gpu_ops += 1
                gpu_us += float(getattr(k, "duration", 0.0))
    return len(anns), cpu_ops, gpu_ops, cpu_us, gpu_us, names, counts


def _summarize(events: list[Any], cuda: bool, annotation: str) -> tuple[ProfileSummary, set[str]]:
    n_f, cpu_ops, gpu_ops, cpu_us, gpu_us, names, counts = _region(events, annotation)
    n = max(1, n_f)
    top = sorted(counts, key=lambda k: -counts[k])[:10]
    summary = ProfileSummary(
        forwards=n_f,
        cpu_ops_per_forward=cpu_ops / n,
        gpu_ops_per_forward=gpu_ops / n if cuda else 0.0,
        cpu_time_us_per_forward=cpu_us / n,
        gpu_time_us_per_forward=gpu_us / n if cuda else 0.0,
        top_ops=top,
    )
    n_b, b_cpu_ops, b_gpu_ops, b_cpu_us, b_gpu_us, _names, _counts = _region(events, BACKWARD_ANNOTATION)
    if n_b:
        # on CUDA autograd runs the backward on its own thread: its ops are not children of
        # attn_bwd in the CPU tree, so per-backward op counts there come from the trace analysis
        summary.backwards = n_b
        summary.cpu_ops_per_backward = b_cpu_ops / n_b
        summary.cpu_time_us_per_backward = b_cpu_us / n_b
        summary.gpu_ops_per_backward = b_gpu_ops / n_b if cuda else 0.0
        summary.gpu_time_us_per_backward = b_gpu_us / n_b if cuda else 0.0
    return summary, names


def _table(prof: Any, cuda: bool) -> str:
    averages = prof.key_averages()
    for key in ("cuda_time_total", "device_time_total") if cuda else ("cpu_time_total",):
        try:
            # wide name column: the default cuts kernel names at 55 characters
            return str(averages.table(sort_by=key, row_limit=25, max_name_column_width=100))
        except (AttributeError, KeyError, ValueError):
            continue
    return str(averages.table(row_limit=25))


def _lean_pass(call: Callable[[], Any], *, cuda: bool, device: str, steps: tuple[int, int, int],
               annotation: str) -> tuple[float, float] | None:  # fmt: skip
    """(CPU, GPU) µs per forward from a lean profiler pass: CPU (+ CUDA) activity only, no shapes,
    memory or stacks, nothing exported. The rich pass that follows records shapes and memory for
    the analysis and costs more per op; the two against the clean time give the profiler's
    inflation with and without that recording."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    wait, warmup, active = steps
    captured: dict[str, Any] = {}
    with profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda prof: captured.setdefault("events", list(prof.events())),
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
    ) as prof:
        for _ in range(wait + warmup + active):
            with record_function(annotation):
                out = call()
            del out
            if cuda:
                torch.cuda.synchronize(device)
            prof.step()
    n, _cpu_ops, _gpu_ops, cpu_us, gpu_us, _names, _counts = _region(captured.get("events", []), annotation)
    return (cpu_us / n, gpu_us / n if cuda else 0.0) if n else None


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
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    # Kineto prints "USDT: ... profiler_start/stop" on stderr for every profiled variant, at its
    # USDT log level (5). Level 6 silences it; read at each profiler start, so set here. A value
    # the user exported (to see Kineto's own errors: KINETO_LOG_LEVEL=4) is kept.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    wait, warmup, active = steps
    captured: dict[str, Any] = {}
    lean = _lean_pass(call, cuda=cuda, device=device, steps=steps, annotation=annotation)

    def ready(prof: Any) -> None:
        if trace_path is not None:
            trace_path.parent.mkdir(parents=True, exist_ok=True)
        if tensorboard_dir is not None:
            # Kineto saves a trace once: the handler writes it, and the run directory gets a copy
            from torch.profiler import tensorboard_trace_handler

            worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"  # the handler's default
            pattern = f"{worker}.*.pt.trace.json.gz"
            before = set(tensorboard_dir.glob(pattern))
            tensorboard_trace_handler(str(tensorboard_dir), worker_name=worker, use_gzip=True)(prof)
            written = sorted(set(tensorboard_dir.glob(pattern)) - before)
            if trace_path is not None and written:
                shutil.copyfile(written[-1], trace_path)
        elif trace_path is not None:
            prof.export_chrome_trace(str(trace_path))
        if table_path is not None:
            table_path.parent.mkdir(parents=True, exist_ok=True)
            table_path.write_text(_table(prof, cuda) + "\n")
        captured["events"] = list(prof.events())

    with profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=ready,
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        for _ in range(wait + warmup + active):
            with record_function(annotation):
                out = call()
            if backward is not None:
                with record_function(BACKWARD_ANNOTATION):
                    backward(out)
            del out
            if cuda:
                # keep each step's GPU work inside its step; the annotation itself stays as in the blog
                torch.cuda.synchronize(device)
            prof.step()

    summary, names = _summarize(captured.get("events", []), cuda, annotation)
    if lean is not None:
        summary.lean_cpu_time_us_per_forward, summary.lean_gpu_time_us_per_forward = lean
    outcome = ProfileOutcome(summary=summary, op_names=names)
    if not cuda and trace_path is not None and trace_path.exists():
        with gzip.open(trace_path, "rt") as fh:
            events = json.load(fh).get("traceEvents", [])
        ranges = [
            (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
            for e in events
            if e.get("name") == annotation and e.get("ph") == "X" and e.get("cat") == "user_annotation"
        ]
        if backward is not None:
            # one range per step: from its forward's start to its backward's end, so the peak
            # includes what the forward saved for the backward
            ends = sorted(
                float(e["ts"]) + float(e.get("dur", 0))
                for e in events
                if e.get("name") == BACKWARD_ANNOTATION
                and e.get("ph") == "X"
                and e.get("cat") == "user_annotation"
            )
            ranges = [(s, next((x for x in ends if x >= e), e)) for s, e in sorted(ranges)]
        outcome.cpu_peak_bytes = peak_from_trace_events(events, ranges)
    return outcome
