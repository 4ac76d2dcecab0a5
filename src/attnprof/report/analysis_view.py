"""Terminal rendering of a TraceAnalysis with rich, in at most 100 columns.

Renders the record as it is: device and trace summary, top kernels, time by category, the
region, launch APIs, the roofline when there is one, and the findings. Computes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from attnprof.report.console import make_console, print_table
from attnprof.units import fmt_us

if TYPE_CHECKING:
    from attnprof.analysis.result import (
        AttentionShare,
        Device,
        GraphReplays,
        Occupancy,
        Share,
        TimeShare,
        TraceAnalysis,
    )

__all__ = ["render_analysis"]

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _tc(v: bool | None) -> Text:
    if v is None:
        return Text("?", style="dim")
    return Text("yes", style="green") if v else Text("no", style="red")


def _occ(o: Occupancy | None) -> str:
    if o is None:
        return "-"
    ach = o.achieved_pct
    th = o.theoretical_pct
    a = "n/m" if not o.measured else ("-" if ach is None else f"{ach:.0f}")
    t = "-" if th is None else f"{th:.0f}"
    return f"{a}/{t}"


def _device_line(d: Device) -> str:
    if d.kind == "cpu":
        return "CPU only (no device events)"
    acc = d.accelerator
    if d.name and acc and acc != "cuda":
        return f"{d.name} ({acc})" + (f", {d.count} devices listed" if d.count > 1 else "")
    if d.name:
        cc = d.compute_capability
        parts = [d.name]
        if cc:
            parts.append(f"sm{cc.replace('.', '')}")
        if d.num_sms:
            parts.append(f"{d.num_sms} SMs")
        if d.count > 1:
            parts.append(f"{d.count} devices listed")
        return ", ".join(parts)
    return "GPU (no deviceProperties in the trace)" if d.kind == "gpu" else "unknown"


def _graphs_part(g: GraphReplays, total: float) -> str | None:
    """ "graph replays 97% (95% without their CPU op, no capture trace)": how much of the device
    time the share above could only attribute by kernel name."""
    if not g.replayed_ops or total <= 0:
        return None
    rest = "no capture trace" if g.capture is None else f"capture {g.capture}"
    return (
        f"graph replays {100.0 * g.replayed_us / total:.0f}% "
        f"({100.0 * g.unattributed_us / total:.0f}% without their CPU op, {rest})"
    )


def _share_line(sh: Share) -> str | None:
    """ "attention 12% (fused 12%, unfused 0%; fwd 8%, bwd 4%) | GEMM 64% | ...": the first thing
    a reader of a model trace wants. None without device time."""
    total = sh.device_time_us or 0.0
    if total <= 0:
        return _cpu_share_line(sh)
    att = sh.attention

    def p(us: float) -> str:
        return f"{100.0 * us / total:.0f}%"

    prov = f", by provenance {p(att.provenance_us)}" if att.provenance_us > 0 else ""
    parts = [
        f"attention {p(att.time_us)} (fused {p(att.fused_us)}, unfused {p(att.unfused_us)}{prov}; "
        f"fwd {p(att.fwd_us)}, bwd {p(att.bwd_us)})"
    ]
    comm = sh.communication
    for part, label in (
        (sh.gemm, "GEMM"),
        (sh.conv, "conv"),
        (sh.communication, "comm"),
        (sh.memory, "memory"),
    ):
        parts.append(f"{label} {p(part.time_us)}")
        if part is comm and comm.exposed_us is not None and comm.hidden_pct is not None:
            # the share sums durations; exposed is the time no compute hides (a union)
            parts[-1] += f" ({fmt_us(comm.exposed_us)} exposed, {comm.hidden_pct:.0f}% hidden)"
    parts.append(f"other {p(sh.other.time_us)}")
    return f"device time {fmt_us(total)}: " + " | ".join(parts)


def _cpu_share_line(sh: Share) -> str | None:
    """A trace without device time: the same line by CPU self time, saying so."""
    total = sh.cpu_self_time_us or 0.0
    if total <= 0:
        return None

    def p(part: TimeShare | AttentionShare | None) -> str:
        return f"{100.0 * (part.time_us if part else 0.0) / total:.0f}%"

    parts: list[tuple[str, TimeShare | AttentionShare | None]] = [
        ("attention", sh.attention),
        ("conv", sh.conv),
        ("GEMM", sh.gemm),
        ("norm", sh.norm),
        ("elementwise", sh.elementwise),
        ("comm", sh.communication),
        ("memory", sh.memory),
        ("other", sh.other),
    ]
    return f"CPU self time {fmt_us(total)} (no device time): " + " | ".join(f"{k} {p(v)}" for k, v in parts)


def _attention_rules_lines(sh: Share) -> list[str]:
    """Which rule made how much device time attention, and the kernels only their names make
    attention (the caveat: nothing the trace recorded about their origin says so)."""
    total = sh.device_time_us or 0.0
    att = sh.attention
    if total <= 0 or not att.rules:
        return []
    rules = ", ".join(f"{rule} {100.0 * us / total:.1f}%" for rule, us in att.rules.items())
    out = [f"attention by rule (of device time): {rules}"]
    if att.name_only_kernels:
        out.append(
            f"attention by kernel name only ({100.0 * att.name_only_us / total:.1f}% of device time; no "
            f"launching op, enclosing op or range says attention): {', '.join(att.name_only_kernels)}"
        )
    return out


def _replayed(d: TraceAnalysis, console: Console) -> None:
    """Graph-replayed kernels with the CPU op (and Python frame) that captured them."""
    ks = d.graphs.kernels
    if not ks:
        return
    table = Table(
        title="Replayed kernels and their captured ops", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0)
    )
    for col, width, justify in (
        ("kernel", 28, "left"),
        ("total", 8, "right"),
        ("captured op", 26, "left"),
        ("python frame", 30, "left"),
    ):
        table.add_column(col, width=width, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    for k in ks:
        table.add_row(k.name, fmt_us(k.time_us), k.op, k.frame or "-")
    print_table(console, table)


def _compiled(d: TraceAnalysis, console: Console) -> None:
    """Compiled code's share, and each fused kernel with the ops its name lists."""
    c = d.compiled
    if c.time_us <= 0 or c.pct is None:
        return
    graphs = len(c.graphs)
    by_name = f"; {fmt_us(c.name_only_us)} of it by kernel name only" if c.name_only_us > 0 else ""
    console.print(
        f"compiled code (torch.compile): {c.pct:.0f}% of device time ({fmt_us(c.time_us)}), in "
        f"{graphs} compiled graphs{by_name}",
        overflow="fold",
    )
    fused = [k for k in c.kernels if k.fused_ops is not None]
    if not fused:
        return
    table = Table(title="Fused kernels (torch.compile)", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0))
    for col, width, justify in (
        ("kernel", 30, "left"),
        ("n", 6, "right"),
        ("total", 8, "right"),
        ("fused ops", 30, "left"),
    ):
        table.add_column(col, width=width, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    for k in fused:
        ops = ", ".join(k.fused_ops or []) or "(not in the name)"
        table.add_row(k.name, f"{k.count:,}", fmt_us(k.time_us), ops)
    print_table(console, table)


def _phases(d: TraceAnalysis, console: Console) -> None:
    """One line per inference phase: its share of device time and its attention share."""
    ph = d.phases
    for p in ph.phases:
        pct = f"{p.pct:.0f}%" if p.pct is not None else "-"
        att = f"{p.attention_pct:.1f}%" if p.attention_pct is not None else "-"
        steps = f"{p.steps} step{'s' if p.steps != 1 else ''}, " if p.steps else ""
        line = (
            f"{p.phase} ({ph.source}): {steps}{pct} of device time ({fmt_us(p.device_us)}), attention {att}"
        )
        b = p.batches[0] if len(p.batches) == 1 else None
        if b is not None and b.prefill_requests is not None:
            line += (
                f"; batch: {b.prefill_requests} prefill requests ({b.prefill_query_tokens} query tokens), "
                f"{b.decode_requests} decode requests ({b.decode_kv_tokens} KV tokens)"
            )
        if p.achieved_tflops is not None:
            line += f"; modelled ops ({fmt_us(p.modelled_us)}): {p.achieved_tflops:.3g} TFLOP/s"
        if p.attention_tbps is not None:
            bw = f" ({p.attention_bw_pct:.0f}% of HBM peak)" if p.attention_bw_pct is not None else ""
            line += f"; attention {p.attention_tbps:.3g} TB/s{bw}"
        if p.phase == "mixed":
            line += "; prefill and decode share its kernels, so its time is not split"
        console.print(line, overflow="fold")
    if ph.phases and ph.unknown_us > 0:
        console.print(
            f"no phase: {fmt_us(ph.unknown_us)} ({ph.unknown_pct:.0f}% of device time)", overflow="fold"
        )


def render_analysis(d: TraceAnalysis, console: Console | None = None) -> None:
    if console is None:
        console = make_console()
    t, tr = d.totals, d.trace
    console.print(Text(f"{d.source}", style="bold"))
    share = _share_line(d.share)
    graphs = _graphs_part(d.graphs, d.share.device_time_us or 0.0)
    if share and graphs:
        share += f" | {graphs}"
    if share:
        console.print(Text(share, style="bold"), overflow="fold")
        for rules_line in _attention_rules_lines(d.share):
            console.print(Text(rules_line), overflow="fold")
    console.print(f"device: {_device_line(d.device)}")
    rank = f", rank {tr.rank}" if tr.rank is not None else ""
    console.print(
        f"events: {tr.events:,} ({tr.kept_events:,} analysed{rank}); "
        f"kernels {t.kernels:,} ({fmt_us(t.kernel_time_us)}), memcpy {t.memcpy:,}, "
        f"memset {t.memset:,}, cpu ops {t.cpu_ops:,}"
    )
    for note in d.repairs:
        console.print(Text(f"repaired: {note}", style="yellow"))
    for note in d.warnings:
        console.print(Text(f"warning: {note}", style="yellow"))

    if d.kernels:
        table = Table(
            title=f"Top kernels ({len(d.kernels)} of {t.unique_kernels})",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            padding=(0, 0),
        )
        # fixed widths: 28 + 11 + 15 + 3 + 6 + 8 + 8 + 8, plus 7 one-space gaps = 94 columns
        for col, width, justify in (
            ("kernel", 28, "left"),
            ("category", 11, "left"),
            ("family", 15, "left"),
            ("TC", 3, "center"),
            ("n", 6, "right"),
            ("total", 8, "right"),
            ("mean", 8, "right"),
            ("occ a/t%", 8, "right"),
        ):
            table.add_column(col, width=width, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
        for k in d.kernels:
            table.add_row(
                k.short_name,
                k.category,
                k.family,
                _tc(k.tensor_cores),
                f"{k.count:,}",
                fmt_us(k.time_us),
                fmt_us(k.mean_us),
                _occ(k.occupancy),
            )
        print_table(console, table)
        console.print(
            Text(
                "TC: tensor cores (? = cannot tell from the name); occ a/t%: achieved / "
                "theoretical occupancy, n/m = not measured",
                style="dim",
            )
        )

    _replayed(d, console)
    _compiled(d, console)
    _phases(d, console)

    if d.categories:
        cat = Table(title="GPU time by category", box=box.SIMPLE_HEAD, pad_edge=False)
        cat.add_column("category")
        cat.add_column("count", justify="right")
        cat.add_column("time", justify="right")
        cat.add_column("%", justify="right")
        for c in d.categories:
            cat.add_row(c.category, f"{c.count:,}", fmt_us(c.time_us), f"{c.pct_time:.1f}")
        console.print(cat)

    for r in d.regions:
        reg = Table(
            title=f"Region: {r.name} ({r.selector}), per instance", box=box.SIMPLE_HEAD, pad_edge=False
        )
        # a CPU-only trace has no device: no device columns of zeros, no "device idle 100%"
        cpu_only = d.device.kind == "cpu"
        # graph replays of captured ranges ran no CPU ops of their own: not a measured zero
        replayed = r.instances > 0 and r.replayed_instances == r.instances
        cols = [
            ("instances", str(r.instances)),
            ("cpu ops", "graph replay" if replayed else f"{r.cpu_ops_per_instance:g}"),
            ("gpu ops", f"{r.gpu_ops_per_instance:g}"),
            ("cpu time", "graph replay" if replayed else fmt_us(r.cpu_time_us_per_instance)),
            # the sum of the device-op durations (overlapping streams each count), and their
            # union (busy), never more than the span
            ("gpu kernel sum", fmt_us(r.gpu_time_us_per_instance)),
            ("gpu busy", fmt_us(r.gpu_busy_union_us_per_instance)),
            ("gpu span", fmt_us(r.gpu_span_us_per_instance)),
        ]
        if cpu_only:
            cols = [c for c in cols if not c[0].startswith("gpu")]
        for col, _ in cols:
            reg.add_column(col, justify="right")
        reg.add_row(*(v for _, v in cols))
        console.print(reg)
        att = r.attribution
        if att.rules:
            rules = ", ".join(f"{k} {v:g}" for k, v in att.rules.items())
            threads = ", ".join(f"{x.thread} {x.gpu_ops_per_instance:g}" for x in att.threads[:4])
            console.print(
                Text(
                    f"device ops per instance by rule: {rules}; by launching thread: {threads}", style="dim"
                ),
                overflow="fold",
            )
        bwd = r.backward
        if bwd.gpu_ops_per_instance:
            console.print(
                Text(
                    f"linked backward ({bwd.linked_by}): {bwd.gpu_ops_per_instance:g} device ops, "
                    f"{fmt_us(bwd.gpu_time_us_per_instance)} per instance",
                    style="dim",
                ),
                overflow="fold",
            )
        idle = r.idle
        if idle.window_us_per_instance and not cpu_only:
            host = ", ".join(
                f"{k.replace('_', ' ')} {fmt_us(v)}"
                for k, v in idle.host_during_idle_us_per_instance.items()
                if v
            )
            console.print(
                Text(
                    f"device idle {idle.idle_pct:.0f}% ({fmt_us(idle.idle_us_per_instance)} of "
                    f"{fmt_us(idle.window_us_per_instance)} per instance); host meanwhile: {host or 'nothing'}",
                    style="dim",
                ),
                overflow="fold",
            )
        if r.gpu_ops and len(r.gpu_ops) <= 30:
            seq = " -> ".join(f"{o.category}" for o in r.gpu_ops)
            console.print(Text(f"GPU ops in order (first instance): {seq}", style="dim"), overflow="fold")
        elif r.cpu_ops_by_name and not r.gpu_ops:
            # by self time, not by count: aten::empty x2000 costs less than one convolution
            ops = ", ".join(
                f"{o.name} {fmt_us(o.self_us_per_instance)} (x{o.per_instance:g})"
                for o in r.cpu_ops_by_name[:8]
            )
            console.print(Text(f"CPU ops by self time per instance: {ops}", style="dim"), overflow="fold")

    if d.launch_apis:
        apis = ", ".join(f"{a.api} {a.gpu_ops:,}" for a in d.launch_apis)
        console.print(f"launch APIs (GPU ops): {apis}", overflow="fold")

    roof = d.roofline
    if roof is not None:
        head = f"roofline ({roof.workload}; {roof.basis}): "
        if roof.achieved_tflops is None or roof.achieved_tbps is None:  # no time in the region
            console.print(f"{head}not measured ({roof.note or 'no time in the region'})", overflow="fold")
        else:
            pct = roof.pct_of_peak_flops
            peak = (
                f" = {pct:.1f}% of {roof.peak_tflops:.3g} TFLOP/s" if pct is not None else f" ({roof.note})"
            )
            console.print(
                f"{head}{roof.achieved_tflops:.3g} TFLOP/s{peak}, {roof.achieved_tbps:.3g} TB/s",
                overflow="fold",
            )

    console.print(Text("Findings", style="bold"))
    if not d.findings:
        console.print("  none")
    for f in d.findings:
        line = Text("  ")
        line.append(f"{f.severity:<7} ", style=_SEVERITY_STYLE.get(f.severity, ""))
        line.append(f"{f.code}: ", style="bold")
        line.append(f.message)
        console.print(line, overflow="fold")
    console.print()
