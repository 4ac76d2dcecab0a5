"""Every finding code is in one catalogue (analysis/codes.py) and in the catalogs of all three
languages; the summary's cause lists agree with the catalogue's good/bad."""

from __future__ import annotations

import re
from pathlib import Path

from attnprof.analysis import CODES
from attnprof.analysis.codes import CATALOGUE, code_info
from attnprof.compare.causes import BAD_CODES, GOOD_CODES
from attnprof.report.i18n import Translator

SRC = Path(__file__).resolve().parents[1] / "src" / "attnprof"


def _compare_codes() -> set[str]:
    """The codes compare's own checks emit (code="..." or the correctness gate's two)."""
    text = (SRC / "compare" / "checks.py").read_text()
    return set(re.findall(r'code="([A-Z0-9_]+)"', text)) | set(re.findall(r'code = "([A-Z0-9_]+)"', text))


def test_every_emitted_code_is_catalogued_once() -> None:
    codes = [c.code for c in CATALOGUE]
    assert len(codes) == len(set(codes))
    assert set(CODES) == {c.code for c in CATALOGUE if c.where == "analysis"}
    emitted = _compare_codes()
    assert {"INCORRECT_OUTPUT", "INCORRECT_GRADIENT", "TOTAL_BELOW_BACKWARD"} <= emitted
    assert emitted <= {c.code for c in CATALOGUE}
    assert code_info("NOT_A_CODE") is None


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
