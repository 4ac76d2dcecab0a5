"""The commands' requests (attnprof.api, issue 30): `run`, `report` and `compare` build a request
from their flags and render its result, so the library's request and the command say the same
thing, and an option that would do nothing on a route is refused there in one line (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from _paths import trace
from attnprof.api.flags import build_workload, parse_steps
from attnprof.api.report import ReportRequest
from attnprof.api.run import RunFlags, RunRequest
from attnprof.errors import UserError
from test_options import attnprof, one_error_line

H100 = "AMD-AGI__TraceLens__tests__traces__h100"


def test_strict_without_expect_is_refused_before_anything_runs(tmp_path: Path) -> None:
    # it was exit 0 with nothing checked: --strict alone made the run look verified
    out = tmp_path / "run"
    line = one_error_line(
        attnprof("run", "--strict", "-v", "naive", "--shape", "1,1,16,8", "--out", str(out))
    )
    assert "--strict" in line and "--expect" in line, line
    assert not out.exists()  # refused before the run directory is made
    t = str(trace(H100))
    line = one_error_line(attnprof("compare", t, "--strict"))
    assert "--strict" in line and "--expect" in line, line
    with pytest.raises(UserError, match="--strict"):
        RunRequest.from_flags(RunFlags(strict=True, variants=["naive"]))


def test_summary_only_refuses_the_html_format(tmp_path: Path) -> None:
    # it printed the Markdown summary and exit 0, as if --format html had been honoured
    t = str(trace(H100))
    line = one_error_line(attnprof("report", t, "--format", "html", "--summary-only"))
    assert "--summary-only" in line and "--format html" in line, line
    ok = attnprof("report", t, "--summary-only")
    assert ok.returncode == 0 and ok.stdout.startswith("- "), ok.stderr  # the summary, as Markdown


def test_the_report_command_prints_what_its_request_renders(tmp_path: Path) -> None:
    t = trace(H100)
    for flags in ({"fmt": "md"}, {"summary_only": True}, {"fmt": "md", "lang": "id"}):
        req = ReportRequest.from_flags(t, **flags)  # type: ignore[arg-type]
        assert req.target is None  # Markdown goes to stdout
        args = ["report", str(t)]
        args += ["--format", "md"] if flags.get("fmt") else []
        args += ["--summary-only"] if flags.get("summary_only") else []
        args += ["--lang", str(flags["lang"])] if "lang" in flags else []
        p = attnprof(*args)
        assert p.returncode == 0, p.stderr
        assert p.stdout == req.render().text, flags
    html = ReportRequest.from_flags(t)
    assert html.target == t.with_name(t.name.removesuffix(".json.gz") + ".report.en.html")  # beside it
    o = tmp_path / "r.html"
    req = ReportRequest.from_flags(t, output=o, lang="th")
    assert req.target == o and req.fmt == "html" and req.lang == "th"
    with pytest.raises(UserError, match="--baseline"):
        ReportRequest.from_flags(None, store=tmp_path / "s.db", baseline="naive")


def test_a_run_request_holds_what_the_flags_mean(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    flags = RunFlags(
        variants=["naive,naive-inplace"], shape="1,2,32,8", device="cpu", steps="0,1,2", budget=0.05,
        seed=3, out=tmp_path / "r", no_profile=True,
    )  # fmt: skip
    req = RunRequest.from_flags(flags)
    assert [v.name for v in req.variants] == ["naive", "naive-inplace"]
    assert req.workload == build_workload(shape="1,2,32,8", device="cpu", seed=3)
    assert req.options.steps == parse_steps("0,1,2") == (0, 1, 2)
    assert req.options.profile is False and req.options.time_budget_s == 0.05
    assert not req.out.exists()  # nothing made until it runs
    record = req.execute()
    assert (tmp_path / "r" / "run.json").is_file()
    assert [r.label for r in record.results] == ["naive", "naive-inplace"]
    assert all(r.ran for r in record.results)
    with pytest.raises(UserError, match="no-such-variant"):
        RunRequest.from_flags(RunFlags(variants=["no-such-variant"], device="cpu"))
    with pytest.raises(UserError, match="--tensorboard"):
        RunRequest.from_flags(
            RunFlags(variants=["naive"], device="cpu", no_profile=True, tensorboard=tmp_path)
        )


def test_sweep_print_config_refuses_json_and_results_refuses_samples_where_they_do_nothing(
    tmp_path: Path,
) -> None:
    # both were exit 0 with the flag silently ignored: TOML printed for --json, no samples in a table
    line = one_error_line(attnprof("sweep", "--print-config", "--json", "-s", "16", "-v", "naive"))
    assert "--print-config" in line and "--json" in line, line
    plain = attnprof("sweep", "--print-config", "-s", "16", "-v", "naive")
    assert plain.returncode == 0 and "seq = [16]" in plain.stdout, plain.stderr
    store = tmp_path / "none.db"
    for fmt in ("table", "csv"):
        line = one_error_line(attnprof("results", "--store", str(store), "--format", fmt, "--samples"))
        assert "--samples" in line and fmt in line, line
    assert not store.exists()  # refused before the store is opened


def test_the_compare_command_prints_what_its_request_finds() -> None:
    import json

    import msgspec

    from attnprof.api.compare import CompareRequest

    t = trace(H100)
    got = CompareRequest.from_flags([t], expect="cpu").run()
    p = attnprof("compare", str(t), "--json", "--expect", "cpu")
    assert p.returncode == 0, p.stderr
    shown = json.loads(p.stdout)
    assert shown["rows"] == json.loads(msgspec.json.encode(got.comparison.rows))
    assert shown["expectations"] == json.loads(msgspec.json.encode(got.expectations))
    assert got.spec is not None and shown["expectation_file"] == got.spec.path
    with pytest.raises(UserError, match="--strict"):
        CompareRequest.from_flags([t], strict=True)
