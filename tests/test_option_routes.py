"""Every option applies on every route it is accepted on, or is refused there (issue 30): the
folder route of `attnprof analyze` and `attnprof run --resume` (attnprof.api)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

import _rank_folder
from attnprof.harness.run import RunOptions
from test_options import attnprof, one_error_line


def test_a_rank_folder_refuses_the_options_its_view_cannot_apply(tmp_path: Path) -> None:
    folder = _rank_folder.build(tmp_path / "ranks", ranks=2, straggler=1, n_coll=2)
    plain = attnprof("analyze", str(folder))
    assert plain.returncode == 0, plain.stderr
    # each was exit 0 and silently ignored on a folder (and --threads bogus exit 2 on a file)
    for flags, named in (
        (["--threads", "bogus"], "--threads"),
        (["--threads", "all"], "--threads"),
        (["--peak", "100"], "--peak"),
        (["--ops"], "--ops"),
    ):
        p = attnprof("analyze", str(folder), *flags)
        assert p.returncode == 2, (flags, p.stdout, p.stderr)
        assert named in one_error_line(p) and "Traceback" not in p.stderr, flags
    # --lang was refused too (the terminal view was English only): now it applies (tests/test_ranks.py)
    th = attnprof("analyze", str(folder), "--lang", "th")
    assert th.returncode == 0 and "แรงก์" in th.stdout and "slowest rank" not in th.stdout, th.stderr


def _interrupted(out: Path) -> bytes:
    """A real two-variant run, made to read as one interrupted before its second variant: what
    `attnprof run` writes on Ctrl-C (tests/test_user_edges.py), without the wait."""
    p = attnprof("run", "-v", "naive,naive-inplace", "--shape", "1,2,64,16", "--time-budget", "0.05",
                 "--no-profile", "--out", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    record = json.loads((out / "run.json").read_text())
    record["results"] = [r for r in record["results"] if r["label"] != "naive-inplace"]
    opts = RunOptions(profile=False, time_budget_s=0.05, min_samples=3, warmup_calls=1, warmup_s=0.0)
    record["interrupted"] = True
    record["resume"] = {
        "pending": ["naive-inplace"],
        "options": msgspec.to_builtins(msgspec.structs.asdict(opts)),
    }
    raw = json.dumps(record).encode()
    (out / "run.json").write_bytes(raw)
    return raw


def test_resume_refuses_every_flag_that_would_change_what_the_run_measures(tmp_path: Path) -> None:
    out = tmp_path / "r"
    raw = _interrupted(out)
    # this exited 0, run.json unchanged and nothing checked: only None-default flags were refused
    p = attnprof("run", "--resume", str(out), "--backward", "--seed", "5")
    assert p.returncode == 2
    line = one_error_line(p)
    assert "--backward" in line and "--seed" in line and "start a new run" in line
    assert (out / "run.json").read_bytes() == raw  # nothing written
    # the run's own value changes nothing: accepted
    p = attnprof("run", "--resume", str(out), "--seed", "0", "--json")
    assert p.returncode == 0, p.stderr


def test_resume_applies_expect_and_strict_to_the_finished_run(tmp_path: Path) -> None:
    out = tmp_path / "r"
    _interrupted(out)
    p = attnprof("run", "--resume", str(out), "--expect", "cpu", "--strict")
    # the finished run is checked: the CPU expectations name the variants it ran and those it did not
    assert "met," in p.stdout and "skipped" in p.stdout and "naive-inplace" in p.stdout
    assert p.returncode == 3 and "expectation(s) not met" in p.stderr, p.stderr  # as a plain --strict run
    final = json.loads((out / "run.json").read_text())
    assert final["interrupted"] is False and {r["label"] for r in final["results"]} == {
        "naive",
        "naive-inplace",
    }
