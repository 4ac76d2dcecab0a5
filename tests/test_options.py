"""Options a user can get wrong, each answered in one line naming the option of the command that
was used; and the Markdown report copying nothing from a trace or a path that a renderer runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ATTNPROF = [sys.executable, "-m", "attnprof"]


def attnprof(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ATTNPROF, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    assert lines[0].startswith("attnprof: error: "), lines[0]
    return lines[0]


def _trace(folder: Path, name: str, ops: list[str]) -> Path:
    """A small CPU trace: one attn_fwd range over `ops`."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "attn_fwd", "pid": 1, "tid": 1, "ts": 0, "dur": 100}
    ]
    for i, op in enumerate(ops):
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 10 + 20 * i,
                       "dur": 15, "args": {"External id": i + 1}})  # fmt: skip
    path = folder / name
    path.write_text(json.dumps({"traceEvents": events, "schemaVersion": 1}))
    return path


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    return _trace(tmp_path, "plain_trace.json", ["aten::bmm", "aten::softmax", "aten::bmm"])


def test_a_bad_shape_names_shape_not_a_flag_the_command_lacks(small_trace: Path, tmp_path: Path) -> None:
    line = one_error_line(attnprof("analyze", str(small_trace), "--shape", "0,0,0,0"))
    assert "--shape" in line and "-b/--batch" not in line, line
    line = one_error_line(attnprof("run", "-v", "naive", "--shape", "1,0,8,8", "-o", str(tmp_path / "r")))
    assert "--shape '1,0,8,8': H must be a positive integer" in line, line


def test_lang_translates_the_terminal_view_and_is_refused_with_json(small_trace: Path) -> None:
    th = attnprof("analyze", str(small_trace), "--lang", "th")
    assert th.returncode == 0 and "ข้อค้นพบ" in th.stdout and "Findings" not in th.stdout, th.stdout
    line = one_error_line(attnprof("analyze", str(small_trace), "--lang", "th", "--json"))
    assert "--lang" in line and "--json" in line, line


def test_a_variant_file_without_its_function_says_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text("def attn(q, k, v, is_causal=True, scale=None):\n    return q\n")
    line = one_error_line(attnprof("run", "-v", "mine.py", "-o", str(tmp_path / "r"), cwd=tmp_path))
    assert "mine.py:FUNCTION" in line or "mine.py:my_attention" in line, line
    assert "choose from" not in line  # not the list of built-ins


@pytest.mark.parametrize(
    "args",
    [
        ["run", "-v", "naive", "--time-budget", "nan"],
        ["run", "-v", "naive", "--time-budget", "0"],
        ["sweep", "-s", "16", "--time-budget", "nan"],
        ["sweep", "-s", "16", "--timeout", "0"],
        ["sweep", "-s", "16", "--warmup", "-1"],
        ["sweep", "-s", "16", "--min-samples", "0"],
    ],
)
def test_times_and_counts_must_be_finite_and_positive(args: list[str], tmp_path: Path) -> None:
    flag = next(a for a in args if a.startswith("--"))
    line = one_error_line(attnprof(*args, "--store" if args[0] == "sweep" else "-o", str(tmp_path / "x")))
    assert f"{flag} must be a positive number" in line, line
    assert not (tmp_path / "x").exists()


# -- Markdown ---------------------------------------------------------------------------------------

EVIL_OP = "<img src=x onerror=alert(1)>"


def test_markdown_copies_no_html_or_links_from_trace_and_file_names(tmp_path: Path) -> None:
    # the file name and one op carry HTML and a Markdown link
    path = _trace(
        tmp_path, "x<script>alert(1)[y](javascript:z).json", ["aten::bmm", EVIL_OP, "aten::softmax"]
    )
    p = attnprof("report", str(path), "--format", "md")
    assert p.returncode == 0, p.stderr
    md = p.stdout
    assert "<script" not in md and "<img" not in md
    assert "[y](javascript" not in md  # no link made of the name
    assert "x&lt;script&gt;alert(1)" in md  # the name is shown, escaped


def test_markdown_keeps_plain_names_as_they_are(small_trace: Path) -> None:
    p = attnprof("report", str(small_trace), "--format", "md")
    assert p.returncode == 0, p.stderr
    assert "| plain_trace |" in p.stdout  # nothing escaped where there is nothing to escape
    assert "&amp;" not in p.stdout and "&lt;" not in p.stdout


# command -> (its option's canonical long name, the hidden aliases it still accepts, the parameter)
_ALIASES = {
    "run": [("--out", ["--output"], "out"), ("--variants", ["--variant"], "variants")],
    "model": [("--out", ["--output"], "out"), ("--variants", ["--attn"], "attn")],
    "report": [("--output", ["--out"], "output")],
    "results": [("--output", ["--out"], "output"), ("--variants", ["--variant"], "variant")],
    "bundle": [("--output", ["--out"], "output")],
    "sweep": [("--variants", ["--variant"], "variants")],
}


@pytest.mark.parametrize("command", sorted(_ALIASES))
def test_help_lists_one_name_per_option_names_the_other_spellings_and_they_still_work(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer

    from attnprof.cli import _register, app, main

    monkeypatch.setenv("COLUMNS", "500")  # one line per option: the note is not wrapped apart
    assert main([command, "--help"]) == 0
    text = capsys.readouterr().out
    # the option column holds the listed names; the help column, after them, the other spellings
    words = set(text.replace(",", " ").split())
    _register([command])
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    for canonical, aliases, param in _ALIASES[command]:
        assert canonical in words, text
        assert "-o" in words or not canonical.startswith("--out"), text  # the short name, listed
        row = next(line for line in text.splitlines() if f" {canonical} " in line)
        assert row.rstrip(" │").endswith(f"Also: {', '.join(aliases)}."), row  # named in the help text
        for alias in aliases:
            # once, in the note: not as an option name
            assert len(re.findall(rf"{alias}(?![\w-])", row)) == 1, (alias, row)
            # parsed only (resilient: the command's required arguments may be left out)
            ctx = cmd.make_context(command, [alias, "x"], resilient_parsing=True)
            value = ctx.params[param]
            got = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
            assert got == ["x"], (alias, value)  # still accepted, for the same option


def test_results_filters_take_the_shape_and_variant_spellings_of_run_and_sweep(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    p = attnprof(
        "sweep", "--store", str(store), "-s", "16,32", "-H", "1", "-d", "8", "-v", "naive-inplace,sdpa-math",
        "--device", "cpu", "--no-progress", "--no-profile", "--time-budget", "0.02", "--min-samples", "3",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = tmp_path / "r.csv"
    p = attnprof("results", "--store", str(store), "-f", "csv", "-s", "16", "-H", "1", "-d", "8", "-b", "1",
                 "-v", "sdpa-math", "--out", str(out))  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == 1 and "sdpa-math" in rows[0]


def test_sweep_takes_runs_boolean_spellings() -> None:
    p = attnprof("sweep", "--print-config", "--no-causal", "--no-backward", "-s", "16", "-v", "naive")
    assert p.returncode == 0, p.stderr
    assert "causal = [false]" in p.stdout and "backward = [false]" in p.stdout
    p = attnprof("sweep", "--print-config", "-s", "16", "-v", "naive")
    assert "causal = [true]" in p.stdout  # without it: the default
    line = one_error_line(attnprof("sweep", "--print-config", "--no-causal", "--causal", "both", "-s", "16"))
    assert "contradict" in line, line


def test_model_defaults_are_the_librarys(capsys: pytest.CaptureFixture[str]) -> None:
    """`attnprof model` given no options runs what run_model(model, ModelOptions()) runs (one
    home for the defaults), and its --help states the library's values."""
    import typer

    from attnprof.cli import _register, app, main
    from attnprof.cli.model import model_options
    from attnprof.models.options import ModelOptions

    _register(["model"])
    cmd = typer.main.get_command(app).commands["model"]  # type: ignore[attr-defined]
    given = cmd.make_context("model", ["gpt2"]).params  # the command line's defaults
    keys = ("attn", "phase", "backward", "size", "batch", "seq", "dtype", "seed", "steps", "budget")
    opts = model_options(device="cpu", **{k: given[k] for k in keys})
    assert opts == ModelOptions(device="cpu")
    # and what --help says the defaults are
    assert main(["model", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    lib = ModelOptions()
    assert f"(default {lib.time_budget_s:g})" in text and f"(default {lib.seed})" in text, text
    assert "(default " + ",".join(map(str, lib.steps)) + ")" in text and f"{lib.phase} (the whole" in text
