"""`attnprof analyze` as a user runs it: a real subprocess, exit codes, JSON, width, speed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _live import record
from _paths import TRACES, trace

H100 = "AMD-AGI__TraceLens__tests__traces__h100"
TRITON = "facebookresearch__HolisticTraceAnalysis__tests__data__triton_example"
ATTNPROF = [sys.executable, "-c", "from attnprof.cli import main; main()"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # a wide terminal must still get <= 100 columns
    return subprocess.run([*ATTNPROF, "analyze", *args], capture_output=True, text=True, timeout=120, env=env)


def test_json_for_one_trace_is_one_object_with_the_contract() -> None:
    p = _run("--json", str(trace(H100)))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["schema"] == "attnprof.analysis/1"
    assert set(d) >= {"schema", "source", "device", "totals", "categories", "kernels", "regions", "findings"}
    assert set(d["totals"]) >= {"kernels", "kernel_time_us", "memcpy", "memset", "cpu_ops"}
    assert {c["category"]: c["count"] for c in d["categories"]}["attention"] == 4
    assert len(d["kernels"]) <= 20


def test_json_for_several_traces_is_an_array_in_order() -> None:
    paths = [str(trace(H100)), str(trace(TRITON))]
    p = _run("--json", "--top", "3", *paths)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [d["source"] for d in out] == [Path(x).name for x in paths]
    assert all(len(d["kernels"]) <= 3 for d in out)


def test_terminal_output_fits_100_columns_and_names_the_findings() -> None:
    p = _run(str(trace(H100)))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    text = p.stdout
    for word in (
        "NVIDIA H100",
        "Top kernels",
        "attention",
        "PyTorch flash",
        "ProfilerStep",
        "FUSED_ATTENTION",
    ):
        assert word in text
    # the attention share is the first thing after the file name
    assert lines[1].startswith("device time") and "attention 12%" in lines[1]


def test_a_cpu_only_trace_is_not_described_as_an_idle_device(tmp_path: Path) -> None:
    """No device in the trace: no "device idle 100%" and no columns of GPU zeros; a GPU trace
    keeps both."""
    p = _run(str(record("naive-inplace", tmp_path, dtype="fp32")))
    assert p.returncode == 0, p.stderr
    assert "CPU only" in p.stdout and "cpu ops" in p.stdout
    assert "device idle" not in p.stdout and "gpu busy" not in p.stdout
    g = _run(str(trace(H100)))
    assert "device idle" in g.stdout and "gpu busy" in g.stdout and "gpu kernel sum" in g.stdout


def test_threads_option_and_its_bad_value() -> None:
    path = str(
        TRACES / "facebookresearch__HolisticTraceAnalysis__tests__data__call_stack__backward_thread.json"
    )
    p = _run(path, "--region", "## backward ##", "--threads", "all", "--json")
    assert p.returncode == 0, p.stderr
    region = json.loads(p.stdout)["regions"][0]
    assert region["threads"] == "all" and region["gpu_ops_per_instance"] == 1
    bad = _run(path, "--threads", "some")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--threads" in bad.stderr


def test_no_color_leaves_out_the_colours() -> None:
    env = {**os.environ, "FORCE_COLOR": "1"}  # colours even on a pipe, unless --no-color
    runs = [
        subprocess.run(
            [*ATTNPROF, "analyze", *flags, str(trace(H100))],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        for flags in ([], ["--no-color"])
    ]
    assert all(p.returncode == 0 for p in runs), [p.stderr for p in runs]
    colour = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-8]|9[0-7])(?:;[0-9]+)*m")  # a foreground colour
    coloured, plain = (p.stdout for p in runs)
    assert colour.search(coloured)
    # no escape sequence at all: bold and dim go with the colours (tests/test_no_color.py)
    assert not colour.search(plain) and "\x1b[" not in plain


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty"),
        (b"{not json", "json"),
        (b'{"traceEvents": [{"ph": "X"', "truncated"),
        (b'{"a": 1}', "traceevents"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_file(tmp_path: Path, content: bytes, words: str) -> None:
    f = tmp_path / "bad.json"
    f.write_bytes(content)
    p = _run(str(f))
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert str(f) in lines[0] and words in lines[0].lower()


def test_missing_file_unknown_region_and_dtype_without_shape_exit_2(tmp_path: Path) -> None:
    assert _run(str(tmp_path / "none.json")).returncode == 2
    p = _run("--region", "nope_region", str(trace(TRITON)))
    assert p.returncode == 2 and "nope_region" in p.stderr
    p = _run("--dtype", "bf16", str(trace(TRITON)))
    assert p.returncode == 2 and "--shape" in p.stderr
    p = _run("--shape", "1,2,3", str(trace(TRITON)))
    assert p.returncode == 2


def test_shape_gives_a_roofline_and_region_selects(tmp_path: Path) -> None:
    path = record("naive", tmp_path)
    p = _run("--json", "--shape", "1,2,64,16", "--dtype", "bf16", "--region", "attn_fwd", str(path))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["regions"][0]["name"] == "attn_fwd"
    assert d["roofline"]["flops_useful"] > 0
    assert "OUT_OF_PLACE_COPY" in [f["code"] for f in d["findings"]]


def _modules_after(*args: str) -> set[str]:
    """The modules loaded once `attnprof ARGS` has run in a fresh interpreter (its stdout kept)."""
    code = (
        "import io, sys; from attnprof.cli import main; "
        "sys.stdout = io.TextIOWrapper(io.BytesIO()); "
        f"rc = main({list(args)!r}); "
        "sys.stdout = sys.__stdout__; "
        "print('RC', rc); print('\\n'.join(sorted(sys.modules)))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "RC 0", p.stdout[-500:]
    return set(lines[1:])


def test_small_trace_answers_without_importing_torch() -> None:
    # How fast it answers is a benchmark's business (benchmarks/); a test asserts what makes it
    # fast: analyze never imports torch or pandas.
    tops = {m.split(".")[0] for m in _modules_after("analyze", str(trace(TRITON)))}
    assert not tops & {"torch", "pandas"}


@pytest.mark.parametrize("as_json", [True, False])
def test_one_trace_imports_only_what_analyze_needs(as_json: bool) -> None:
    # What a one-trace analyze imports is most of its time on a small trace. Pinned: no pydantic
    # (typer < 0.29 parses options without it), no rank/folder code for a file, no report/HTML
    # machinery, and no terminal rendering (rich) with --json.
    modules = _modules_after("analyze", *(["--json"] if as_json else []), str(trace(TRITON)))
    tops = {m.split(".")[0] for m in modules}
    heavy = {"torch", "pandas", "matplotlib", "pydantic", "pydantic_core", "jinja2", "babel", "psutil"}
    assert not tops & heavy, sorted(tops & heavy)
    not_needed = (
        "attnprof.analysis.ranks.folder",
        "attnprof.report.html",
        "attnprof.compare",
        "attnprof.harness",
        "attnprof.sweep",
        "attnprof.variants",
        "attnprof.report.plots",
    )
    assert not {m for m in modules if m.startswith(not_needed)}
    # numpy.ma (np.unique without return_*, np.median) and importlib.resources' readers with
    # zipfile (the catalog read through resources): a tenth of a small trace's analysis each
    assert not {
        m
        for m in modules
        if m == "numpy.ma" or m.startswith(("numpy.ma.", "importlib.readers", "importlib.resources"))
    }
    assert "zipfile" not in tops
    assert ("rich" in tops) is not as_json
    assert "numpy" in tops  # the analysis itself: columns (a check that the probe sees imports at all)


def test_a_trace_with_every_stage_at_work_does_not_import_numpy_ma() -> None:
    # the triton trace above has no CPU ops to speak of; this one runs the region, CPU-evidence,
    # chain and cost code on thousands (a plain np.unique there cost 20 ms of numpy.ma import)
    modules = _modules_after("analyze", "--json", str(trace("harryjmoss__particle_transformer")))
    assert not {m for m in modules if m == "numpy.ma" or m.startswith("numpy.ma.")}


def test_the_short_exit_keeps_the_output_exit_code_and_atexit_functions(tmp_path: Path) -> None:
    # analyze leaves without tearing the interpreter down (os._exit): all it wrote, its exit
    # code and what atexit was asked to do must survive that
    code = (
        "import atexit, sys; atexit.register(lambda: sys.stdout.write('ATEXIT\\n')); "
        "from attnprof.cli import main; main()"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "analyze", "--json", str(trace(TRITON))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    body, last = p.stdout.rstrip("\n").rsplit("\n", 1)
    assert last == "ATEXIT" and json.loads(body)["schema"] == "attnprof.analysis/1"
    bad = subprocess.run(
        [sys.executable, "-c", code, "analyze", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and bad.stdout == "ATEXIT\n", (bad.returncode, bad.stdout, bad.stderr)


def test_every_shared_trace_through_the_cli() -> None:
    paths = sorted(str(p) for p in TRACES.glob("*.json.gz"))
    p = _run("--json", *paths)
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)) == len(paths)


def test_hostile_inputs_get_one_line_and_exit_2_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 0, "dur": 1}] * 1000}))
    cases = [
        (["/dev/zero"], "character device"),
        ([str(fifo)], "fifo"),
        ([str(deep)], "nested deeper"),
        (["--max-memory", "1e-12", str(big)], "--max-memory"),
    ]
    for args, words in cases:
        p = subprocess.run([*ATTNPROF, "analyze", *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0].lower() and "Traceback" not in p.stderr, (args, p.stderr)
    ok = subprocess.run(
        [*ATTNPROF, "analyze", "--json", "--max-memory", "0", str(big)], capture_output=True, timeout=60
    )
    assert ok.returncode == 0, ok.stderr
