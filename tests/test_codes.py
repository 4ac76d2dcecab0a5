"""Every finding code is in one catalogue (analysis/codes.py) and in the catalogs of all three
languages; no rule declares a severity of its own (every finding is made by codes.finding, at
the catalogue's level or "info"); the cause lists are the catalogue's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attnprof.analysis import CODES
from attnprof.analysis.codes import CATALOGUE, code_info, finding
from attnprof.analysis.idle_findings import CAUSE_FINDINGS
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
    # the idle causes' table names codes and words only
    assert all(len(v) == 3 and not set(v) & _LEVELS for v in CAUSE_FINDINGS.values())


def test_finding_takes_the_catalogues_level_or_info() -> None:
    assert finding("ABOVE_PEAK", "m").severity == "error"
    assert finding("UNFUSED_ATTENTION", "m").severity == "warning"
    assert finding("UNFUSED_ATTENTION", "m", minor=True).severity == "info"
    with pytest.raises(KeyError):
        finding("NOT_A_CODE", "m")


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
