"""`attnprof run` and `attnprof list` as a user types them: exit codes, one-line errors, output."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest


def attnprof(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attnprof", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seq", "0"], "seq must be a positive integer"),
        (["--variants", "nope"], "naive-inplace"),
        (["--device", "cuda"], "--device cpu"),
        (["--dtype", "fp8"], "fp32, fp16, bf16"),
        (["-H", "8", "--kv-heads", "3"], "multiple of kv heads"),
        (["--shape", "1,2"], "B,H,S,D"),
        (["--steps", "1,1"], "WAIT,WARMUP,ACTIVE"),
        (["--seq", "abc"], "--seq"),
        (["--variants", "no_such_file.py:f"], "does not exist"),
        (["--mask", "sliding"], "needs a value"),
        (["--mask", "window=3"], "unknown --mask"),
        (["--no-causal", "--mask", "alibi"], "contradict"),
        (["--mask", "padding=3,4"], "one key length per batch element"),
        (["--phase", "decode", "--decode-queries", "9", "--kv-seq", "4"], "kv-seq >= --decode-queries"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    p = attnprof("run", *args, "--out", str(tmp_path / "out"))
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith("USDT")]
    assert len(lines) == 1, p.stderr
    assert needle in lines[0] and "Traceback" not in p.stderr
    assert not (tmp_path / "out").exists()  # nothing written for bad input


def test_list_gives_a_reason_for_every_unavailable_variant(capsys: pytest.CaptureFixture[str]) -> None:
    # in-process: what list says is the subject (the entry point and its exit codes are the
    # subprocess tests' here); two subprocesses would import torch twice more
    from attnprof.cli import main

    code = main(["list", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert data["device"] == "cpu"
    for v in data["variants"]:
        assert v["available"] or v["reason"], v
        # the reason as data too: a code and its fields (none for an available variant)
        assert (v["reason_code"] is None) == v["available"], v
    eff = next(v for v in data["variants"] if v["variant"] == "sdpa-efficient")
    assert eff["reason_code"] == {"code": "cuda_only", "args": {"name": "sdpa-efficient", "device": "cpu"}}
    assert main(["list", "--no-color"]) == 0
    text = capsys.readouterr().out
    assert "sdpa-efficient" in text and "CUDA" in text


def test_run_json_and_refusal(tmp_path: Path) -> None:
    p = attnprof(
        "run",
        "--variants",
        "naive,naive-inplace",
        "--shape",
        "1,2,64,16",
        "--time-budget",
        "0.05",
        "--out",
        str(tmp_path / "r"),
        "--json",
    )
    assert p.returncode == 0, p.stderr
    record = json.loads(p.stdout)
    assert record["schema"] == "attnprof.run/1"
    assert [r["variant"] for r in record["results"]] == ["naive", "naive-inplace"]
    assert (tmp_path / "r" / "run.json").exists()
    assert len(list((tmp_path / "r" / "traces").glob("1_2_64_16_*_eager.json.gz"))) == 2
    assert len(list((tmp_path / "r" / "tables").glob("*.txt"))) == 2

    # refused before anything is built (no 4 GiB mask): exit 2, one line on stderr, run.json kept
    big = attnprof("run", "--variants", "naive", "--seq", "65536", "--out", str(tmp_path / "big"), timeout=60)
    assert big.returncode == 2, big.stderr
    assert "refused" in big.stdout and "GiB" in big.stdout and "--force" in big.stdout
    errors = [ln for ln in big.stderr.splitlines() if ln.startswith("attnprof: error")]
    assert len(errors) == 1 and "no variant ran (1 refused)" in errors[0] and "Traceback" not in big.stderr
    rec = json.loads((tmp_path / "big" / "run.json").read_text())
    assert rec["results"][0]["status"] == "refused"


def test_run_table_and_existing_out_dir(tmp_path: Path) -> None:
    out = tmp_path / "r"
    p = attnprof(
        "run",
        "-v",
        "sdpa-math",
        "-v",
        "sdpa-flash",
        "-b",
        "1",
        "-H",
        "2",
        "-s",
        "64",
        "-d",
        "16",
        "--time-budget",
        "0.05",
        "--out",
        str(out),
        "--no-color",
    )
    assert p.returncode == 0, p.stderr
    assert "sdpa-math" in p.stdout and "math" in p.stdout and "vs fastest" in p.stdout
    assert "B=1 H=2 S=64 D=16" in p.stderr  # the shape used is printed
    again = attnprof("run", "-v", "naive", "--out", str(out))
    assert again.returncode == 2 and "already holds an earlier run" in again.stderr


def test_internal_error_is_short_without_debug(tmp_path: Path) -> None:
    """A real internal error (a bug: an exception attnprof did not raise on purpose) through the
    real command line: exit 1, one short line naming it and --debug; the traceback only with
    --debug. The bug is planted in attnprof's own analysis entry point, in the child process."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    plant = (
        "import sys, attnprof.analysis as a\n"
        "def bug(*args, **kwargs):\n"
        "    raise KeyError('a bug, not the user')\n"
        "a.analyze = bug\n"
        "from attnprof.cli import main\n"
        "sys.argv = ['attnprof', *sys.argv[1:]]\n"
        "main()\n"
    )
    for debug in ([], ["--debug"]):
        p = subprocess.run(
            [sys.executable, "-c", plant, "analyze", str(trace), *debug],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 1, (p.returncode, p.stderr)
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("attnprof: error: internal error: KeyError"), p.stderr
        assert "--debug" in last
        assert ("Traceback" in p.stderr) == bool(debug), p.stderr


def test_run_expect_strict(tmp_path: Path) -> None:
    from importlib.resources import files

    common = [
        "--variants",
        "naive,naive-inplace",
        "--shape",
        "1,2,64,16",
        "--time-budget",
        "0.05",
        "--no-color",
    ]
    ok = attnprof("run", *common, "--expect", "cpu", "--strict", "--out", str(tmp_path / "a"))
    assert ok.returncode == 0, ok.stderr
    assert "not met" in ok.stdout and "0 not met" in ok.stdout

    wrong = tmp_path / "wrong.toml"
    text = (files("attnprof") / "expectations" / "cpu.toml").read_text()
    wrong.write_text(text.replace("cpu_ops_per_forward = 36", "cpu_ops_per_forward = 30", 1))
    bad = attnprof("run", *common, "--expect", str(wrong), "--strict", "--out", str(tmp_path / "b"))
    assert bad.returncode == 3, bad.stderr
    assert "1 not met" in bad.stdout
    assert (tmp_path / "b" / "run.json").exists()  # the run itself is kept


def test_tensorboard_layout_is_written_and_analyze_reads_it_as_a_folder(tmp_path: Path) -> None:
    tb = tmp_path / "tb"
    common = ["-b", "1", "-H", "2", "-s", "32", "-d", "8", "--time-budget", "0.05"]
    p = attnprof(
        "run",
        "-v",
        "naive",
        "-v",
        "sdpa-math",
        *common,
        "--out",
        str(tmp_path / "r1"),
        "--tensorboard",
        str(tb),
    )
    assert p.returncode == 0, p.stderr
    files = sorted((tb / "r1").iterdir())
    assert len(files) == 2 and all(
        re.fullmatch(r".+_(naive|sdpa-math)_\w+\.\d+\.pt\.trace\.json\.gz", f.name) for f in files
    )
    record = json.loads((tmp_path / "r1" / "run.json").read_text())
    assert [r["status"] for r in record["results"]] == ["ok", "ok"]
    # the run directory keeps its own, and the lean pass's beside each (not in the tensorboard layout)
    assert len(list((tmp_path / "r1" / "traces").glob("*_eager.json.gz"))) == 2
    assert len(list((tmp_path / "r1" / "traces").glob("*_eager.lean.json.gz"))) == 2
    a = attnprof("analyze", "--json", str(tb))
    assert a.returncode == 0, a.stderr
    (run,) = json.loads(a.stdout)["runs"]
    assert sorted(r["rank"] for r in run["cross_rank"]["ranks"]) == sorted(
        f.name.split(".")[0] for f in files
    )
    assert all(t["totals"]["cpu_ops"] > 0 for t in run["traces"])
    bad = attnprof(
        "run", "-v", "naive", *common, "--no-profile", "--out", str(tmp_path / "r2"), "--tensorboard", str(tb)
    )
    assert bad.returncode == 2 and "--no-profile" in bad.stderr
