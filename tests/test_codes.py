"""Every finding code is in one catalogue (analysis/codes.py) and in the catalogs of all three
languages; the summary's cause lists agree with the catalogue's good/bad."""

from __future__ import annotations

import re
from pathlib import Path

from attnprof.analysis import CODES
from attnprof.analysis.codes import CATALOGUE, code_info
from attnprof.report.i18n import Translator
from attnprof.report.summary import BAD_CODES, GOOD_CODES

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


def test_the_summary_names_good_causes_as_good_and_bad_as_bad() -> None:
    assert all(code_info(c) is not None and code_info(c).effect == "good" for c in GOOD_CODES)  # type: ignore[union-attr]
    assert all(code_info(c) is not None and code_info(c).effect == "bad" for c in BAD_CODES)  # type: ignore[union-attr]
