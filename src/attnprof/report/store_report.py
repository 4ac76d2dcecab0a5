"""The report of a sweep's results store (`attnprof report --store FILE`).

A store holds many shapes, so this report is about scaling: median time against sequence length
per variant, one panel per group of the other shape fields; a table of every result; the
recommendation per bucket; and a short bullet summary. Like the run report it renders records
only: the timings are the store's, the recommendations are attnprof.recommend's records.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from attnprof.compare.rank import MIN_INTERVAL_SAMPLES, NOTABLE
from attnprof.errors import UserError
from attnprof.recommend import Recommendation, recommend
from attnprof.records import RAN_STATUSES
from attnprof.report.i18n import Translator
from attnprof.report.reasons import say_loads, translate_reason
from attnprof.report.table import Cell, Column, Table, fit, md_text, to_markdown
from attnprof.store import StoredResult
from attnprof.units import fmt_bounds, fmt_err, fmt_ms, fmt_ratio, number_locale
from attnprof.workload import WorkloadId, kind_words

__all__ = [
    "StoreReportData",
    "build_store_report_data",
    "render_store_html",
    "render_store_markdown",
    "scaling_groups",
    "store_summary",
]


class StoreReportData(msgspec.Struct, kw_only=True):
    store: str
    results: list[StoredResult]
    recommendations: list[Recommendation]
    version: str = ""


def build_store_report_data(store: str | Path) -> StoreReportData:
    """Read every result of the store and the recommendation records for them."""
    from attnprof._version import __version__
    from attnprof.store import Store

    with Store(store, readonly=True) as st:
        rows = st.query(samples=True)  # the samples give pinning's gain its interval
    if not rows:
        raise UserError(f"store {store} holds no results: run attnprof sweep --store {store} first")
    return StoreReportData(
        store=str(store), results=rows, recommendations=recommend(rows), version=__version__
    )


# a panel: the workload identity (workload.py WorkloadId) but the lengths, the x axis
GroupKey = WorkloadId


def _group_key(r: StoredResult) -> GroupKey:
    return msgspec.structs.replace(WorkloadId.of(r), seq=0, kv_seq=0)


def work_words(w: WorkloadId, t: Translator) -> str:
    """What a workload is beyond its shape, dtype and device, in the reader's language: its mask
    (causal and full translated, a named mask as given) and workload.py's `kind_words` for the
    rest (fwd+bwd, decode). A panel's title and a results row say it so."""
    mask = t("group.causal") if w.causal else t("group.full") if w.mask == "none" else w.mask
    return mask + kind_words("causal", w.backward, w.phase)  # the mask is said above, in words


def group_title(key: GroupKey, t: Translator) -> str:
    h = f"H={key.heads}" + (f"/{key.kv_heads}" if key.gqa else "")
    return f"{key.dtype} D={key.head_dim} B={key.batch} {h} {work_words(key, t)} [{key.device}]"


def scaling_groups(rows: list[StoredResult]) -> dict[GroupKey, list[StoredResult]]:
    """The ok, timed results per panel, in store order."""
    out: dict[GroupKey, list[StoredResult]] = {}
    for r in rows:
        if r.status == "ok" and r.accuracy_ok is not False and r.median_ms is not None and r.median_ms > 0:
            out.setdefault(_group_key(r), []).append(r)
    return out


def results_table(data: StoreReportData, t: Translator) -> Table:
    """Every result, one row each. A row's workload cells come from its identity (workload.py
    `WorkloadId`, the one `attnprof results` groups by): dtype, shape, mask, fwd+bwd, decode, and
    the device where the store holds more than one, so two rows of one variant never look alike
    unless they are the same work."""
    ids = [WorkloadId.of(r) for r in data.results]
    devices = len({(w.device, r.device_name) for w, r in zip(ids, data.results, strict=True)}) > 1
    table = Table(
        columns=[
            Column(t("col.variant")),
            Column("dtype"),
            *(Column(h, numeric=True) for h in ("B", "H", "S", "D")),
            Column(t("col.work")),
            *([Column(t("env.device"))] if devices else []),
            Column(t("col.status")),
            *(Column(t(f"col.{k}"), numeric=True) for k in ("median", "iqr", "max_error")),
            Column(t("col.backend")),
            Column(t("col.reason")),
        ]
    )
    for r, w in zip(data.results, ids, strict=True):
        heads = str(w.heads) + (f"/{w.kv_heads}" if w.gqa else "")
        seq = str(w.seq) + (f"/{w.kv_seq}" if w.kv_seq != w.seq else "")
        reason = translate_reason(r.reason, t, r.reason_code).splitlines()[0] if r.reason else "-"
        device = f"{w.device} ({r.device_name})" if r.device_name else w.device
        table.add(
            [
                r.label,
                w.dtype,
                Cell(str(w.batch), w.batch),
                Cell(heads, w.heads),
                Cell(seq, w.seq),
                Cell(str(w.head_dim), w.head_dim),
                work_words(w, t),
                *([device] if devices else []),
                t("speed.incorrect") if r.status == "incorrect" else t.maybe(f"status.{r.status}", r.status),
                Cell(fmt_ms(r.median_ms), r.median_ms, "ms"),
                Cell(fmt_ms(r.iqr_ms), r.iqr_ms, "ms"),
                Cell(fmt_err(r.max_abs_err), r.max_abs_err),
                r.backend or "-",
                reason,
            ],
            cls="incorrect" if r.status == "incorrect" else "" if r.status == "ok" else "failed",
        )
    return table


def short_variant(name: str) -> str:
    """A variant in a few characters: user variants are stored with an absolute file path,
    shown as file:function."""
    if ":" in name and "/" in name:
        path, func = name.rsplit(":", 1)
        return f"{Path(path).name}:{func}"
    return name


def pin_cell(rec: Recommendation, t: Translator) -> Cell:
    """Pinning the fastest SDPA backend against PyTorch's default: the factor, its interval and
    the verdict; "-" where there is nothing to compare."""
    if rec.pin_gain is None or rec.verdict is None:
        return Cell("-")
    if rec.verdict == "unknown":
        return Cell(t("rec.unknown"), rec.pin_gain, "x")
    if rec.verdict == "too_few":  # no 95% claim from so few samples (compare/rank.py)
        return Cell(t("rec.too_few", ratio=fmt_ratio(rec.pin_gain)), rec.pin_gain, "x")
    if rec.same_kernel:
        return Cell(t("rec.same_backend"), rec.pin_gain, "x")
    ci = (
        " ({}–{})".format(*fmt_bounds(rec.pin_gain_low, rec.pin_gain_high))
        if rec.pin_gain_low is not None and rec.pin_gain_high is not None
        else ""
    )
    key = "rec.pin" if rec.verdict == "pin" else "rec.keep"
    return Cell(t(key, ratio=fmt_ratio(rec.pin_gain)) + ci, rec.pin_gain, "x")


def _pin_flag(rec: Recommendation) -> Cell:
    """pin_cell in a few characters, for the terminal: pin, tie (faster, but its interval holds
    1), no, or ? (nothing to compare)."""
    gain = rec.pin_gain
    if rec.verdict == "pin" and gain:
        return Cell(f"pin {fmt_ratio(gain)}x", gain, "x", "warn")
    if rec.verdict == "unknown":
        return Cell("busy", gain, "x", "warn")
    if rec.verdict == "too_few":
        return Cell(f"few {fmt_ratio(gain)}x?", gain, "x", "dim")
    if rec.verdict != "default":
        return Cell("?", emphasis="dim")
    if not gain or gain == 1.0:
        return Cell("no", gain, "x", "dim")  # PyTorch's pick is the fastest pinned backend
    return Cell(f"tie {fmt_ratio(gain)}x~" if gain > 1.0 else f"no {fmt_ratio(gain)}x", gain, "x", "dim")


def recommendation_table(recs: list[Recommendation], t: Translator, *, compact: bool = False) -> Table:
    """One row per bucket. compact (the terminal, one table per device): the bucket without its
    device, variants shortened to 24 characters, and pinning's verdict as a flag."""

    def variant(name: str) -> str:
        return fit(short_variant(name), 24) if compact else name

    table = Table(
        columns=[
            Column(t("col.bucket")),
            Column("n", numeric=True, no_wrap=True),
            Column(t("col.fastest"), no_wrap=True),
            Column(t("col.margin"), numeric=True, no_wrap=True),
            *(
                Column(t(f"col.{k}"), no_wrap=True)
                for k in ("runner_up", "best_sdpa", "pytorch_choice", "differs")
            ),
        ]
    )
    for rec in recs:
        margin = Cell("-")
        if rec.margin:
            tie = t.maybe("rec.within_noise", " ~") if rec.within_noise else ""
            notable = "good" if rec.margin >= NOTABLE else "warn"
            margin = Cell(f"{fmt_ratio(rec.margin)}x{tie}", rec.margin, "x", "dim" if tie else notable)
        table.add(
            [
                rec.bucket.label(device=not compact),
                Cell(str(rec.configurations), rec.configurations),
                variant(rec.best.variant) if rec.best else Cell(t("rec.none_correct"), emphasis="bad"),
                margin,
                variant(rec.runner_up.variant) if rec.runner_up else "-",
                rec.best_sdpa or "-",
                _dispatch_cell(rec, t),
                _pin_flag(rec) if compact else pin_cell(rec, t),
            ],
            cls="slower" if rec.verdict == "pin" else ("failed" if rec.best is None else ""),
        )
    return table


def _dispatch_cell(rec: Recommendation, t: Translator) -> str:
    """What PyTorch's own dispatch did: the backend it ran where `sdpa` was measured, else the
    one it is predicted to pick (labelled so: a prediction is not a measurement)."""
    if rec.default_backend and rec.default_variant == "sdpa":  # `sdpa` ran: the backend it ran
        return f"{rec.default_backend} (sdpa)"
    predicted = rec.pytorch_choice or rec.default_backend
    return t("rec.predicted", backend=predicted) if predicted else "?"


def store_summary(data: StoreReportData, t: Translator) -> list[str]:
    """The bullets (numbers in the reader's locale): see _store_summary."""
    with number_locale(t.lang):
        return _store_summary(data, t)


def _store_summary(data: StoreReportData, t: Translator) -> list[str]:
    """The bullets: what the store holds, the winner per bucket, where PyTorch's own choice is
    not the fastest backend, and the variants that did not run (with their reasons)."""
    counts = Counter(r.status for r in data.results)
    out = [
        t(
            "store.summary.counts",
            n=len(data.results),
            shapes=len({WorkloadId.of(r) for r in data.results}),
            statuses=", ".join(f"{n} {t.maybe(f'status.{s}', s)}" for s, n in counts.most_common()),
        )
    ]
    busy = [r for r in data.results if r.load is not None and r.load.unreliable]
    if busy:  # right after what the store holds, as `results` and `recommend` say it
        said = "; ".join(say_loads(((r.load.reasons, r.load.reason_codes) for r in busy if r.load), t)[:2])
        out.append(t("store.summary.busy", n=len(busy), total=len(data.results), reasons=said))
    for rec in data.recommendations:
        bucket = rec.bucket.label(device=True)
        if rec.best is None:
            out.append(t("store.summary.none_correct", bucket=bucket))
        elif rec.runner_up is None or rec.margin is None:
            out.append(t("store.summary.only", bucket=bucket, variant=rec.best.variant))
        else:
            out.append(
                t(
                    "store.summary.same_kernel"
                    if rec.margin_same_kernel
                    else "store.summary.tie"
                    if rec.within_noise
                    else "store.summary.best",
                    bucket=bucket,
                    variant=rec.best.variant,
                    runner_up=rec.runner_up.variant,
                    ratio=fmt_ratio(rec.margin),
                    backend=rec.default_backend or "",
                )
            )
        if rec.verdict == "unknown":
            out.append(t("store.summary.unreliable", bucket=bucket))
        elif rec.verdict == "too_few" and rec.pin_gain is not None and rec.best_sdpa:
            lo, hi = rec.pin_gain_range_low, rec.pin_gain_range_high
            out.append(
                t(
                    "store.summary.too_few",
                    bucket=bucket,
                    best=rec.best_sdpa,
                    ratio=fmt_ratio(rec.pin_gain),
                    default=rec.default_variant,
                    choice=rec.default_backend or rec.pytorch_choice or "?",
                    n=rec.pin_samples or 0,
                    range=t("store.summary.range", low=fmt_ratio(lo), high=fmt_ratio(hi))
                    if lo is not None and hi is not None
                    else "",
                    min=MIN_INTERVAL_SAMPLES,
                )
            )
        elif rec.pin_gain is not None and rec.verdict and rec.best_sdpa and rec.pin_gain_low is not None:
            out.append(
                t(
                    "store.summary.pin"
                    if rec.verdict == "pin"
                    # faster beyond the samples' noise, but not beyond the drift between jobs
                    else "store.summary.keep_drift"
                    if rec.pin_gain_low > 1.0
                    else "store.summary.keep",
                    bucket=bucket,
                    best=rec.best_sdpa,
                    ratio=fmt_ratio(rec.pin_gain),
                    low=fmt_bounds(rec.pin_gain_low, rec.pin_gain_high or rec.pin_gain_low)[0],
                    high=fmt_bounds(rec.pin_gain_low, rec.pin_gain_high or rec.pin_gain_low)[1],
                    default=rec.default_variant,
                    choice=rec.default_backend or rec.pytorch_choice or "?",
                )
            )
        elif rec.differs and rec.best_sdpa and rec.pytorch_choice:
            out.append(
                t(
                    "store.summary.differs",
                    bucket=bucket,
                    choice=rec.pytorch_choice,
                    best=rec.best_sdpa,
                    measured=t.join(rec.sdpa_measured),
                )
            )
    not_run: dict[str, str] = {}
    for r in data.results:
        if r.status not in RAN_STATUSES:  # an incorrect one ran: its table row says incorrect
            reason = translate_reason(r.reason, t, r.reason_code).splitlines()[0] if r.reason else r.status
            not_run.setdefault(r.label, reason.removeprefix(f"{r.variant}: "))
    if not_run:
        out.append(t("summary.not_run", list="; ".join(f"{k} ({v})" for k, v in not_run.items())))
    return out


def env_items(data: StoreReportData, t: Translator) -> list[tuple[str, str]]:
    def distinct(values: list[str | None]) -> str:
        return ", ".join(sorted({v for v in values if v})) or "-"

    rs = data.results
    return [
        (t("env.device"), distinct([f"{r.device_name or r.device} [{r.device}]" for r in rs])),
        (
            t("env.software"),
            distinct([f"PyTorch {r.torch_version}" if r.torch_version else None for r in rs]),
        ),
        (t("env.host"), distinct([r.host for r in rs])),
        (t("env.dtype"), distinct([r.dtype for r in rs])),
        (t("env.store"), data.store),
    ]


@dataclass
class StoreContent:
    title: str
    generated: str
    summary: list[str]
    env: list[tuple[str, str]]
    results: Table
    recommendations: Table
    plots: list[tuple[str, str | None]] = field(default_factory=list)
    plots_note: str | None = None  # why there are no plots: matplotlib is not installed


def store_content(data: StoreReportData, t: Translator, *, with_plots: bool) -> StoreContent:
    with number_locale(t.lang):  # numbers in the report's locale
        return _store_content(data, t, with_plots=with_plots)


def _store_content(data: StoreReportData, t: Translator, *, with_plots: bool) -> StoreContent:
    plots: list[tuple[str, str | None]] = []
    plots_note = None
    if with_plots:
        from attnprof.report.html import plots_missing

        plots_note = plots_missing(t)
    if with_plots and plots_note is None:
        from attnprof.report.plots import store_scaling_plot

        for key, rows in scaling_groups(data.results).items():
            plots.append((t("plot.store_scaling", group=group_title(key, t)), store_scaling_plot(rows, t)))
    return StoreContent(
        title=t("store.title", store=Path(data.store).name),
        generated=t("report.generated", version=data.version, source=data.store),
        summary=_store_summary(data, t),
        env=env_items(data, t),
        results=results_table(data, t),
        recommendations=recommendation_table(data.recommendations, t),
        plots=plots,
        plots_note=plots_note,
    )


def render_store_markdown(data: StoreReportData, t: Translator) -> str:
    from attnprof.report.markdown import _bullets

    c = store_content(data, t, with_plots=False)
    lines = [f"# {md_text(c.title)}", "", md_text(c.generated), ""]  # inert, as in the HTML
    lines += [f"## {t('h.summary')}", "", _bullets(c.summary)]
    lines += [f"## {t('h.environment')}", ""] + [f"- **{md_text(k)}**: {md_text(v)}" for k, v in c.env] + [""]
    lines += [f"## {t('h.recommendations')}", "", *(to_markdown(c.recommendations) or ["-"]), ""]
    lines += [t("rec.legend"), ""]
    lines += [f"## {t('h.results')}", "", *(to_markdown(c.results) or ["-"]), ""]
    return "\n".join(lines)


def render_store_html(data: StoreReportData, t: Translator) -> str:
    from attnprof.report.html import _env

    c = store_content(data, t, with_plots=True)
    return _env().get_template("store_report.html.j2").render(lang=t.lang, t=t, version=data.version, c=c)
