"""Plots for the HTML report, as inline SVG strings (matplotlib, no pyplot, no display).

We build Figure objects directly rather than through pyplot: no global state and no GUI backend
is ever touched, so this works headless without setting MPLBACKEND. Text stays text in the SVG
(svg.fonttype "none"): the browser renders it with its own fonts, it stays selectable, and the
files are small. Labels inside the plots are variant names, category names and units only; the
translated titles are the HTML headings around them.

Each function returns None when the rows hold nothing to draw.
"""

from __future__ import annotations

import io
import itertools
import re
import warnings
from collections.abc import Callable, Iterable, Sequence

import matplotlib
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import Formatter, FuncFormatter, NullFormatter

from attnprof.analysis.records.perf_records import OpPerf, PerfModel
from attnprof.compare.compare import Row
from attnprof.report.data import ScalingPoint
from attnprof.store import StoredResult
from attnprof.units import fmt_num, localize

__all__ = [
    "CATEGORY_COLORS",
    "category_plot",
    "roofline_plot",
    "scaling_plot",
    "store_scaling_plot",
    "time_plot",
    "timeline_plot",
]

CATEGORY_COLORS: dict[str, str] = {
    "attention": "#2ca02c",
    "gemm": "#1f77b4",
    "conv": "#17becf",
    "quantize": "#dbdb8d",
    "softmax": "#ff7f0e",
    "elementwise": "#9467bd",
    "reduction": "#8c564b",
    "norm": "#bcbd22",
    "mask": "#e377c2",
    "copy": "#d62728",
    "memcpy": "#d62728",
    "memset": "#ff9896",
    "communication": "#7f7f7f",
    "triton": "#aec7e8",
    "layout": "#c5b0d5",
    "other": "#c7c7c7",
}
_EXTRA = itertools.cycle(["#98df8a", "#ffbb78", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5"])
_counter = itertools.count(1)


# A translator (report.i18n.Translator) or any callable msgid, **values -> text; the plots keep
# English axis labels when none is given.
Label = Callable[..., str]

_AXIS_EN = {
    "axis.per_forward": "{unit} per forward",
    "axis.per_forward_iqr": "{unit} per forward (median, IQR)",
    "axis.from_start": "µs from the start of the forward",
    "axis.query_length": "S (query length)",
    "axis.box": "{unit} per forward: line median, box IQR, whiskers to 1.5 IQR, outliers left out",
    "axis.clean_shares": "{unit} of the clean median, split by the trace's share of each category",
    "axis.share_of_forward": "% of the forward in the trace",
    "perf.axis.intensity": "Arithmetic intensity (FLOP/byte)",
    "perf.axis.tflops": "Achieved TFLOP/s",
}


def _label(t: Label | None, msgid: str, **values: object) -> str:
    return t(msgid, **values) if t is not None else _AXIS_EN[msgid].format(**values)


def _cat(t: Label | None, cat: str) -> str:
    """A category's name in the reader's language (the catalog's category.<name>), else as is."""
    has = getattr(t, "has", None)
    return t(f"category.{cat}") if t is not None and has is not None and has(f"category.{cat}") else cat


def _order(cats: Iterable[str]) -> list[str]:
    """Categories in one fixed order (CATEGORY_COLORS'), so every legend lists them alike."""
    known = list(CATEGORY_COLORS)
    return sorted(set(cats), key=lambda c: (known.index(c) if c in known else len(known), c))


def _unit(ms: float) -> tuple[float, str]:
    """The tables' unit for a time in ms: ms from 1 ms, else µs (units.fmt_ms)."""
    return (1.0, "ms") if ms >= 1.0 else (1000.0, "µs")


def _color(cat: str) -> str:
    if cat not in CATEGORY_COLORS:
        CATEGORY_COLORS[cat] = next(_EXTRA)
    return CATEGORY_COLORS[cat]


class _Localized(Formatter):
    """Another formatter's tick labels in the report's number locale (units.number_locale:
    "0,5" in Indonesian): matplotlib's own use_locale reads the C library's locale, which the
    machine may not have; the tables' Babel symbols are the ones to match."""

    def __init__(self, inner: Formatter) -> None:
        self.inner = inner

    def __call__(self, x: float, pos: int | None = None) -> str:
        return localize(self.inner(x, pos))

    def set_locs(self, locs: list[float]) -> None:
        self.inner.set_locs(locs)

    def get_offset(self) -> str:
        return localize(self.inner.get_offset())


def _localize_ticks(fig: Figure) -> None:
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in (
                (axis.get_major_formatter, axis.set_major_formatter),
                (axis.get_minor_formatter, axis.set_minor_formatter),
            ):
                inner = get()
                if not isinstance(inner, (_Localized, NullFormatter)):
                    put(_Localized(inner))


def _svg(fig: Figure) -> str:
    _localize_ticks(fig)
    buf = io.StringIO()
    with (
        matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "attnprof"}),
        warnings.catch_warnings(),
    ):
        # Thai labels: matplotlib's own font lacks the glyphs it measures, but the SVG keeps the
        # text as text (fonttype none) and the browser draws it with the reader's fonts
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font")
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and DOCTYPE: this is inline
    # matplotlib numbers its ids per figure; several inline SVGs in one page must not collide
    prefix = f"f{next(_counter)}-"
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", text)
    text = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', text)
    return text


# a tick label's longest line, in characters: a run's labels are short variant names, but a
# bare trace's label is its file name (60-90 characters), which on one line took the whole
# figure's width and squeezed the axes to a sliver beside it
_TICK_CHARS = 34
_TICK_LINES = 3


def _tick(label: str) -> str:
    """A long label wrapped after its own separators (_ - . / space) into lines of at most
    _TICK_CHARS; beyond _TICK_LINES lines its middle is elided (the tables give it whole)."""
    if len(label) <= _TICK_CHARS:
        return label
    pieces = [p for p in re.split(r"(?<=[_\-./ ])(?=[^_\-./ ])", label) if p]
    lines: list[str] = []
    for piece in pieces:
        while len(piece) > _TICK_CHARS:  # a piece with no separator: cut it
            lines.append(piece[:_TICK_CHARS])
            piece = piece[_TICK_CHARS:]
        if lines and len(lines[-1]) + len(piece) <= _TICK_CHARS:
            lines[-1] += piece
        else:
            lines.append(piece)
    if len(lines) > _TICK_LINES:
        head = lines[: _TICK_LINES - 1]
        rest = label[sum(map(len, head)) :]  # the label's own tail, not the last wrapped piece
        lines = [*head, rest if len(rest) <= _TICK_CHARS else "…" + rest[-(_TICK_CHARS - 1) :]]
    return "\n".join(line.rstrip() for line in lines)


def _figure(ticks: Sequence[str], *, per_row: float = 0.45, min_h: float = 2.0) -> Figure:
    """A figure with a row per tick label, each row tall enough for its label's lines."""
    per_line = 0.17  # inches a 10 pt tick line takes
    height = sum(max(per_row, per_line * (tick.count("\n") + 1) + 0.1) for tick in ticks)
    fig = Figure(figsize=(8.0, max(min_h, 0.9 + height)))
    fig.set_layout_engine("constrained")
    return fig


def time_plot(rows: Sequence[Row], t: Label | None = None) -> str | None:
    """Clean time per forward: a box per variant over its raw samples (median line, IQR box,
    whiskers to 1.5 IQR). Outliers (a stray scheduler hiccup can be 100x the median) are left
    out so that they do not squeeze the boxes into a line; the IQR column has the spread."""
    timed = [r for r in rows if r.ok and (r.samples_ms or r.median_ms is not None)]
    if not timed:
        return None
    timed = sorted(timed, key=lambda r: r.median_ms or 0.0, reverse=True)
    # one unit for the axis, from the slowest median
    scale, unit = _unit(max(r.median_ms or 0.0 for r in timed))
    ticks = [_tick(f"{r.label} (n={len(r.samples_ms) or 1})") for r in timed]
    fig = _figure(ticks)
    ax = fig.add_subplot()
    data = [[x * scale for x in (r.samples_ms or [r.median_ms or 0.0])] for r in timed]
    ax.boxplot(
        data,
        orientation="horizontal",
        tick_labels=ticks,
        widths=0.6,
        showfliers=False,
        medianprops={"color": "#d62728", "linewidth": 2},
    )
    ax.set_xlabel(_label(t, "axis.box", unit=unit))
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def category_plot(rows: Sequence[Row], lane: str, t: Label | None = None) -> str | None:
    """Time per forward by category, stacked per variant. lane "gpu" uses the trace's GPU
    categories; "cpu" the CPU op groups (a CPU run has no GPU time).

    The profiler inflates per-op times, so a run's bars are its *clean* median split by each
    category's share of the traced time, in the tables' unit; only bare traces, which have no
    clean timing, show the trace's own times."""
    attr = "gpu_category_time_us" if lane == "gpu" else "cpu_category_time_us"
    have = [r for r in rows if getattr(r, attr)]
    if not have:
        return None
    clean = all(r.median_ms for r in have)
    if clean:
        scale, unit = _unit(max(r.median_ms or 0.0 for r in have))

        def values(r: Row) -> dict[str, float]:
            cats: dict[str, float] = getattr(r, attr)
            total = sum(cats.values()) or 1.0
            return {c: v / total * (r.median_ms or 0.0) * scale for c, v in cats.items()}

        xlabel = _label(t, "axis.clean_shares", unit=unit)
    else:
        scale, unit = _unit(max(sum(getattr(r, attr).values()) for r in have) / 1000.0)

        def values(r: Row) -> dict[str, float]:
            return {c: v / 1000.0 * scale for c, v in getattr(r, attr).items()}

        xlabel = _label(t, "axis.per_forward", unit=unit)
    cats = _order(c for r in have for c in getattr(r, attr))
    ticks = [_tick(r.label) for r in have]
    fig = _figure(ticks)
    ax = fig.add_subplot()
    rows_at = range(len(have))  # by position: two long labels may shorten to the same tick
    left = [0.0] * len(have)
    for cat in cats:
        widths = [values(r).get(cat, 0.0) for r in have]
        ax.barh(
            rows_at,
            widths,
            left=left,
            color=_color(cat),
            label=_cat(t, cat),
            edgecolor="white",
            linewidth=0.5,
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.set_yticks(rows_at, ticks)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def timeline_plot(rows: Sequence[Row], t: Label | None = None) -> str | None:
    """The ops of one forward per variant as a strip: each op a box at its start, as wide as it
    ran, coloured by category (GPU ops on a GPU run, CPU ops on a CPU run)."""
    have = [r for r in rows if r.timeline]
    if not have:
        return None

    def ops(r: Row) -> str:
        n = r.gpu_ops_per_forward if r.timeline_lane == "gpu" else r.cpu_ops_per_forward
        return f"{r.label} ({fmt_num(n, '.0f')})" if n is not None else r.label

    ticks = [_tick(ops(r)) for r in have]
    fig = _figure(ticks, per_row=0.5)
    ax = fig.add_subplot()
    seen: dict[str, str] = {}
    for i, r in enumerate(have):
        # as shares of the traced forward: the profiler inflates absolute times (the tables give
        # the clean time), so the strip shows order and proportion only
        span = max((op.start_us + op.dur_us for op in r.timeline), default=1.0) or 1.0
        for op in r.timeline:
            # a zero-length op still shows as a sliver so that counts stay visible
            width = max(op.dur_us, span * 0.002) / span * 100
            ax.broken_barh(
                [(op.start_us / span * 100, width)],
                (i - 0.35, 0.7),
                facecolors=_color(op.category),
                edgecolor="white",
                linewidth=0.3,
            )
            seen.setdefault(op.category, _color(op.category))

    ax.set_yticks(range(len(have)), ticks)
    ax.set_ylim(len(have) - 0.5, -0.5)
    ax.set_xlabel(_label(t, "axis.share_of_forward"))
    ax.set_xlim(0, 100)
    ax.legend(
        handles=[Patch(color=seen[k], label=_cat(t, k)) for k in _order(seen)],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize=8,
        frameon=False,
    )
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


def scaling_plot(points: Sequence[ScalingPoint], axis: str | None, t: Label | None = None) -> str | None:
    """Median time against the shape field that varies, one line per variant, log-log."""
    if not points or axis is None:
        return None
    fig = Figure(figsize=(8.0, 4.0))
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    for variant in sorted({p.variant for p in points}):
        pts = sorted((getattr(p, axis), p.median_ms) for p in points if p.variant == variant)
        ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=variant)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel({"seq": "S", "batch": "B", "heads": "H", "head_dim": "D"}[axis])
    ax.set_ylabel(_label(t, "axis.per_forward", unit="ms"))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


def store_scaling_plot(results: Sequence[StoredResult], t: Label | None = None) -> str | None:
    """Median time against query length for one group of a store's results (one panel), one
    line per variant, log-log, with the interquartile range as error bars. Each line's SVG group
    is named `series-<variant>`, so a reader (or a test) can find the lines."""
    timed = [
        r
        for r in results
        if r.status == "ok" and r.accuracy_ok is not False and r.median_ms is not None and r.median_ms > 0
    ]
    if not timed:
        return None
    fig = Figure(figsize=(8.0, 4.0))
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    labels = sorted({r.label for r in timed})
    # one unit for the axis, from the slowest median, as in time_plot
    scale, unit = _unit(max(r.median_ms or 0.0 for r in timed))
    for label in labels:
        pts = sorted(
            (r.seq, (r.median_ms or 0.0) * scale, (r.iqr_ms or 0.0) * scale)
            for r in timed
            if r.label == label
        )
        xs = [x for x, _, _ in pts]
        ys = [y for _, y, _ in pts]
        # the IQR around the median, half on each side; kept above zero for the log axis
        lo = [min(iqr / 2, y * 0.9) for _, y, iqr in pts]
        hi = [iqr / 2 for _, _, iqr in pts]
        bars = ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
        bars.lines[0].set_gid(f"series-{label}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    # plain numbers on both axes (32, 64, 128; 20, 30, 50 µs) rather than powers
    plain = FuncFormatter(lambda v, _pos: fmt_num(v, "g"))
    ax.set_xticks(sorted({r.seq for r in timed}))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel(_label(t, "axis.query_length"))
    ax.set_ylabel(_label(t, "axis.per_forward_iqr", unit=unit))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


_FAMILY_COLORS = {
    "gemm": CATEGORY_COLORS["gemm"],
    "attention": CATEGORY_COLORS["attention"],
    "conv": CATEGORY_COLORS["conv"],
    "norm": CATEGORY_COLORS["norm"],
    "softmax": CATEGORY_COLORS["softmax"],
    "elementwise": CATEGORY_COLORS["elementwise"],
    "reduction": CATEGORY_COLORS["reduction"],
    "embedding": CATEGORY_COLORS["layout"],
    "copy": CATEGORY_COLORS["copy"],
}


def roofline_plot(ops: Sequence[OpPerf], model: PerfModel | None, t: Label | None = None) -> str | None:
    """Log-log roofline: each outermost op shape a point (intensity, achieved TFLOP/s), its area
    its time; the roofs of the trace's main dtype (peak TFLOP/s flat, bandwidth x intensity
    slanted) when they are known. Ops with no FLOPs (copies) have no point on a log axis."""
    pts = [o for o in ops if not o.nested and o.intensity and o.tflops and o.intensity > 0 and o.tflops > 0]
    if not pts:
        return None
    fig = Figure(figsize=(8.0, 4.6))
    fig.set_layout_engine("constrained")
    ax = fig.add_subplot()
    times = [(o.device_time_us if o.device_time_us is not None else o.cpu_time_us) or 0.0 for o in pts]
    biggest = max(times) or 1.0
    for fam in sorted({o.family for o in pts}):
        sel = [(o, tm) for o, tm in zip(pts, times, strict=True) if o.family == fam]
        ax.scatter(
            [o.intensity or 0.0 for o, _ in sel],
            [o.tflops or 0.0 for o, _ in sel],
            s=[12 + 400 * tm / biggest for _, tm in sel],
            alpha=0.6,
            color=_FAMILY_COLORS.get(fam, CATEGORY_COLORS["other"]),
            # embedding is a lookup: the layout category's words (gather / index ops)
            label=_cat(t, "layout" if fam == "embedding" else fam),
            edgecolors="none",
        )
    xs = [o.intensity or 0.0 for o in pts]
    lo, hi = min(xs) / 3, max(xs) * 3
    if model is not None and model.peak_tflops and model.peak_tbps:
        ridge = model.peak_tflops / model.peak_tbps
        lo, hi = min(lo, ridge / 10), max(hi, ridge * 10)
        ax.plot(
            [lo, ridge, hi],
            [lo * model.peak_tbps, model.peak_tflops, model.peak_tflops],
            color="#444",
            lw=1.2,
        )
        ax.annotate(
            f"{localize(format(model.peak_tflops, '.4g'))} TFLOP/s ({model.dtype})",
            (hi, model.peak_tflops),
            ha="right",
            va="bottom",
            fontsize=8,
        )
        ax.annotate(
            f"{localize(format(model.peak_tbps, '.3g'))} TB/s",
            (lo * 1.3, lo * 1.3 * model.peak_tbps),
            ha="left",
            va="bottom",
            fontsize=8,
            rotation=20,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel(_label(t, "perf.axis.intensity"))
    ax.set_ylabel(_label(t, "perf.axis.tflops"))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, frameon=False, markerscale=0.5)
    return _svg(fig)
