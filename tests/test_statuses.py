"""What a command's exit says: Ctrl-C is never a variant's failure, a run or sweep in which
nothing useful finished does not exit 0, and what was asked for but does not exist is one line.
Real torch runs at tiny shapes, real subprocesses, real signals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ATTNPROF = [sys.executable, "-m", "attnprof"]
FAST = ["--no-profile", "--time-budget", "0.02", "--min-samples", "3"]


def attnprof(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ATTNPROF, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


# Sends a real SIGINT to itself at the moment torch.profiler starts preparing its trace (the
# entry of _prepare_trace, found by a trace function), then runs two variants into a run folder.
_CTRL_C_IN_PROFILER_START = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    from attnprof.errors import Interrupted
    from attnprof.harness.run import RunOptions, run
    from attnprof.workload import Workload


    def ctrl_c_at_start(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "_prepare_trace" and "profiler" in frame.f_code.co_filename:
            sys.settrace(None)
            os.kill(os.getpid(), signal.SIGINT)
        return None


    w = Workload(batch=1, heads=2, seq=32, head_dim=16, dtype="fp32", device="cpu")
    sys.settrace(ctrl_c_at_start)
    try:
        run(w, ["naive", "sdpa"], out=Path(sys.argv[1]), options=RunOptions(time_budget_s=0.02, min_samples=3))
    except Interrupted as exc:
        print(exc)
        sys.exit(130)
    """
)


def test_ctrl_c_while_the_profiler_starts_is_an_interrupt_not_a_failure(tmp_path: Path) -> None:
    """A Ctrl-C landing inside torch.profiler's start used to leave it half made: its __exit__
    raised "AssertionError: Profiler must be initialized" in the Ctrl-C's place (recorded as the
    variant's failure, and the run went on), or crashed in C++ (torch 2.13 here: a segfault)."""
    pytest.importorskip("torch")
    out = tmp_path / "run"
    out.mkdir()
    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C_IN_PROFILER_START)
    p = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])
    assert "interrupted" in p.stdout, p.stdout
    record = json.loads((out / "run.json").read_text())
    assert record["interrupted"] is True
    assert not [r for r in record["results"] if r["status"] != "ok"], record["results"]
    assert "naive" in record["resume"]["pending"]


# A user variant that sends the run's process a real SIGINT from inside the exec of a string, as
# when Ctrl-C lands while a dataclass or namedtuple is being made (CPython makes their methods
# that way). Only in the run's own process, whose parent is the test: the trial child that first
# runs a user variant alone has the run as its parent, and must end normally for it to be run.
_CTRL_C_IN_EXEC = textwrap.dedent(
    """
    import os, signal, time

    def stop(q, k, v, is_causal=True, scale=None):
        if os.getppid() == int(os.environ["ATTNPROF_TEST_PID"]):
            exec("os.kill(os.getpid(), signal.SIGINT)\\nwhile True: time.sleep(0.01)", globals())
        return q
    """
)


def test_ctrl_c_inside_a_string_exec_still_exits_130_under_python_m(tmp_path: Path) -> None:
    """CPython marks a KeyboardInterrupt that ends a string exec as unhandled even when it is
    caught, and `python -m` then exits by SIGINT (-2) in place of the 130 the CLI chose. Where
    Ctrl-C lands is chance, so without this test that shows only now and then (the Ctrl-C test
    of tests/test_user_edges.py)."""
    pytest.importorskip("torch")
    (tmp_path / "uv.py").write_text(_CTRL_C_IN_EXEC)
    out = tmp_path / "r"
    p = subprocess.run(
        [*ATTNPROF, "run", "-v", "naive,uv.py:stop", "--shape", "1,1,8,8", *FAST[:3], "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "ATTNPROF_TEST_PID": str(os.getpid())},
    )  # fmt: skip
    assert p.returncode == 130, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr
    assert [ln for ln in p.stderr.splitlines() if ln.startswith("attnprof: interrupted")], p.stderr
    record = json.loads((out / "run.json").read_text())
    assert record["interrupted"] is True
    assert [v for v in record["resume"]["pending"] if v.endswith("uv.py:stop")], record["resume"]


_USER = textwrap.dedent(
    """
    import torch


    def all_fail(q, k, v, is_causal=True, scale=None):
        raise RuntimeError("this variant always fails")
    """
)


def test_a_sweep_whose_every_job_failed_exits_non_zero(tmp_path: Path) -> None:
    (tmp_path / "uv.py").write_text(_USER)
    p = attnprof(
        "sweep", "--store", str(tmp_path / "s.db"), "-s", "16", "-H", "1", "-d", "8",
        "-v", "uv.py:all_fail", "--device", "cpu", "--no-progress", *FAST, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 1, (p.returncode, p.stderr)
    last = [ln for ln in p.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("attnprof: error: ") and "no job" in last, p.stderr


def test_a_sweep_with_one_good_job_exits_zero(tmp_path: Path) -> None:
    (tmp_path / "uv.py").write_text(_USER)
    p = attnprof(
        "sweep", "--store", str(tmp_path / "s.db"), "-s", "16", "-H", "1", "-d", "8",
        "-v", "uv.py:all_fail,naive", "--device", "cpu", "--no-progress", *FAST, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr


def test_a_run_that_fails_before_any_variant_leaves_no_empty_directory(tmp_path: Path) -> None:
    out = tmp_path / "never"
    # an expectations file that does not exist fails before the run: nothing is created
    p = attnprof(
        "run", "-v", "naive", "--shape", "1,1,8,8", *FAST[:3], "-o", str(out), "--expect", "nope.toml"
    )
    assert p.returncode == 2, p.stderr
    assert not out.exists()


def test_model_with_an_unknown_implementation_is_one_line_before_any_work(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    p = attnprof("model", "llama", "--size", "tiny", "--attn", "bogus,sdpa", "-o", str(tmp_path / "m"))
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "unknown -v/--variants bogus" in lines[0] and "eager" in lines[0], lines[0]
    assert not (tmp_path / "m").exists()


def test_tensorboard_pointing_at_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "tb").write_text("a file, not a folder\n")
    p = attnprof("run", "-v", "naive", "--shape", "1,1,8,8", "--tensorboard", str(tmp_path / "tb"),
                 "-o", str(tmp_path / "r"))  # fmt: skip
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert "--tensorboard" in lines[0] and "is a file" in lines[0], lines[0]
    assert not (tmp_path / "r").exists()


def test_a_grid_too_large_is_refused_before_expansion_with_its_size(tmp_path: Path) -> None:
    seqs = ",".join(str(s) for s in range(16, 16 + 3000))
    for extra in ([], ["--print-config"]):
        p = attnprof("sweep", "--store", str(tmp_path / "s.db"), "-s", seqs, "-b", "1,2,3,4,5,6,7,8",
                     "-H", "1,2,4,8,16", "--device", "cpu", *extra)  # fmt: skip
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode == 2 and len(lines) == 1, p.stderr
        assert "the grid has up to 840,000 jobs" in lines[0] and "--seq" in lines[0], lines[0]
    assert not (tmp_path / "s.db").exists()


def test_print_config_of_a_large_grid_prints_its_size_and_a_sample() -> None:
    seqs = ",".join(str(s) for s in range(16, 16 + 100))
    p = attnprof("sweep", "--print-config", "-s", seqs, "-v", "naive,sdpa,sdpa-math", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    assert "= 300 job(s)" in p.stdout
    jobs = [ln for ln in p.stdout.splitlines() if ln.startswith("# ") and "B=1" in ln]
    assert 0 < len(jobs) < 300 and "more job(s)" in p.stdout
    small = attnprof("sweep", "--print-config", "-s", "16,32", "-v", "naive", "--device", "cpu")
    assert "more job(s)" not in small.stdout  # a small grid is listed whole


def test_workers_beyond_the_cpus_are_lowered_with_a_note(tmp_path: Path) -> None:
    p = attnprof(
        "sweep", "--store", str(tmp_path / "s.db"), "-s", "16", "-H", "1", "-d", "8", "-v", "naive",
        "--device", "cpu", "--no-progress", "--workers", "1000", *FAST,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    cpus = len(os.sched_getaffinity(0))
    assert f"note: --workers 1000 lowered to {cpus}" in p.stderr or "GiB available holds" in p.stderr, (
        p.stderr
    )


# Runs the real command line and sends itself a real SIGINT when the named attnprof function is
# entered: a Ctrl-C at a known point of the command's work, whatever the machine's load.
_CTRL_C_AT = textwrap.dedent(
    """
    import os, signal, sys

    target = sys.argv[1]

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_name == target and "attnprof" in frame.f_code.co_filename:
            sys.settrace(None)
            os.kill(os.getpid(), signal.SIGINT)
        return None

    from attnprof.cli import main

    sys.settrace(hook)
    sys.argv = ["attnprof", *sys.argv[2:]]
    main()
    """
)


@pytest.mark.parametrize("command", ["report", "analyze"])
def test_ctrl_c_during_report_or_analyze_says_interrupted_and_writes_nothing(
    command: str, tmp_path: Path
) -> None:
    trace_file = tmp_path / "t.json"
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]
    trace_file.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "out.html"
    target, args = {
        "report": ("build_report_data", ["report", str(trace_file), "-o", str(out)]),
        "analyze": ("analyze", ["analyze", str(trace_file)]),
    }[command]
    p = subprocess.run(
        [sys.executable, "-c", _CTRL_C_AT, target, *args], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 130, (p.returncode, p.stderr)
    assert p.stderr.strip().splitlines() == ["attnprof: interrupted; no output file was written"], p.stderr
    assert not out.exists()


_LIBRARY_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path

    import attnprof
    from attnprof.errors import Interrupted

    def hook(frame, event, arg):  # Ctrl-C once clean timing starts: run.json keeps the options
        if event == "call" and frame.f_code.co_name == "time_calls" and "attnprof" in frame.f_code.co_filename:
            sys.settrace(None)
            os.kill(os.getpid(), signal.SIGINT)
        return None

    sys.settrace(hook)
    try:
        attnprof.run(attnprof.Workload(batch=1, heads=1, seq=16, head_dim=8), ["naive"], out=Path(sys.argv[1]))
    except Interrupted:
        sys.exit(130)
    """
)


def test_the_library_times_with_the_command_lines_default_budget(tmp_path: Path) -> None:
    from attnprof.harness.options import default_time_budget

    out = tmp_path / "r"
    p = subprocess.run(
        [sys.executable, "-c", _LIBRARY_RUN, str(out)], capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 130, p.stderr[-2000:]
    saved = json.loads((out / "run.json").read_text())["resume"]["options"]
    assert saved["time_budget_s"] == default_time_budget("cpu") == 0.5  # not RunOptions' 1.0


def test_a_slow_variants_warning_is_printed_not_only_kept_in_run_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # in-process: what is printed is the subject here, not the exit (a subprocess would pay for
    # importing torch twice more; the variant's own trial run is still a child process)
    from attnprof.cli import main
    from attnprof.harness.run import SLOW_CALL_S

    def attnprof(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        code = main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["attnprof", *args], code, out, err)

    (tmp_path / "slow.py").write_text(
        "import time\nimport torch.nn.functional as F\n\n\n"
        "def slow(q, k, v, is_causal=True, scale=None):\n"
        f"    time.sleep({SLOW_CALL_S} + 0.1)\n"
        "    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)\n"
    )
    p = attnprof("run", "-v", "naive,slow.py:slow", "--shape", "1,1,8,8", "--time-budget", "0.02",
                 "-o", str(tmp_path / "r"), "--no-color", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "warning: slow: one call takes 1." in text, p.stdout
    fast = attnprof("run", "-v", "naive", "--shape", "1,1,8,8", "--time-budget", "0.02",
                    "-o", str(tmp_path / "f"), "--no-color", cwd=tmp_path)  # fmt: skip
    assert fast.returncode == 0, fast.stderr
    assert "one call takes" not in fast.stdout  # fast variants alone: no such line
