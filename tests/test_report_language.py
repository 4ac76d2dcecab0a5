"""The id and th report pages hold no English beyond names of code: every sentence, label,
legend, tick and provenance line goes through the catalogs. A real run's HTML is scanned as a
reader sees it (text outside <code>, <style> and the SVG's <metadata>), with the variant, op and
kernel names taken out, for English words that must not be there."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from attnprof.report.data import build_report_data
from attnprof.report.html import render_html
from attnprof.report.i18n import Translator, load_catalog
from attnprof.report.store_report import build_store_report_data, render_store_html

# words and phrases of the English catalog that a translated page must not show; each was seen
# in an id or th page before (issue 9): the peak's provenance, finding advice, severities,
# statuses, the summary's connectives, plot labels and legends
ENGLISH = (
    "because", "faster", "slower", "fastest", "than", "the", "and", "with", "without", "each",
    "measured", "best", "square", "calls", "threads", "cached", "not cached", "load average",
    "fused", "whisker", "whiskers", "outliers", "unsupported", "incorrect", "warning", "error",
    "noisy", "unreliable", "expected", "observed", "skipped", "not met", "summary", "findings",
    "elementwise", "layout", "other", "copy", "Use the", "Build it once", "per call", "peak",
    "memory", "median of", "share of", "times", "generate",
    # the profiler's and the GPU's vocabulary (issue 9: the th catalog kept these in English); the
    # catalog tests below check the GPU findings this CPU page does not show
    "forward", "backward", "trace", "profiler", "run", "kernel launch", "host", "overhead",
    "occupancy", "shared memory", "registers", "page faults", "attention", "mask", "causal",
    "tensor cores", "CUDA cores", "backend", "store", "query", "eager", "dispatch", "rank",
)  # fmt: skip
_SKIP = {"code", "style", "script", "metadata", "title"}


class _Text(HTMLParser):
    """The page's text as a reader sees it: outside code, styles and SVG metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in _SKIP

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in _SKIP

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def page_text(html: str, names: set[str]) -> str:
    p = _Text()
    p.feed(
        html.replace("<wbr>", "")
    )  # a line-break opportunity, not a space: UNFUSED_<wbr>ATTENTION is one name
    text = " ".join(p.parts)
    text = re.sub(r"\S*(::|/|\.json|_)\S*", " ", text)  # op names, paths, file names, identifiers
    for phrase in CODE_IN["traces.perfetto"]:  # Perfetto's menu item, named as the reader sees it
        text = text.replace(phrase, " ")
    for name in sorted(names, key=len, reverse=True):  # variant and kernel names are code
        text = text.replace(name, " ")
    return text


@pytest.mark.parametrize("lang", ["id", "th"])
def test_translated_pages_hold_no_english_words(cpu_run: tuple[Path, object], lang: str) -> None:
    out, _ = cpu_run
    data = build_report_data(out)
    names = {r.label for r in data.comparison.rows} | {r.variant or "" for r in data.comparison.rows}
    names |= {o.name for r in data.comparison.rows for o in r.ops} - {""}
    html = render_html(data, Translator(lang), out_dir=out)
    text = page_text(html, names)
    found = sorted({w for w in ENGLISH if _has(text, w)})
    assert not found, (
        lang,
        found,
        [m.group(0) for w in found for m in re.finditer(rf"(?i).{{40}}{w}.{{40}}", text)],
    )
    # the provenance of the peak, a plot's tick labels and the summary are in the page at all
    assert data.record is not None and data.record.environment.peak_provenance is not None
    if lang == "id":  # Indonesian numbers with a decimal comma, in the text and the plots alike
        assert re.search(r"\d,\d+ (ms|µs)", text)
        assert not re.search(r"<text[^>]*>[^<]*\d\.\d", html)


@pytest.mark.parametrize("lang", ["id", "th"])
def test_translated_store_pages_hold_no_english_words(cpu_store: Path, lang: str) -> None:
    """The sweep store's report alike: statuses in its table and summary, plot ticks."""
    data = build_store_report_data(cpu_store)
    names = {r.label for r in data.results} | {r.variant for r in data.results}
    html = render_store_html(data, Translator(lang))
    text = page_text(html, names)
    found = sorted({w for w in ENGLISH if _has(text, w)})
    assert not found, (lang, found)


def _has(text: str, word: str) -> bool:
    return re.search(rf"(?i)(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


# --- the catalogs themselves: every msgstr of id and th, GPU findings included ---------------

# Names of code, acronyms, units and product names a translated message shows as they are. Each is
# code or a name, never a word of English prose; anything else Latin in a Thai message, or any word
# of the English catalog in an Indonesian one, is an untranslated word.
CODE_NAMES = {
    # acronyms and units
    "GPU", "CPU", "CUDA", "GEMM", "SDPA", "IQR", "TFLOP", "GFLOP", "FLOP", "MFU", "TB", "UTC", "JIT", "NaN", "inf", "KB", "ms", "s",
    "x",  # the ratio sign in "1.3x"
    "B", "H", "S", "D", "N", "n", "Sq", "Skv",  # shape symbols: batch, heads, lengths, head dim
    # dtype names, and torch's word for them (the attribute the user passes: --dtype, x.dtype)
    "fp16", "bf16", "fp32", "fp64", "dtype",
    # products and packages
    "attnprof", "PyTorch", "torch", "FlashAttention", "FlexAttention", "Triton", "cuDNN", "Perfetto",
    "matplotlib", "inductor", "C++", "Python",
    # variant, op and trace-event names
    "sdpa", "flex", "aten", "softmax", "Memcpy",
    "ProfilerStep",  # the record_function name of a profiler step (ProfilerStep#N)
    "dq", "dk", "dv",  # the gradients' names, as run.json and the tables give them
    "loadavg",  # /proc/loadavg, the file the figure is read from
    # the collectives' names as c10d records them (the kind column), and nccl-tests' two figures
    "allreduce", "allgather", "alltoall", "broadcast", "reduce", "send", "recv", "algbw", "busbw",
    # the unit the per-op model counts in, FlashAttention's packed-sequence entry points
    # (flash_attn_varlen_func) and FlexAttention's mask type
    "FLOPs", "varlen", "BlockMask",
}  # fmt: skip
# words that are code only in one message: the message id, then the words or phrases
CODE_IN = {
    "traces.perfetto": ("Open trace file",),  # Perfetto's menu item, the label the reader clicks
    "harness.hub_mask": ("causal",),  # flash_attn_func's parameter, named with window_size
    "harness.hub_alignment": ("prefill", "decode"),  # the values of --phase
    "harness.needs_triton": ("pip install triton",),  # a command to type
    "harness.needs_cxx": ("apt-get install g++",),  # a command to type
    # a command to type, an environment variable, the C language's name
    "harness.needs_cc": ("apt-get install gcc", "CC", "kompilator C"),
    "harness.memory_share": ("force = true", "[run]"),  # the setting in the TOML config
    "coll.bw.no_factor": ("nccl-tests",),  # NVIDIA's benchmark, whose factors are used
    "coll.legend": ("nccl-tests",),
}
# words Indonesian writes as English does (KBBI entries), so an Indonesian message may hold them
INDONESIAN = {
    "per", "data", "median", "status", "interval", "model", "parameter", "info", "tensor", "kernel",
    "register", "minor", "min",
    "bus",  # a computer's bus (KBBI: bus)
    "terminal",  # a computer's terminal (KBBI: terminal)
}  # fmt: skip
_CODE = re.compile(
    r"\{[^{}]*\}"  # {placeholders}
    r"|`[^`]*`"  # `code spans`
    r"|--[\w-]+"  # --flags
    r"|\S*(?:::|_|/|=)\S*"  # aten::ops, identifiers, paths, key=value
    r"|\w+(?:\.\w+)+"  # dotted names: torch.compile, .json.gz, layer.N
)
_LATIN = re.compile(r"[A-Za-z][A-Za-z0-9+]*")


def latin_words(key: str, text: str) -> list[str]:
    """The Latin-alphabet words of a message that are not code or names."""
    for phrase in CODE_IN.get(key, ()):
        text = text.replace(phrase, " ")
    return [w for w in _LATIN.findall(_CODE.sub(" ", text)) if w not in CODE_NAMES]


def test_the_thai_catalog_holds_no_english_beyond_names_of_code() -> None:
    th = load_catalog("th")
    found = {k: w for k, v in th.items() if (w := latin_words(k, v))}
    assert not found, found


def test_the_indonesian_catalog_holds_no_english_beyond_names_of_code() -> None:
    english = {w.lower() for k, v in load_catalog("en").items() for w in latin_words(k, v)}
    english |= {w[:-1] for w in english if w.endswith("s")}  # "faults" in English, "fault" left in Indonesian
    english -= INDONESIAN
    found = {
        k: w
        for k, v in load_catalog("id").items()
        if (w := [x for x in latin_words(k, v) if x.lower() in english])
    }
    assert not found, found


def test_the_catalog_scan_finds_english_and_passes_code() -> None:
    """The scan itself: prose English is found, code and names pass (so the two tests above can fail)."""
    assert latin_words("x", "occupancy ต่ำ: ใช้ register ต่อเธรด") == ["occupancy", "register"]
    assert latin_words("x", "{name}: torch.compile บน CPU ต้องใช้ aten::mm (`attnprof run`) --dtype bf16") == []
    assert latin_words("harness.hub_mask", "flash_attn_func รับ causal") == []
    assert latin_words("x", "มาสก์แบบ causal") == ["causal"]
