"""first_match searches lowered names with case-sensitive twins of the patterns that ignore case:
the twins must answer as the patterns do, on every table and on real names."""

from __future__ import annotations

import random
import re

import pytest

from _paths import TRACES
from attnprof.analysis.attribution import classify as classify_mod
from attnprof.analysis.attribution.attention_side import KERNEL_KINDS, OP_KINDS
from attnprof.analysis.attribution.kernel_rules import RULES
from attnprof.analysis.attribution.matching import caseless, first_match, needed_literals, twin_text
from attnprof.analysis.attribution.provenance import ATTENTION_OPS
from attnprof.analysis.timeline.runtime_calls import RUNTIME_KINDS

TABLES: dict[str, list[tuple[object, re.Pattern[str]]]] = {
    "kernel rules": [(r.family, r.pattern) for r in RULES],
    "precision": list(classify_mod._PRECISION),
    "direction": list(classify_mod._DIRECTION),
    "device events": list(classify_mod._DEVICE_EVENT),
    "attention ops": list(ATTENTION_OPS),
    "memory kinds (kernels)": list(KERNEL_KINDS),
    "memory kinds (ops)": list(OP_KINDS),
    "runtime calls": [(kind, rx) for kind, rx, _ in RUNTIME_KINDS],
}


def _real_names() -> list[str]:
    """Every event name of three real traces (NVIDIA training, AMD, a CUTLASS-heavy one) and
    every example of the kernel rules."""
    from attnprof.trace.load import load_trace

    names = {e for r in RULES for e in r.examples}
    for prefix in (
        "pytorch__kineto__tb_plugin__samples__resnet50",
        "AMD-AGI__TraceLens__tests__traces__mi300__Qwen",
        "HazyResearch__zoology",
    ):
        (path,) = TRACES.glob(prefix + "*")
        names.update(load_trace(path).names)
    return sorted(names)


def _slow(table: list[tuple[object, re.Pattern[str]]], name: str) -> object:
    return next((label for label, p in table if p.search(name)), None)


def _variants(names: list[str]) -> list[str]:
    """The names, in upper case, with cases swapped, and spliced from pieces of two names (a
    cut anywhere, so that patterns meet parts of names in new company)."""
    rng = random.Random(29)
    out = list(names)
    out += [n.upper() for n in names] + [n.swapcase() for n in names]
    for _ in range(2000):
        a, b = rng.choice(names), rng.choice(names)
        out.append(a[: rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1) :])
    return out


@pytest.fixture(scope="module")
def names() -> list[str]:
    return _variants(_real_names())


@pytest.mark.parametrize("table", sorted(TABLES))
def test_twins_answer_as_the_patterns_do(table: str, names: list[str]) -> None:
    rows = TABLES[table]
    assert any(caseless(p) is not None for _, p in rows) or table in ("runtime calls",)
    for label, pattern in rows:
        twin = caseless(pattern)
        if twin is None:
            continue
        wrong = [n for n in names if n.isascii() and bool(twin.search(n.lower())) != bool(pattern.search(n))]
        assert not wrong, f"{table}: {label}: the twin of {pattern.pattern!r} differs on {wrong[:3]}"
    wrong = [n for n in names if first_match(rows, n) != _slow(rows, n)]
    assert not wrong, f"{table}: first_match differs from a plain search on {wrong[:3]}"


def test_most_kernel_rules_that_ignore_case_have_a_twin() -> None:
    # the speed this module is for: a rule left without one is searched the slow way
    ignoring = [r for r in RULES if r.pattern.flags & re.IGNORECASE]
    assert ignoring and all(caseless(r.pattern) is not None for r in ignoring)


@pytest.mark.parametrize(
    "regex",
    [
        r"(?i)[0-_]",  # a range of non-letter ends that holds upper-case letters
        r"(?i)[A-z]",  # letters of two cases
        r"(?i)\x41",  # "A" by its code
        r"(?i)(a)\1",  # a backreference compares text
        r"(?i)a(?-i:B)",  # a scoped flag group turns IGNORECASE off
        r"(?i)(?P<x>a)(?P=x)",
        "(?i)\u0130",  # a non-ASCII letter: lowers to two characters
        r"ab|cd",  # case-sensitive: searched as it is
    ],
)
def test_no_twin_where_it_could_answer_otherwise(regex: str) -> None:
    assert caseless(re.compile(regex)) is None


@pytest.mark.parametrize(
    ("regex", "hits", "misses"),
    [
        (r"(?i)Flash[A-F]x|\bConv\d", ["FLASHcX", "flashax", "x conv3"], ["flashgx", "xconv3", "conv_"]),
        (r"(?i)[^a-z]Q", ["1q", "_Q"], ["aq", "Aq", "q"]),
        (r"(?i)\W\D\S", ["-a!", "-AB"], ["-1a", "a a "]),
    ],
)
def test_a_twin_answers_as_its_pattern(regex: str, hits: list[str], misses: list[str]) -> None:
    pattern = re.compile(regex)
    twin = caseless(pattern)
    assert twin is not None
    for name in hits:
        assert pattern.search(name) and twin.search(name.lower()), name
    for name in misses:
        assert not pattern.search(name) and not twin.search(name.lower()), name


def test_non_ascii_names_are_searched_by_the_patterns_themselves() -> None:
    # under IGNORECASE "s" matches the long s, which lowering leaves as it is: its twin would not
    pattern = re.compile(r"(?i)s")
    twin = caseless(pattern)
    assert twin is not None and not twin.search("\u017f".lower())
    assert first_match([("s", pattern)], "\u017f") == "s"


@pytest.mark.parametrize(
    ("regex", "needed"),
    [
        (r"ab|cd", {"ab", "cd"}),
        (r"x(ab)?y", {"x"}),  # either is certain; the first of equal ones
        (r"(ab)+", {"ab"}),
        (r"gemm(?=.*(e4m3|fp8))", {"gemm"}),  # the longest shortest literal
        (r"(?=.*(e4m3|fp8))", {"e4m3", "fp8"}),  # a lookahead's text is in the name too
        (r"(?i:abc)d", {"d"}),  # a literal that ignores case is not a substring to look for
        (r"\bfoo\b", {"foo"}),
        (r"(?!bar)baz", {"baz"}),
        (r"[ab]c", {"c"}),
        (r"a*", None),
        (r"a|", None),  # an empty alternative: nothing is certain
        (r"(?i)abc", None),
        (r"x{0,3}", None),
    ],
)
def test_needed_literals(regex: str, needed: set[str] | None) -> None:
    got = needed_literals(regex)
    assert (set(got) if got is not None else None) == needed


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_match_holds_a_needed_literal(table: str, names: list[str]) -> None:
    for _, pattern in TABLES[table]:
        text = twin_text(pattern)
        pat, lowered = (re.compile(text), True) if text is not None else (pattern, False)
        needed = needed_literals(pat.pattern, 0 if lowered else pattern.flags)
        if needed is None:
            continue
        for n in names:
            subject = n.lower() if lowered else n
            if pat.search(subject):
                assert any(lit in subject for lit in needed), (pattern.pattern, n)
