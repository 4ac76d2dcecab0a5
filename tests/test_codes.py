"""Every finding code is in one catalogue (analysis/findings/codes.py) and in the catalogs of all three
languages; no rule declares a severity of its own (every finding is made by codes.finding, at
the catalogue's level or "info"); the cause lists are the catalogue's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attnprof.analysis import CODES
from attnprof.analysis.findings.codes import CATALOGUE, code_info, finding
from attnprof.analysis.findings.idle_findings import CAUSE_FINDINGS
from attnprof.catalogs import load_catalog
from attnprof.compare.causes import BAD_CODES, GOOD_CODES
from attnprof.report.i18n import Translator

SRC = Path(__file__).resolve().parents[1] / "src" / "attnprof"
_LEVELS = {"info", "warning", "error"}


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    """Every call of `name` (a plain name or an attribute) in the package's source."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if called == name:
                    out.append((path, node))
    return out


def _emitted() -> set[str]:
    """The codes the sources make findings of: a literal first argument of finding(), a code
    assigned to a name `code` (the correctness gate's two), the idle causes' table."""
    codes = {
        c.args[0].value
        for name in ("finding", "_worded")
        for _, c in _calls(name)
        if c.args and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, str)
    }
    for node in ast.walk(ast.parse((SRC / "compare" / "checks.py").read_text())):
        named = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "code" for t in node.targets
        )
        if named and isinstance(node.value, ast.Constant):  # type: ignore[union-attr]
            codes.add(node.value.value)  # type: ignore[union-attr]
    return codes | {code for code, *_ in CAUSE_FINDINGS.values()} | {"GPU_IDLE_UNRECORDED"}


def test_every_emitted_code_is_catalogued_once() -> None:
    codes = [c.code for c in CATALOGUE]
    assert len(codes) == len(set(codes))
    assert set(CODES) == {c.code for c in CATALOGUE if c.where == "analysis"}
    emitted = _emitted()
    assert {"INCORRECT_OUTPUT", "INCORRECT_GRADIENT", "TOTAL_BELOW_BACKWARD", "UNFUSED_ATTENTION"} <= emitted
    assert emitted == set(codes), emitted ^ set(codes)
    assert code_info("NOT_A_CODE") is None


def test_no_rule_declares_its_own_severity() -> None:
    """No source but codes.py constructs a Finding, and no finding() call passes a level: the
    severity is the catalogue's, or "info" when the rule says minor=True (the call's only say)."""
    made = [(p.relative_to(SRC), c.lineno) for p, c in _calls("Finding") if p.name != "codes.py"]
    assert made == [], made
    levels = [
        (p.relative_to(SRC), c.lineno)
        for p, c in _calls("finding")
        if any(isinstance(a, ast.Constant) and a.value in _LEVELS for a in c.args)
        or any(k.arg == "severity" for k in c.keywords)
    ]
    assert levels == [], levels
    # the idle causes' table names codes and evidence keys only (their words are the catalogs')
    assert all(len(v) == 2 and not set(v) & _LEVELS for v in CAUSE_FINDINGS.values())


def test_finding_takes_the_catalogues_level_or_info() -> None:
    assert finding("ABOVE_PEAK", {"pct_of_peak": 150}).severity == "error"
    assert finding("UNFUSED_ATTENTION").severity == "warning"
    assert finding("UNFUSED_ATTENTION", minor=True).severity == "info"
    with pytest.raises(KeyError):
        finding("NOT_A_CODE")


def test_finding_is_worded_by_the_catalogs_from_its_evidence() -> None:
    """A finding's message is its catalog sentence filled from its evidence, and its evidence
    names that sentence; evidence lacking a figure the sentence reads is refused (a rule's
    bug), unless the catalogs hold the code's `.generic` sentence for it."""
    f = finding("SAFE_SOFTMAX", {"per_instance": 2.5})
    assert f.evidence["message_key"] == "finding.SAFE_SOFTMAX"
    assert f.message.startswith("aten::_safe_softmax runs 2.5 time(s) per call")
    # a variant, whose clause is said only when the evidence names it
    ev = {
        "gpu_ops": 7,
        "graph_launches": 2,
        "attention_kernels": 3,
        "attention_clause": "clause.graph_attention",
    }
    assert "7 GPU op(s) come from 2 CUDA-graph launch(es), 3 of them fused attention kernels:" in (
        finding("CUDA_GRAPH", ev).message
    )
    assert ", 3 of them" not in finding("CUDA_GRAPH", {**ev, "attention_clause": ""}).message
    with pytest.raises(KeyError, match="per_instance"):
        finding("SAFE_SOFTMAX", {})
    with pytest.raises(KeyError):
        finding("SAFE_SOFTMAX", {"per_instance": 1}, variant="no_such_variant")
    # compare's PAGE_FAULTS has a generic sentence for evidence without the count
    assert finding("PAGE_FAULTS", {}).message == load_catalog("en")["finding.PAGE_FAULTS.generic"]


def _literals(node: ast.expr) -> list[str]:
    """The strings an expression can be: a literal, or either side of a conditional."""
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def test_no_rule_writes_its_own_sentence() -> None:
    """A finding's words are the catalogs' only: every finding() call passes the code, the
    evidence and at most a literal variant name and `minor`, never a message; every variant and
    clause key the sources name is in all three catalogs."""
    en, others = load_catalog("en"), [load_catalog(lang) for lang in ("id", "th")]
    bad, variants = [], set()
    for path, c in _calls("finding"):
        if path.name == "codes.py" or path.parent.name == "tests":
            continue
        code_ok = bool(c.args) and isinstance(c.args[0], (ast.Constant, ast.Name))
        ev_ok = len(c.args) <= 2 and not any(
            isinstance(a, (ast.JoinedStr, ast.BinOp))
            or (isinstance(a, ast.Constant) and isinstance(a.value, str))
            for a in c.args[1:]
        )
        kw_ok = {k.arg for k in c.keywords} <= {"variant", "minor"}
        if not (code_ok and ev_ok and kw_ok):
            bad.append((path.relative_to(SRC), c.lineno))
        for k in c.keywords:  # each variant a rule names is a sentence of its code's
            if k.arg == "variant" and isinstance(c.args[0], ast.Constant):
                variants |= {f"finding.{c.args[0].value}.{v}" for v in _literals(k.value) if v}
    assert bad == [], bad
    assert len(variants) >= 9 and [k for k in sorted(variants) if k not in en] == [], variants
    keys = set()
    for path in sorted((SRC / "analysis").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("clause.")
            ):
                keys.add(node.value)
    assert len(keys) > 30, keys
    missing = sorted(k for k in keys if k not in en or any(k not in o for o in others))
    assert missing == [], missing
    assert all(c.key + ".generic" in en or c.key in en for c in CATALOGUE)


def test_every_finding_of_the_shared_traces_says_its_catalog_sentence_in_each_language() -> None:
    """On real traces: each finding's English message is english(its key, its evidence), its key
    is its code's, and the id and th readers get their language's sentence from the same key and
    evidence, every field filled and no English sentence left."""
    import re

    from attnprof.analysis import analyze
    from attnprof.catalogs import english
    from attnprof.report.finding_text import finding_message

    traces = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
    # traces that between them fire most rules (idle causes, unfused chains, the per-op model)
    names = ("CodingPlatelets", "facebookresearch__HolisticTraceAnalysis__tests__data__trace_filter__sampled_rank-0",
             "AMD-AGI__TraceLens__tests__traces__h100", "ranonrkm", "HazyResearch",
             "facebookresearch__HolisticTraceAnalysis__tests__data__amd_trace")  # fmt: skip
    seen: set[str] = set()
    for name in names:
        (path,) = [p for p in traces.glob("*.json*") if p.name.startswith(name)]
        for f in analyze(path).findings:
            key = f.evidence["message_key"]
            assert key == f"finding.{f.code}" or key.startswith(f"finding.{f.code}."), key
            assert f.message == english(key, f.evidence)
            for lang in ("id", "th"):
                text = finding_message(Translator(lang), f.code, f.message, f.evidence)
                assert "{" not in text and text != f.message, (lang, key, text)
            th = finding_message(Translator("th"), f.code, f.message, f.evidence)
            assert re.search(r"[\u0e00-\u0e7f]", th), th
            seen.add(f.code)
    assert len(seen) >= 16, seen


def test_every_code_has_its_sentence_in_en_id_and_th() -> None:
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        missing = [c.code for c in CATALOGUE if not t.has(c.key)]
        assert missing == [], (lang, missing)


def test_causes_are_read_from_the_catalogue_and_each_has_its_reason_sentence() -> None:
    """compare/causes.py names as good causes exactly the catalogue's good codes with a cause
    place, as bad ones its bad ones, and every one has its `reason.<code>` sentence in all three
    languages (a code without a cause place has none: it is never named as a reason)."""
    assert set(GOOD_CODES) == {c.code for c in CATALOGUE if c.effect == "good" and c.cause}
    assert set(BAD_CODES) == {c.code for c in CATALOGUE if c.effect == "bad" and c.cause}
    assert GOOD_CODES[0] == "FUSED_ATTENTION" and BAD_CODES[0] == "FP32_UPCAST"  # the order a reader hears
    for lang in ("en", "id", "th"):
        t = Translator(lang)
        assert [c for c in (*GOOD_CODES, *BAD_CODES) if not t.has(f"reason.{c}")] == [], lang


def test_compares_findings_say_the_catalogs_english_sentence() -> None:
    """compare's run-level findings are worded once, in the catalogs: the English message is
    en.po's `finding.<CODE>` filled from the evidence, the same sentence the reports render."""
    from attnprof.catalogs import english, load_catalog
    from attnprof.compare.checks import _fault_check, _total_check
    from attnprof.compare.records import Row

    row = Row(label="v", kind="run", source="r", minor_faults_per_call=300.0, bwd_median_ms=2.0,
              total_median_ms=1.5)  # fmt: skip
    _fault_check(row)
    _total_check(row)
    by = {f.code: f for f in row.findings}
    assert set(by) == {"PAGE_FAULTS", "TOTAL_BELOW_BACKWARD"}
    for code, f in by.items():
        assert f.message == english(f"finding.{code}", f.evidence)
        assert "{" not in f.message and f"finding.{code}" in load_catalog("en")
    assert by["PAGE_FAULTS"].message.startswith("300 minor page faults per call while timing")
    assert "(1.5 ms) is shorter than the backward alone (2.0 ms)" in by["TOTAL_BELOW_BACKWARD"].message
    # a row without those measurements gets neither (they must not fire)
    quiet = Row(label="q", kind="run", source="r", minor_faults_per_call=3.0, bwd_median_ms=2.0,
                total_median_ms=2.5)  # fmt: skip
    _fault_check(quiet)
    _total_check(quiet)
    assert quiet.findings == []


def test_an_older_analysis_without_its_sentence_key_reads_the_codes_generic_sentence() -> None:
    """An analysis JSON written before findings named their sentence (no `message_key`, fewer
    evidence fields) still reads in id: the code's sentence where its fields are there, else its
    `.generic` one, never a traceback; English keeps the message as written."""
    from attnprof.report.finding_text import finding_message

    t = Translator("id")
    old = {"gpu_ops": 3, "graph_launches": 1, "attention_kernels": 0}  # no clause field: generic
    assert finding_message(t, "CUDA_GRAPH", "3 GPU op(s) ...", old) == t("finding.CUDA_GRAPH.generic")
    # every field of the sentence there, but not one its clause reads
    partial = {**old, "attention_clause": "clause.graph_attention"}
    del partial["attention_kernels"]
    assert finding_message(t, "CUDA_GRAPH", "m", partial) == t("finding.CUDA_GRAPH.generic")
    full = {**old, "attention_clause": ""}
    assert finding_message(t, "CUDA_GRAPH", "m", full).startswith(
        "3 operasi GPU berasal dari 1 peluncuran graf"
    )
    assert finding_message(Translator("en"), "CUDA_GRAPH", "as written", old) == "as written"
