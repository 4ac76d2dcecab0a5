"""Expectations: say what the trace should contain, then look (the blog's "guess first").

An expectation file is TOML (docs/expectations.md):

    title = "..."
    baseline = "naive-inplace"        # for time_ratio (default: the comparison's baseline)
    [when]                            # the whole file applies only to matching runs
    device = "cuda"

    [[expect]]
    variant = "naive"                 # a variant, row label or trace name; shell globs allowed
    when = { dtype = "bf16" }         # optional: dtype, device, mode, mask, gqa, direction, phase
    gpu_ops_per_forward = 6           # exact, [lo, hi] or { min = .., max = .. }
    categories = ["gemm", "elementwise", "memcpy", "mask", "softmax", "gemm"]
    families_present = ["sgemm"]      # case-insensitive substring of a kernel family
    memcpy = true
    tensor_cores = false
    time_ratio = { min = 2.0 }        # this variant's median / the baseline's median
    gpu_ops_ratio = { to = "sdpa-flash", min = 5 }  # a relation: its ops / another variant's
    attention_kernels_per_forward = 1 # fused attention kernels per forward
    findings = ["OUT_OF_PLACE_COPY"]
    info = { gpu_ops_per_forward = 6 } # observed and printed, never enforced

Checks read a comparison Row (attnprof.compare.compare): the harness's clean timing and the trace
analysis. Each check gives one ExpectationResult: met, not met (with what was observed), or
skipped (the variant is not in the run, could not run on this machine, or `when` excludes it).
A check whose observation is missing (no trace analysis) is not met: silence is not a pass.
A check listed under `info` is observed and reported as "info" (with whether it agrees), never
enforced: exact op counts that a cuBLAS or cuDNN version can change belong there, the facts
they illustrate (a Memcpy present or absent, one attention kernel, many times the ops of a
fused kernel) among the checks.
"""

from __future__ import annotations

import fnmatch
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import msgspec

from attnprof.compare.compare import Comparison, Row, compare
from attnprof.compare.rank import ranked_median
from attnprof.errors import ExpectationMismatch, UserError
from attnprof.records import ReasonCode, RunRecord

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "BUILTINS",
    "CHECKS",
    "OBSERVED",
    "ExpectationFile",
    "ExpectationResult",
    "builtin_for_device",
    "check_comparison",
    "check_expectations",
    "enforce",
    "load_expectations",
    "observed_text",
    "resolve_expectation_path",
    "summarize_results",
]

# built-in files by the names users type (--expect cpu)
BUILTINS: dict[str, str] = {"cpu": "cpu.toml", "blog-cuda": "blog_cuda.toml", "blog_cuda": "blog_cuda.toml"}

# "info": a check the file lists under `info`, observed and shown but never enforced
Status = Literal["met", "not met", "skipped", "info"]
_SKIP_STATUSES = {"unsupported", "refused", "skipped"}  # the variant cannot run here: nothing to check

# observed_code -> the English text of the observation (str.format with observed_args); the
# report's catalogs say the same in other languages (message ids "observed.<code>")
OBSERVED: dict[str, str] = {
    "not_in_run": "not in this run",
    "applies_to": "applies to {key}={want}; this is {have}",
    "applies_unknown": "applies to {key}={want}; {key} unknown here",
    "did_not_run": "did not run: {status}",
    "did_not_run_reason": "did not run: {status} ({reason})",
    "not_measured": "not measured",
    "not_measured_no_gemm": "not measured (no GEMM of known kind)",
    "not_measured_no_timing": "not measured (no clean timing)",
    "not_recorded": "not recorded",
    "none_seen": "(none)",
    "no": "no",
    "present": "present",
    "absent": "absent",
    "present_list": "present: {list}",
    "missing_families": "missing {missing} (families: {seen})",
    "missing_families_none": "missing {missing} (families: none)",
    "missing_findings": "missing {missing} (has: {has})",
    "missing_findings_none": "missing {missing} (has: none)",
    "per_forward": "{n} per forward",
    "tensor_core_share": "{pct}% of GEMM time on tensor cores",
    "ops_ratio": "{ratio}x ({mine} vs {theirs} per forward)",
    "other_not_in_run": "{other} is not in this run",
    "other_did_not_run": "{other} did not run: {status}",
}

# an observation: plain text, or (code, values) to be worded from OBSERVED
Observed = str | tuple[str, dict[str, str]]


def _obs(code: str, **args: str) -> tuple[str, dict[str, str]]:
    return code, args


def observed_text(obs: Observed) -> tuple[str, str, dict[str, str]]:
    """(English text, code, values) of an observation."""
    if isinstance(obs, str):
        return obs, "", {}
    code, args = obs
    return OBSERVED[code].format(**args), code, args


class ExpectationResult(msgspec.Struct, kw_only=True):
    variant: str  # the pattern from the file
    row: str | None  # the compared row it was checked on
    check: str
    expected: str
    observed: str
    status: Status
    note: str = ""
    # the observation as a code and its values, for reports that say it in another language
    # (OBSERVED holds the English templates); "" where `observed` is a plain value (a count, a
    # status, kernel families)
    observed_code: str = ""
    observed_args: dict[str, str] = {}
    # observed_args' "reason" (why the row did not run) as data, when its result recorded it
    reason_code: ReasonCode | None = None
    # an "info" result: whether the observation agrees with the value the file states (None:
    # not observed); every other result: None
    agrees: bool | None = None

    @property
    def met(self) -> bool:
        """No mismatch: met, or skipped because it does not apply here. Use `status` to tell
        the two apart; only "not met" fails --strict."""
        return self.status != "not met"


class Expectation(msgspec.Struct, kw_only=True):
    variant: str
    when: dict[str, str] = {}
    checks: dict[str, Any] = {}
    # checks observed and reported as "info", never enforced (exact counts a library version moves)
    info: dict[str, Any] = {}
    baseline: str | None = None
    note: str = ""


class ExpectationFile(msgspec.Struct, kw_only=True):
    path: str
    title: str = ""
    description: str = ""
    baseline: str | None = None
    when: dict[str, str] = {}
    expectations: list[Expectation] = []


# -- loading ---------------------------------------------------------------------------------------


def resolve_expectation_path(name_or_path: str | Path) -> Path:
    """A file path, or the name of a built-in: cpu, blog-cuda."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    key = str(name_or_path).lower()
    if key in BUILTINS:
        res = resources.files("attnprof").joinpath("expectations", BUILTINS[key])
        return Path(str(res))
    names = ", ".join(k for k in BUILTINS if "_" not in k)
    raise UserError(f"--expect {name_or_path!r}: no such file and not a built-in (built-ins: {names})")


def builtin_for_device(device: str | None) -> str:
    """The built-in expectation file that describes a device's run."""
    return "blog-cuda" if device and device.startswith("cuda") else "cpu"


# mask, gqa, direction and phase describe the workload (a run.json's; unknown for a bare trace,
# so an expectation conditioned on them is skipped there rather than checked on a guess)
_WHEN_KEYS = {"dtype", "device", "mode", "mask", "gqa", "direction", "phase"}


def _range(value: Any, where: str) -> tuple[float, float]:
    """exact number, [lo, hi], or {min, max} -> (lo, hi)."""
    if isinstance(value, bool):
        raise UserError(f"{where}: expected a number, [lo, hi] or {{min, max}}, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value), float(value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        lo, hi = float(value[0]), float(value[1])
    elif isinstance(value, Mapping) and set(value) <= {"min", "max"} and value:
        lo = float(value.get("min", -math.inf))
        hi = float(value.get("max", math.inf))
    else:
        raise UserError(f"{where}: expected a number, [lo, hi] or {{min = .., max = ..}}, got {value!r}")
    if lo > hi:
        raise UserError(f"{where}: the range {value!r} is empty (min > max)")
    return lo, hi


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise UserError(f"{where}: expected a string or a list of strings, got {value!r}")


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"{where}: expected true or false, got {value!r}")
    return value


def _relation(value: Any, where: str) -> tuple[str, float, float]:
    """{ to = "VARIANT", min = .., max = .. } -> (to, lo, hi): a ratio to another variant's count."""
    if not isinstance(value, Mapping) or not isinstance(value.get("to"), str) or not value["to"]:
        raise UserError(f'{where}: expected {{ to = "VARIANT", min = .., max = .. }}, got {value!r}')
    bounds = {k: v for k, v in value.items() if k != "to"}
    if not bounds:
        raise UserError(f"{where}: give min, max or both beside to = {value['to']!r}")
    lo, hi = _range(bounds, where)
    return str(value["to"]), lo, hi


_VALIDATORS: dict[str, Callable[[Any, str], Any]] = {
    "status": _strings,
    "backend": _strings,
    "gpu_ops_per_forward": _range,
    "cpu_ops_per_forward": _range,
    "categories": _strings,
    "families_present": _strings,
    "families_absent": _strings,
    "fused_attention": _bool,
    "memcpy": _bool,
    "tensor_cores": _bool,
    "time_ratio": _range,
    "gpu_ops_ratio": _relation,
    "cpu_ops_ratio": _relation,
    "attention_kernels_per_forward": _range,
    "findings": _strings,
    "findings_absent": _strings,
}
CHECKS: tuple[str, ...] = tuple(_VALIDATORS)
_META_KEYS = {"variant", "when", "baseline", "note", "info"}


def _when(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping) or not set(value) <= _WHEN_KEYS:
        raise UserError(f"{where}: `when` takes a table with keys among {', '.join(sorted(_WHEN_KEYS))}")
    # TOML booleans (gqa = false) compare as the row's lower-case "false"
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


def load_expectations(name_or_path: str | Path) -> ExpectationFile:
    path = resolve_expectation_path(name_or_path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise UserError(
            f"{path}: not a text file (TOML is UTF-8 text); give an expectations TOML file"
        ) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    known_top = {"title", "description", "baseline", "when", "expect"}
    extra = set(data) - known_top
    if extra:
        raise UserError(f"{path}: unknown top-level key(s) {sorted(extra)}; valid: {sorted(known_top)}")
    items = data.get("expect", [])
    if not isinstance(items, list) or not items:
        raise UserError(f"{path}: no [[expect]] entries")
    out: list[Expectation] = []
    for i, item in enumerate(items, 1):
        where = f"{path.name} [[expect]] #{i}"
        if not isinstance(item, Mapping) or not isinstance(item.get("variant"), str):
            raise UserError(f'{where}: every [[expect]] needs variant = "NAME"')
        where = f"{path.name} [[expect]] #{i} ({item['variant']})"
        unknown = set(item) - set(_VALIDATORS) - _META_KEYS
        if unknown:
            raise UserError(f"{where}: unknown key(s) {sorted(unknown)}; checks are {', '.join(CHECKS)}")
        checks = {k: _VALIDATORS[k](v, f"{where} {k}") for k, v in item.items() if k in _VALIDATORS}
        info_items = item.get("info", {})
        if not isinstance(info_items, Mapping) or set(info_items) - set(_VALIDATORS):
            raise UserError(
                f"{where}: `info` takes a table of checks (among {', '.join(CHECKS)}), got {info_items!r}"
            )
        info = {k: _VALIDATORS[k](v, f"{where} info.{k}") for k, v in info_items.items()}
        if not checks and not info:
            raise UserError(f"{where}: states no expectation; use any of {', '.join(CHECKS)}")
        out.append(
            Expectation(
                variant=item["variant"],
                when=_when(item.get("when", {}), where),
                checks=checks,
                info=info,
                baseline=item.get("baseline"),
                note=str(item.get("note", "")),
            )
        )
    return ExpectationFile(
        path=str(path),
        title=str(data.get("title", "")),
        description=str(data.get("description", "")),
        baseline=data.get("baseline"),
        when=_when(data.get("when", {}), f"{path.name} [when]"),
        expectations=out,
    )


# -- checking --------------------------------------------------------------------------------------


def _fmt(x: float | None) -> str:
    if x is None:
        return "not measured"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


def _fmt_range(lo: float, hi: float, unit: str = "") -> str:
    if lo == hi:
        return f"{_fmt(lo)}{unit}"
    if math.isinf(lo):
        return f"<= {_fmt(hi)}{unit}"
    if math.isinf(hi):
        return f">= {_fmt(lo)}{unit}"
    return f"{_fmt(lo)}..{_fmt(hi)}{unit}"


def _applies(when: Mapping[str, str], row: Row) -> Observed | None:
    """None if `when` matches the row, else why not."""
    for key, want in when.items():
        have = getattr(row, key, None)
        if have is None:
            return _obs("applies_unknown", key=key, want=want)
        if isinstance(have, bool):
            have = str(have).lower()
        ok = str(have) == want or str(have).startswith(want + ":") if key == "device" else str(have) == want
        if not ok:
            return _obs("applies_to", key=key, want=want, have=str(have))
    return None


def _matches(pattern: str, row: Row) -> bool:
    """By label (naive, naive:compile, run2/naive, a trace name), or by variant name for eager
    rows: an expectation about "naive" does not silently apply to its torch.compile twin."""
    names = [row.label]
    if row.variant and row.mode != "compile":
        names += [row.variant, f"{Path(row.source).name}/{row.variant}"]
    return any(fnmatch.fnmatchcase(n, pattern) for n in names)


def _family_hit(needle: str, families: Sequence[str]) -> str | None:
    n = needle.lower()
    return next((f for f in families if n in f.lower()), None)


def _baseline_row(comp: Comparison, row: Row, name: str | None) -> Row | None:
    if name is None:
        base = comp.baseline_row
        name = base.variant if base is not None else None
        if name is None:
            return base
    # the same run first: a ratio across two runs would mix machines or workloads
    same = [r for r in comp.rows if r.input == row.input and name in (r.variant, r.label)]
    same.sort(key=lambda r: r.mode != row.mode)
    if same:
        return same[0]
    return next((r for r in comp.rows if name in (r.variant, r.label)), None)


def _related_row(comp: Comparison, row: Row, pattern: str) -> Row | None:
    """The row a relation compares with: in the same run (input) first, as _baseline_row does."""
    rows = [r for r in comp.rows if r is not row and _matches(pattern, r)]
    rows.sort(key=lambda r: (r.input != row.input, r.mode != row.mode))
    return rows[0] if rows else None


def _relation_skip(name: str, want: Any, row: Row, comp: Comparison) -> Observed | None:
    """Why a relation to another variant cannot be checked here (it is not in the run, or it did
    not run), or None: the other side's absence is its own row's story, not this one's mismatch."""
    if name not in ("gpu_ops_ratio", "cpu_ops_ratio"):
        return None
    other = _related_row(comp, row, want[0])
    if other is None:
        return _obs("other_not_in_run", other=want[0])
    if not other.ok:
        return _obs("other_did_not_run", other=other.label, status=other.status)
    return None


def _check(
    name: str, want: Any, row: Row, comp: Comparison, baseline: str | None
) -> tuple[str, Observed, bool | None]:
    """(expected text, observed text, met?) with met None when the observation is missing."""
    if name == "status":
        return " or ".join(want), row.status, row.status in want
    if name == "backend":
        return " or ".join(want), row.backend or _obs("not_recorded"), row.backend in want
    if name in ("gpu_ops_per_forward", "cpu_ops_per_forward"):
        lo, hi = want
        got = getattr(row, name)
        return (
            _fmt_range(lo, hi),
            _obs("not_measured") if got is None else _fmt(got),
            None if got is None else lo - 1e-9 <= got <= hi + 1e-9,
        )
    if name == "attention_kernels_per_forward":
        lo, hi = want
        n = row.attention_kernels_per_forward
        return (
            _fmt_range(lo, hi),
            _obs("not_measured") if n is None else _fmt(n),
            None if n is None else lo - 1e-9 <= n <= hi + 1e-9,
        )
    if name in ("gpu_ops_ratio", "cpu_ops_ratio"):
        to, lo, hi = want
        field = "gpu_ops_per_forward" if name == "gpu_ops_ratio" else "cpu_ops_per_forward"
        other = _related_row(comp, row, to)
        exp = f"{_fmt_range(lo, hi, 'x')} of {other.label if other is not None else to}"
        mine, theirs = getattr(row, field), getattr(other, field) if other is not None else None
        if mine is None or not theirs:
            return exp, _obs("not_measured"), None
        ratio = mine / theirs
        return (
            exp,
            _obs("ops_ratio", ratio=f"{ratio:.2f}", mine=_fmt(mine), theirs=_fmt(theirs)),
            lo - 1e-9 <= ratio <= hi + 1e-9,
        )
    if name == "categories":
        if row.analysis_error is not None or (not row.category_sequence and row.gpu_ops_per_forward is None):
            return " > ".join(want), _obs("not_measured"), None
        return (
            " > ".join(want),
            " > ".join(row.category_sequence) or _obs("none_seen"),
            list(want) == row.category_sequence,
        )
    if name in ("families_present", "families_absent"):
        if row.analysis_error or (row.forwards is None and not row.families and row.kind == "run"):
            return ", ".join(want), _obs("not_measured"), None
        hits = {w: _family_hit(w, row.families) for w in want}
        if name == "families_present":
            missing = [w for w, h in hits.items() if h is None]
            observed: Observed = ", ".join(str(h) for h in hits.values())
            if missing and row.families:
                observed = _obs("missing_families", missing=", ".join(missing), seen=", ".join(row.families))
            elif missing:
                observed = _obs("missing_families_none", missing=", ".join(missing))
            return ", ".join(want), observed, not missing
        found = [str(h) for h in hits.values() if h is not None]
        return (
            ", ".join(want),
            _obs("present_list", list=", ".join(found)) if found else _obs("absent"),
            not found,
        )
    if name == "fused_attention":
        if row.analysis_error is not None:
            return str(want).lower(), _obs("not_measured"), None
        got = bool(row.fused_families)
        return ("yes" if want else "no"), (", ".join(row.fused_families) or _obs("no")), got == want
    if name == "memcpy":
        got_n = row.memcpy_per_forward
        if got_n is None:
            return ("present" if want else "absent"), _obs("not_measured"), None
        return ("present" if want else "absent"), _obs("per_forward", n=_fmt(got_n)), (got_n > 0) == want
    if name == "tensor_cores":
        share = row.tensor_core_share
        exp = "GEMMs on tensor cores" if want else "GEMMs on CUDA cores"
        if share is None:
            return exp, _obs("not_measured_no_gemm"), None
        got_tc = share >= 0.5
        return exp, _obs("tensor_core_share", pct=f"{share * 100:.0f}"), got_tc == want
    if name == "time_ratio":
        lo, hi = want
        base = _baseline_row(comp, row, baseline)
        bname = base.label if base is not None else (baseline or "baseline")
        exp = f"{_fmt_range(lo, hi, 'x')} of {bname}"
        # the timing the comparison ranks by (compare/rank.py): forward + backward for a
        # --backward run, a model's step; the forward's median alone would judge another claim
        if row.ranked_by != "forward":
            exp += f" ({row.ranked_by})"
        mine, theirs = ranked_median(row), ranked_median(base) if base is not None else None
        if base is None or base.ranked_by != row.ranked_by or not theirs or mine is None:
            return exp, _obs("not_measured_no_timing"), None
        ratio = mine / theirs
        return exp, f"{ratio:.2f}x", lo <= ratio <= hi
    if name in ("findings", "findings_absent"):
        if row.analysis_error is not None:
            return ", ".join(want), _obs("not_measured"), None
        codes = row.finding_codes
        if name == "findings":
            missing = [c for c in want if c not in codes]
            seen: Observed = _obs("present")
            if missing and codes:
                seen = _obs("missing_findings", missing=", ".join(missing), has=", ".join(codes))
            elif missing:
                seen = _obs("missing_findings_none", missing=", ".join(missing))
            return ", ".join(want), seen, not missing
        found = [c for c in want if c in codes]
        return (
            ", ".join(want),
            _obs("present_list", list=", ".join(found)) if found else _obs("absent"),
            not found,
        )
    raise AssertionError(name)  # _VALIDATORS keeps the set closed


def check_comparison(comp: Comparison, spec: ExpectationFile) -> list[ExpectationResult]:
    results: list[ExpectationResult] = []
    for exp in spec.expectations:
        rows = [r for r in comp.rows if _matches(exp.variant, r)]
        if not rows:
            results.extend(
                ExpectationResult(
                    variant=exp.variant,
                    row=None,
                    check=c,
                    expected="",
                    observed=OBSERVED["not_in_run"],
                    status="skipped",
                    note=exp.note,
                    observed_code="not_in_run",
                )
                for c in [*exp.checks, *exp.info]
            )
            continue
        for row in rows:
            why_not = _applies(spec.when, row) or _applies(exp.when, row)
            entries = [(c, w, False) for c, w in exp.checks.items()]
            entries += [(c, w, True) for c, w in exp.info.items()]
            for check, want, info in entries:
                base = ExpectationResult(
                    variant=exp.variant,
                    row=row.label,
                    check=check,
                    expected="",
                    observed="",
                    status="skipped",
                    note=exp.note,
                )
                why = why_not or _relation_skip(check, want, row, comp)
                if why:
                    base.observed, base.observed_code, base.observed_args = observed_text(why)
                    results.append(base)
                    continue
                if check != "status" and not row.ok:
                    obs = (
                        _obs("did_not_run_reason", status=row.status, reason=row.reason)
                        if row.reason
                        else _obs("did_not_run", status=row.status)
                    )
                    base.observed, base.observed_code, base.observed_args = observed_text(obs)
                    base.reason_code = row.reason_code
                    base.status = "skipped" if row.status in _SKIP_STATUSES or info else "not met"
                    results.append(base)
                    continue
                expected, observed, met = _check(check, want, row, comp, exp.baseline or spec.baseline)
                base.expected = expected
                base.observed, base.observed_code, base.observed_args = observed_text(observed)
                if info:  # shown with whether it agrees, never enforced
                    base.status, base.agrees = "info", met
                else:
                    base.status = "met" if met else "not met"
                results.append(base)
    return results


def check_expectations(
    run: RunRecord | Comparison | str | Path | Iterable[str | Path],
    expectations: str | Path,
    *,
    baseline: str | None = None,
) -> list[ExpectationResult]:
    """Check an expectation file (a path or a built-in name) against a run directory, several
    run directories / traces, or an already built Comparison.

    A bare RunRecord (without its directory) can only be checked on what run.json holds: timing,
    status and the harness's per-forward counts; pass the run directory to include the traces."""
    spec = load_expectations(expectations)
    if isinstance(run, Comparison):
        comp = run
    elif isinstance(run, RunRecord):
        comp = _comparison_from_record(run, baseline)
    elif isinstance(run, (str, Path)):
        comp = compare([run], baseline=baseline)
    else:
        comp = compare(list(run), baseline=baseline, group_workloads=True)
    return check_comparison(comp, spec)


def _comparison_from_record(record: RunRecord, baseline: str | None) -> Comparison:
    import tempfile

    from attnprof.records import encode_json

    # compare() reads run directories; a record without one goes through a scratch directory,
    # with its traces (relative paths) reported missing rather than silently skipped
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "run.json").write_bytes(encode_json(record))
        return compare([tmp], baseline=baseline, analyse=False)


def summarize_results(results: Sequence[ExpectationResult]) -> dict[str, int]:
    out = {"met": 0, "not met": 0, "skipped": 0, "info": 0}
    for r in results:
        out[r.status] += 1
    return out


def enforce(results: Sequence[ExpectationResult], *, strict: bool) -> None:
    """Under --strict, any expectation not met raises ExpectationMismatch (exit 3); so does one
    naming a variant that does not exist (a typo would otherwise pass as "skipped")."""
    failed = [r for r in results if r.status == "not met" or (strict and _names_no_variant(r))]
    if strict and failed:
        first = failed[0]
        more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
        if first.status != "not met":
            raise ExpectationMismatch(
                f"{len(failed)} expectation(s) not met: variant {first.variant!r} matches nothing here and "
                f"no variant attnprof knows (see attnprof list){more}"
            )
        raise ExpectationMismatch(
            f"{len(failed)} expectation(s) not met: {first.row or first.variant} {first.check} expected "
            f"{first.expected}, observed {first.observed}{more}"
        )


def _names_no_variant(result: ExpectationResult) -> bool:
    """Skipped as not in the run, and its pattern matches no built-in variant or compiled twin.
    Patterns naming a source (run2/naive) or a user variant (file.py:func) cannot be checked."""
    if result.observed_code != "not_in_run":
        return False
    pattern = result.variant
    if "/" in pattern or ":" in pattern.removesuffix(":compile"):
        return False
    from attnprof.variants.registry import variant_names

    names = variant_names()
    return not any(fnmatch.fnmatchcase(n, pattern) for n in [*names, *(f"{n}:compile" for n in names)])
