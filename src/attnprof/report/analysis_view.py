"""Terminal rendering of a TraceAnalysis with rich, in at most 100 columns.

Renders the record as it is: device and trace summary, top kernels, time by category, the
region, launch APIs, the roofline when there is one, and the findings. Computes nothing.

Every word goes through the report catalogs (report/i18n/*.po, keys `av.*`), so `attnprof
analyze --lang id` prints the same view in Indonesian. A finding's message is its catalog
sentence, in English the analysis's own message; in another language the same sentence from the
same evidence, as the reports give it (report/finding_text.py `finding_message`). Notes the analysis writes (warnings, repairs, the
roofline's basis) stay as the analysis words them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from attnprof.analysis.records.trace_records import NO_CATEGORY
from attnprof.report.console import make_console, print_table
from attnprof.report.finding_text import finding_message
from attnprof.report.i18n import Translator
from attnprof.units import fmt_num, fmt_us, number_locale

if TYPE_CHECKING:
    from attnprof.analysis.records.result import (
        AttentionShare,
        Device,
        GraphReplays,
        Occupancy,
        RegionStat,
        Share,
        TimeShare,
        TraceAnalysis,
    )

__all__ = ["render_analysis"]

_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _tc(v: bool | None, t: Translator) -> Text:
    if v is None:
        return Text("?", style="dim")
    return Text(t("av.yes"), style="green") if v else Text(t("av.no"), style="red")


def _occ(o: Occupancy | None, t: Translator) -> str:
    if o is None:
        return "-"
    ach = o.achieved_pct
    th = o.theoretical_pct
    a = t("av.not_measured_short") if not o.measured else ("-" if ach is None else fmt_num(ach, ".0f"))
    theo = "-" if th is None else fmt_num(th, ".0f")
    return f"{a}/{theo}"


def _category(c: str, t: Translator) -> str:
    """The terminal's English keeps the short category ids (gemm); another language its words."""
    return c if t.lang == "en" else t.maybe(f"category.{c}", c)


def _not_read(d: Device, t: Translator) -> str:
    """ "cuda_profiler_range 77": the device events the analysis did not read, by category."""
    names = {NO_CATEGORY: t("av.no_category")}
    return ", ".join(f"{names.get(c, c)} {fmt_num(n, ',')}" for c, n in (d.not_read or {}).items())


def _device_line(d: Device, t: Translator) -> str:
    """The device the trace ran on; device work the analysis did not read is said, so that a
    trace of such work alone (a CUPTI range profiler's) is never called CPU only."""
    if d.not_read and d.kind != "gpu":
        return t("av.device_not_read", events=_not_read(d, t))
    line = _device_named(d, t)
    return line + t("av.not_read_part", events=_not_read(d, t)) if d.not_read else line


def _device_named(d: Device, t: Translator) -> str:
    if d.kind == "cpu":
        return t("av.cpu_only")
    acc = d.accelerator
    if d.name and acc and acc != "cuda":
        return f"{d.name} ({acc})" + (", " + t("av.devices_listed", n=d.count) if d.count > 1 else "")
    if d.name:
        cc = d.compute_capability
        parts = [d.name]
        if cc:
            parts.append(f"sm{cc.replace('.', '')}")
        if d.num_sms:
            parts.append(t("av.sms", n=d.num_sms))
        if d.count > 1:
            parts.append(t("av.devices_listed", n=d.count))
        return ", ".join(parts)
    return t("av.gpu_no_props", field="deviceProperties") if d.kind == "gpu" else t("av.unknown")


def _graphs_part(g: GraphReplays, total: float, t: Translator) -> str | None:
    """ "graph replays 97% (95% without their CPU op, no capture trace)": how much of the device
    time the share above could only attribute by kernel name."""
    if not g.replayed_ops or total <= 0:
        return None
    rest = t("av.no_capture") if g.capture is None else t("av.capture", name=g.capture)
    return t(
        "av.graphs",
        pct=f"{fmt_num(100.0 * g.replayed_us / total, '.0f')}%",
        bare=f"{fmt_num(100.0 * g.unattributed_us / total, '.0f')}%",
        rest=rest,
    )


def _share_line(sh: Share, t: Translator, device_not_read: bool = False) -> str | None:
    """ "attention 12% (fused 12%, unfused 0%; fwd 8%, bwd 4%) | GEMM 64% | ...": the first thing
    a reader of a model trace wants. None without device time."""
    total = sh.device_time_us or 0.0
    if total <= 0:
        return _cpu_share_line(sh, t, device_not_read)
    att = sh.attention

    def p(us: float) -> str:
        return f"{fmt_num(100.0 * us / total, '.0f')}%"

    prov = t("av.by_provenance", pct=p(att.provenance_us)) if att.provenance_us > 0 else ""
    parts = [
        t(
            "av.attention_part",
            att=p(att.time_us),
            fused=p(att.fused_us),
            unfused=p(att.unfused_us),
            prov=prov,
            fwd=p(att.fwd_us),
            bwd=p(att.bwd_us),
        )
    ]
    side = sh.attention_side
    if side is not None and side.time_us > 0:  # its own part: the parts sum to the device time
        parts.append(f"{t('av.part.attention_side')} {p(side.time_us)}")
    comm = sh.communication
    for part, label in (
        (sh.gemm, "gemm"),
        (sh.conv, "conv"),
        (sh.communication, "comm"),
        (sh.memory, "memory"),
    ):
        parts.append(f"{t(f'av.part.{label}')} {p(part.time_us)}")
        if part is comm and comm.exposed_us is not None and comm.hidden_pct is not None:
            # the share sums durations; exposed is the time no compute hides (a union)
            parts[-1] += t(
                "av.exposed", exposed=fmt_us(comm.exposed_us), hidden=fmt_num(comm.hidden_pct, ".0f")
            )
    parts.append(f"{t('av.part.other')} {p(sh.other.time_us)}")
    return t("av.device_time", total=fmt_us(total), parts=" | ".join(parts))


def _cpu_share_line(sh: Share, t: Translator, device_not_read: bool) -> str | None:
    """A trace without device time: the same line by CPU self time, saying so; device_not_read:
    it holds device events no analysis reads, so its device time is unknown, not none."""
    total = sh.cpu_self_time_us or 0.0
    if total <= 0:
        return None

    def p(part: TimeShare | AttentionShare | None) -> str:
        return f"{fmt_num(100.0 * (part.time_us if part else 0.0) / total, '.0f')}%"

    parts: list[tuple[str, TimeShare | AttentionShare | None]] = [
        ("attention", sh.attention),
        ("conv", sh.conv),
        ("gemm", sh.gemm),
        ("norm", sh.norm),
        ("elementwise", sh.elementwise),
        ("comm", sh.communication),
        ("memory", sh.memory),
        ("other", sh.other),
    ]
    return t(
        "av.cpu_self.not_read" if device_not_read else "av.cpu_self",
        total=fmt_us(total),
        parts=" | ".join(f"{t(f'av.part.{k}')} {p(v)}" for k, v in parts),
    )


def _attention_rules_lines(sh: Share, t: Translator) -> list[str]:
    """Which rule made how much device time attention, and the kernels only their names make
    attention (the caveat: nothing the trace recorded about their origin says so)."""
    total = sh.device_time_us or 0.0
    att = sh.attention
    if total <= 0 or not att.rules:
        return []
    rules = ", ".join(f"{rule} {fmt_num(100.0 * us / total, '.1f')}%" for rule, us in att.rules.items())
    out = [t("av.by_rule", rules=rules)]
    if att.name_only_kernels:
        out.append(
            t(
                "av.name_only",
                pct=f"{fmt_num(100.0 * att.name_only_us / total, '.1f')}%",
                names=", ".join(att.name_only_kernels),
            )
        )
    return out


def _attention_side_line(sh: Share, t: Translator) -> str | None:
    """ "attention-side memory: fills, cache writes 38.4% (...)": the memory work for attention
    (what attention ops run, KV-cache writes), which provenance does not count as attention
    (issue 28), by kind and by the rule that made it so. None when there is none."""
    total = sh.device_time_us or 0.0
    side = sh.attention_side
    if total <= 0 or side is None or side.time_us <= 0:
        return None

    def pct(us: float) -> str:
        return f"{fmt_num(100.0 * us / total, '.1f')}%"

    kinds = sorted(side.kinds.items(), key=lambda kv: -kv[1])
    names = [t(f"av.side_kind.{k.replace(' ', '_')}") for k, _ in kinds]
    return t(
        "av.attention_side",
        kinds=", ".join(names),
        pct=pct(side.time_us),
        each=", ".join(f"{n} {pct(us)}" for n, (_, us) in zip(names, kinds, strict=True)),
        rules=", ".join(f"{rule} {pct(us)}" for rule, us in side.rules.items()),
    )


def _fixed_table(title: str, cols: tuple[tuple[str, int, JustifyMethod], ...], t: Translator) -> Table:
    """A table of fixed-width columns (headers `av.col.<key>`), cut with an ellipsis: the
    terminal's width is known (at most 100 columns in a pipe)."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0))
    for col, width, justify in cols:
        table.add_column(t(f"av.col.{col}"), width=width, justify=justify, no_wrap=True, overflow="ellipsis")
    return table


def _replayed(d: TraceAnalysis, console: Console, t: Translator) -> None:
    """Graph-replayed kernels with the CPU op (and Python frame) that captured them."""
    ks = d.graphs.kernels
    if not ks:
        return
    table = _fixed_table(
        t("av.replayed_title"),
        (("kernel", 28, "left"), ("total", 8, "right"), ("captured_op", 26, "left"), ("frame", 30, "left")),
        t,
    )
    for k in ks:
        table.add_row(k.name, fmt_us(k.time_us), k.op, k.frame or "-")
    print_table(console, table, t=t)


def _compiled(d: TraceAnalysis, console: Console, t: Translator) -> None:
    """Compiled code's share, and each fused kernel with the ops its name lists."""
    c = d.compiled
    if c.time_us <= 0 or c.pct is None:
        return
    graphs = len(c.graphs)
    by_name = t("av.compiled_by_name", time=fmt_us(c.name_only_us)) if c.name_only_us > 0 else ""
    console.print(
        t(
            "av.compiled",
            pct=f"{fmt_num(c.pct, '.0f')}%",
            time=fmt_us(c.time_us),
            graphs=graphs,
            by_name=by_name,
        ),
        overflow="fold",
    )
    fused = [k for k in c.kernels if k.fused_ops is not None]
    if not fused:
        return
    table = _fixed_table(
        t("av.fused_title"),
        (("kernel", 30, "left"), ("n", 6, "right"), ("total", 8, "right"), ("fused_ops", 30, "left")),
        t,
    )
    for k in fused:
        ops = ", ".join(k.fused_ops or []) or t("av.not_in_name")
        table.add_row(k.name, fmt_num(k.count, ","), fmt_us(k.time_us), ops)
    print_table(console, table, t=t)


def _phases(d: TraceAnalysis, console: Console, t: Translator) -> None:
    """One line per inference phase: its share of device time and its attention share."""
    ph = d.phases
    for p in ph.phases:
        pct = f"{fmt_num(p.pct, '.0f')}%" if p.pct is not None else "-"
        att = f"{fmt_num(p.attention_pct, '.1f')}%" if p.attention_pct is not None else "-"
        steps = t("av.steps_one" if p.steps == 1 else "av.steps", n=p.steps) if p.steps else ""
        line = t(
            "av.phase",
            phase=p.phase,
            source=ph.source,
            steps=steps,
            pct=pct,
            time=fmt_us(p.device_us),
            att=att,
        )
        b = p.batches[0] if len(p.batches) == 1 else None
        if b is not None and b.prefill_requests is not None:
            line += t(
                "av.phase_batch",
                pr=b.prefill_requests,
                pq=b.prefill_query_tokens,
                dr=b.decode_requests,
                dk=b.decode_kv_tokens,
            )
        if p.achieved_tflops is not None:
            line += t("av.phase_rate", time=fmt_us(p.modelled_us), tflops=fmt_num(p.achieved_tflops, ".3g"))
        if p.attention_tbps is not None:
            bw = (
                t("av.phase_bw_pct", pct=fmt_num(p.attention_bw_pct, ".0f"))
                if p.attention_bw_pct is not None
                else ""
            )
            line += t("av.phase_bw", tbps=fmt_num(p.attention_tbps, ".3g"), bw=bw)
        if p.phase == "mixed":
            line += t("av.phase_mixed")
        console.print(line, overflow="fold")
    if ph.phases and ph.unknown_us > 0:
        console.print(
            t("av.no_phase", time=fmt_us(ph.unknown_us), pct=fmt_num(ph.unknown_pct, ".0f")), overflow="fold"
        )


def render_analysis(d: TraceAnalysis, console: Console | None = None, t: Translator | None = None) -> None:
    """Print the analysis; `t`: the reader's language (English when None), its numbers too
    (units.number_locale: Indonesian writes 2.551 events and 98,7 µs)."""
    if console is None:
        console = make_console()
    if t is None:
        t = Translator("en")
    with number_locale(t.lang):
        _render(d, console, t)


def _render(d: TraceAnalysis, console: Console, t: Translator) -> None:
    en = t.lang == "en"
    tot, tr = d.totals, d.trace
    console.print(Text(f"{d.source}", style="bold"))
    share = _share_line(d.share, t, bool(d.device.not_read))
    graphs = _graphs_part(d.graphs, d.share.device_time_us or 0.0, t)
    if share and graphs:
        share += f" | {graphs}"
    if share:
        console.print(Text(share, style="bold"), overflow="fold")
        for rules_line in _attention_rules_lines(d.share, t):
            console.print(Text(rules_line), overflow="fold")
        side_line = _attention_side_line(d.share, t)
        if side_line:
            console.print(Text(side_line), overflow="fold")
    console.print(t("av.device", line=_device_line(d.device, t)))
    rank = t("av.rank", rank=tr.rank) if tr.rank is not None else ""
    console.print(
        t(
            "av.events",
            events=fmt_num(tr.events, ","),
            kept=fmt_num(tr.kept_events, ","),
            rank=rank,
            kernels=fmt_num(tot.kernels, ","),
            ktime=fmt_us(tot.kernel_time_us),
            memcpy=fmt_num(tot.memcpy, ","),
            memset=fmt_num(tot.memset, ","),
            cpu_ops=fmt_num(tot.cpu_ops, ","),
        )
    )
    for note in d.repairs:
        console.print(Text(t("av.repaired", note=note), style="yellow"))
    for note in d.warnings:
        console.print(Text(t("av.warning", note=note), style="yellow"))

    if d.kernels:
        # fixed widths: 28 + 11 + 15 + 3 + 6 + 8 + 8 + 8, plus 7 one-space gaps = 94 columns
        table = _fixed_table(
            t("av.top_title", n=len(d.kernels), total=tot.unique_kernels),
            (
                ("kernel", 28, "left"),
                ("category", 11, "left"),
                ("family", 15, "left"),
                ("tc", 3, "center"),
                ("n", 6, "right"),
                ("total", 8, "right"),
                ("mean", 8, "right"),
                ("occ", 8, "right"),
            ),
            t,
        )
        for k in d.kernels:
            table.add_row(
                k.short_name,
                _category(k.category, t),
                k.family,
                _tc(k.tensor_cores, t),
                fmt_num(k.count, ","),
                fmt_us(k.time_us),
                fmt_us(k.mean_us),
                _occ(k.occupancy, t),
            )
        print_table(console, table, t=t)
        console.print(Text(t("av.legend"), style="dim"))

    _replayed(d, console, t)
    _compiled(d, console, t)
    _phases(d, console, t)

    if d.categories:
        cat = Table(title=t("av.cat_title"), box=box.SIMPLE_HEAD, pad_edge=False)
        cat.add_column(t("av.col.category"))
        cat.add_column(t("av.col.count"), justify="right")
        cat.add_column(t("av.col.time"), justify="right")
        cat.add_column("%", justify="right")
        for c in d.categories:
            cat.add_row(
                _category(c.category, t), fmt_num(c.count, ","), fmt_us(c.time_us), fmt_num(c.pct_time, ".1f")
            )
        console.print(cat)

    for r in d.regions:
        _region(d, r, console, t)

    if d.launch_apis:
        apis = ", ".join(f"{a.api} {fmt_num(a.gpu_ops, ',')}" for a in d.launch_apis)
        console.print(t("av.launch_apis", apis=apis), overflow="fold")

    roof = d.roofline
    if roof is not None:
        head = t("av.roof_head", workload=roof.workload, basis=roof.basis)
        if roof.achieved_tflops is None or roof.achieved_tbps is None:  # no time in the region
            console.print(t("av.roof_nm", head=head, why=roof.note or t("av.no_time")), overflow="fold")
        else:
            pct = roof.pct_of_peak_flops
            peak = (
                t("av.roof_pct", pct=fmt_num(pct, ".1f"), peak=fmt_num(roof.peak_tflops, ".3g"))
                if pct is not None
                else f" ({roof.note})"
            )
            console.print(
                t(
                    "av.roof",
                    head=head,
                    tflops=fmt_num(roof.achieved_tflops, ".3g"),
                    peak=peak,
                    tbps=fmt_num(roof.achieved_tbps, ".3g"),
                ),
                overflow="fold",
            )

    console.print(Text(t("av.findings"), style="bold"))
    if not d.findings:
        console.print("  " + t("av.none"))
    for f in d.findings:
        line = Text("  ")
        sev = f.severity if en else t.maybe(f"severity.{f.severity}", f.severity)
        line.append(f"{sev:<7} ", style=_SEVERITY_STYLE.get(f.severity, ""))
        line.append(f"{f.code}: ", style="bold")
        line.append(finding_message(t, f.code, f.message, f.evidence))
        console.print(line, overflow="fold")
    console.print()


def _region(d: TraceAnalysis, r: RegionStat, console: Console, t: Translator) -> None:
    """One region: its per-instance table, how its device ops were placed, its idle time and
    its ops in order."""
    reg = Table(
        title=t("av.region_title", name=r.name, selector=r.selector), box=box.SIMPLE_HEAD, pad_edge=False
    )
    # a CPU-only trace has no device: no device columns of zeros, no "device idle 100%"
    cpu_only = d.device.kind == "cpu"
    # graph replays of captured ranges ran no CPU ops of their own: not a measured zero
    replayed = r.instances > 0 and r.replayed_instances == r.instances
    cols = [
        ("instances", str(r.instances), False),
        ("cpu_ops", t("av.graph_replay") if replayed else fmt_num(r.cpu_ops_per_instance, "g"), False),
        ("gpu_ops", fmt_num(r.gpu_ops_per_instance, "g"), True),
        ("cpu_time", t("av.graph_replay") if replayed else fmt_us(r.cpu_time_us_per_instance), False),
        # the sum of the device-op durations (overlapping streams each count), and their
        # union (busy), never more than the span
        ("gpu_sum", fmt_us(r.gpu_time_us_per_instance), True),
        ("gpu_busy", fmt_us(r.gpu_busy_union_us_per_instance), True),
        ("gpu_span", fmt_us(r.gpu_span_us_per_instance), True),
    ]
    cols = [c for c in cols if not (cpu_only and c[2])]
    for col, _, _ in cols:
        reg.add_column(t(f"av.col.{col}"), justify="right")
    reg.add_row(*(v for _, v, _ in cols))
    console.print(reg)
    att = r.attribution
    if att.rules:
        rules = ", ".join(f"{k} {fmt_num(v, 'g')}" for k, v in att.rules.items())
        threads = ", ".join(f"{x.thread} {fmt_num(x.gpu_ops_per_instance, 'g')}" for x in att.threads[:4])
        console.print(Text(t("av.by_rule_ops", rules=rules, threads=threads), style="dim"), overflow="fold")
    bwd = r.backward
    if bwd.gpu_ops_per_instance:
        console.print(
            Text(
                t(
                    "av.backward",
                    by=bwd.linked_by,
                    ops=fmt_num(bwd.gpu_ops_per_instance, "g"),
                    time=fmt_us(bwd.gpu_time_us_per_instance),
                ),
                style="dim",
            ),
            overflow="fold",
        )
    idle = r.idle
    if idle.window_us_per_instance and not cpu_only:
        host = ", ".join(
            f"{t.maybe(f'av.cause.{k}', k.replace('_', ' '))} {fmt_us(v)}"
            for k, v in idle.host_during_idle_us_per_instance.items()
            if v
        )
        console.print(
            Text(
                t(
                    "av.idle",
                    pct=fmt_num(idle.idle_pct, ".0f"),
                    idle=fmt_us(idle.idle_us_per_instance),
                    window=fmt_us(idle.window_us_per_instance),
                    host=host or t("av.nothing"),
                ),
                style="dim",
            ),
            overflow="fold",
        )
    if r.gpu_ops and len(r.gpu_ops) <= 30:
        seq = " -> ".join(_category(o.category or "other", t) for o in r.gpu_ops)
        console.print(Text(t("av.gpu_seq", seq=seq), style="dim"), overflow="fold")
    elif r.cpu_ops_by_name and not r.gpu_ops:
        # by self time, not by count: aten::empty x2000 costs less than one convolution
        ops = ", ".join(
            f"{o.name} {fmt_us(o.self_us_per_instance)} (x{fmt_num(o.per_instance, 'g')})"
            for o in r.cpu_ops_by_name[:8]
        )
        console.print(Text(t("av.cpu_by_self", ops=ops), style="dim"), overflow="fold")
