"""The run's peak and where it comes from, in the reader's language.

The harness records the provenance as data (records.PeakProvenance) beside its English
environment.peak_source; this renders the record through the catalogs. A run.json from before
the record existed has only the English string, shown as written.
"""

from __future__ import annotations

from attnprof.records import Environment
from attnprof.report.i18n import Translator
from attnprof.report.reasons import say_loads
from attnprof.units import fmt_num, number_locale

__all__ = ["peak_source"]


def peak_source(env: Environment, t: Translator) -> str:
    with number_locale(t.lang):
        return _peak_source(env, t)


def _peak_source(env: Environment, t: Translator) -> str:
    prov = env.peak_provenance
    if prov is None:
        return env.peak_source or "-"
    if prov.kind == "spec":
        return t("env.peak_spec", device=prov.spec_device or "-", dtype=prov.dtype)
    what = t(
        "env.peak_measured",
        tried=", ".join(prov.tried),
        best=prov.best_at or "-",
        repeats=prov.repeats or 0,
        budget=fmt_num(prov.budget_s, "g"),
        threads=prov.threads or 0,
        host=prov.host or "-",
        when=prov.measured_at or "-",
    )
    if prov.cached_in:
        return t("env.peak_cached", what=what, path=prov.cached_in)
    if prov.not_cached:
        return t(
            "env.peak_busy" if prov.busy else "env.peak_not_cached",
            what=what,
            reasons="; ".join(say_loads([(prov.not_cached, prov.not_cached_codes)], t)),
        )
    return what
