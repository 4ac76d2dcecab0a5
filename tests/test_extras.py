"""The plain install: analyze, compare and report of traces with no torch, pandas or matplotlib,
and a one-line install hint (exit 2) from a command whose extra is missing.

Each command runs as a real subprocess through tests/_no_extras.py, which hides the three packages
from the import system the way a venv without them does, and writes which of them were looked
up and which got loaded. .ci/run also installs the package into a venv that truly lacks them.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _paths import trace
from attnprof.cli import main
from attnprof.errors import MissingExtra
from attnprof.extras import EXTRAS, available, load, missing_extra, require

NO_EXTRAS = Path(__file__).with_name("_no_extras.py")
A100_UNFUSED = "harryjmoss__particle_transformer"
H100_FLASH = "AMD-AGI__TraceLens__tests__traces__h100"
PLOTS_MISSING = (
    "Plots are not drawn: matplotlib is not installed; pip install &#39;attnprof[plots]&#39; adds them."
)
_n = itertools.count()


def _without_extras(
    tmp_path: Path, *args: str, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    imports = tmp_path / f"imports-{next(_n)}.json"
    p = subprocess.run(
        [sys.executable, str(NO_EXTRAS), str(imports), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    return p, json.loads(imports.read_text())


def _with_everything(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attnprof", *args], capture_output=True, text=True, timeout=300
    )


def test_analyze_never_looks_for_torch_pandas_or_matplotlib(tmp_path: Path) -> None:
    p, imports = _without_extras(tmp_path, "analyze", "--json", str(trace(H100_FLASH)))
    assert p.returncode == 0, p.stderr
    assert imports == {"attempted": [], "loaded": []}
    # the same analysis, byte for byte, as with every optional package installed
    full = _with_everything("analyze", "--json", str(trace(H100_FLASH)))
    assert full.returncode == 0, full.stderr
    assert p.stdout == full.stdout
    assert json.loads(p.stdout)["schema"] == "attnprof.analysis/1"


def test_compare_of_two_traces_without_extras(tmp_path: Path) -> None:
    paths = [str(trace(A100_UNFUSED)), str(trace(H100_FLASH))]
    p, imports = _without_extras(tmp_path, "compare", "--diff", "--no-color", *paths)
    assert p.returncode == 0, p.stderr
    assert imports == {"attempted": [], "loaded": []}
    assert "Per forward, from the trace" in p.stdout  # the labels themselves wrap with the width
    js, imports = _without_extras(tmp_path, "compare", "--diff", "--json", *paths)
    assert js.returncode == 0, js.stderr
    assert imports == {"attempted": [], "loaded": []}
    full = _with_everything("compare", "--diff", "--json", *paths)
    assert js.stdout == full.stdout
    d = json.loads(js.stdout)
    assert [r["kind"] for r in d["rows"]] == ["trace", "trace"]
    assert d["diffs"], "two traces give one kernel diff"


def test_report_of_a_trace_without_extras_says_why_there_are_no_plots(tmp_path: Path) -> None:
    out = tmp_path / "trace.html"
    p, imports = _without_extras(tmp_path, "report", str(trace(H100_FLASH)), "-o", str(out))
    assert p.returncode == 0, p.stderr
    # matplotlib is looked up (to say it is missing), never loaded; torch and pandas not even looked up
    assert imports == {"attempted": ["matplotlib"], "loaded": []}
    html = out.read_text()
    assert PLOTS_MISSING in html
    assert "<svg" not in html
    assert "gaunernst_bert-small-uncased" in html
    md, imports = _without_extras(tmp_path, "report", str(trace(H100_FLASH)), "--format", "md", "-o", "-")
    assert md.returncode == 0, md.stderr
    assert imports == {"attempted": [], "loaded": []}  # Markdown has no plots to look for
    assert md.stdout.startswith("# attnprof report: AMD-AGI__TraceLens__tests__traces__h100")


def test_report_of_a_run_directory_made_elsewhere_without_extras(
    cpu_run: tuple[Path, object], tmp_path: Path
) -> None:
    out = tmp_path / "run.html"
    p, imports = _without_extras(tmp_path, "report", str(cpu_run[0]), "--lang", "id", "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert imports["loaded"] == []
    assert set(imports["attempted"]) <= {"matplotlib"}
    html = out.read_text()
    assert "matplotlib tidak terpasang" in html and "attnprof[plots]" in html
    assert "<svg" not in html


def test_a_store_and_a_bundle_made_elsewhere_without_extras(
    cpu_store: Path, cpu_run: tuple[Path, object], tmp_path: Path
) -> None:
    """What the README says the plain install gives beyond traces: reading a sweep's store and
    packing a run made on another machine."""
    for args in (["results", "--store", str(cpu_store)], ["recommend", "--store", str(cpu_store)]):
        p, imports = _without_extras(tmp_path, *args)
        assert p.returncode == 0, (args, p.stderr)
        assert imports == {"attempted": [], "loaded": []}, args
    out = tmp_path / "store.html"
    p, imports = _without_extras(tmp_path, "report", "--store", str(cpu_store), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert imports == {"attempted": ["matplotlib"], "loaded": []}
    assert PLOTS_MISSING in out.read_text()
    zipped = tmp_path / "run.zip"
    p, imports = _without_extras(tmp_path, "bundle", str(cpu_run[0]), "-o", str(zipped))
    assert p.returncode == 0, p.stderr
    assert imports["loaded"] == [] and zipped.is_file()


def test_the_report_draws_plots_when_matplotlib_is_there(
    cpu_run: tuple[Path, object], tmp_path: Path
) -> None:
    out = tmp_path / "run.html"
    assert main(["report", str(cpu_run[0]), "-o", str(out)]) == 0
    html = out.read_text()
    assert "<svg" in html
    assert "Plots are not drawn" not in html


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["run", "-s", "32"], "attnprof run needs the optional package 'torch': pip install 'attnprof[run]'"),
        (["list"], "attnprof list needs the optional package 'torch': pip install 'attnprof[run]'"),
        (
            ["sweep", "-s", "32"],
            "attnprof sweep needs the optional package 'torch': pip install 'attnprof[run]'",
        ),
        (
            ["model", "gpt2"],
            "attnprof model needs the optional package 'torch': pip install 'attnprof[models]'",
        ),
    ],
)
def test_a_command_without_its_extra_names_it_in_one_line(tmp_path: Path, args: list[str], line: str) -> None:
    p, imports = _without_extras(tmp_path, *args, cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr == f"attnprof: error: {line}\n"
    assert p.stdout == ""
    assert imports["loaded"] == []
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted(
        x.name for x in tmp_path.glob("imports-*.json")
    ), "nothing is written before the check"


def test_sweep_print_config_needs_no_torch(tmp_path: Path) -> None:
    p, imports = _without_extras(tmp_path, "sweep", "--print-config", "-s", "32,64", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    assert imports["loaded"] == []
    assert "S=64" in p.stdout


def test_dataframes_without_pandas_name_the_df_extra(tmp_path: Path) -> None:
    code = f"""
from attnprof.analysis import analyze
from attnprof.errors import MissingExtra
a = analyze({str(trace(H100_FLASH))!r})
assert a.kernels, "the analysis itself needs no pandas"
try:
    a.kernels_df()
except MissingExtra as exc:
    print(exc)
"""
    p, imports = _without_extras(tmp_path, "-c", code)
    assert p.returncode == 0, p.stderr
    assert p.stdout == (
        "TraceAnalysis.kernels_df() needs the optional package 'pandas': pip install 'attnprof[df]'\n"
    )
    assert imports == {"attempted": ["pandas"], "loaded": []}


def test_python_api_without_torch_names_the_run_extra(tmp_path: Path) -> None:
    code = """
from attnprof import Workload, list_variants, run
from attnprof.errors import MissingExtra
for f in (run, list_variants):
    try:
        f(Workload(batch=1, heads=1, seq=8, head_dim=8))
    except MissingExtra as exc:
        print(exc)
"""
    p, imports = _without_extras(tmp_path, "-c", code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "attnprof.run() needs the optional package 'torch': pip install 'attnprof[run]'",
        "attnprof.list_variants() needs the optional package 'torch': pip install 'attnprof[run]'",
    ]
    assert imports == {"attempted": ["torch"], "loaded": []}


def test_extras_table_matches_pyproject() -> None:
    """Every extra the hints name exists in pyproject.toml and installs the package named."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]

    def packages(extra: str) -> set[str]:
        out: set[str] = set()
        for req in extras[extra]:
            name = req.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip()
            if name == "attnprof":  # attnprof[run] inside another extra
                for inner in req.split("[")[1].split("]")[0].split(","):
                    out |= packages(inner.strip())
            else:
                out.add(name)
        return out

    for module, extra in EXTRAS.items():
        assert module in packages(extra), (module, extra)
    base = {d.split(";")[0].split(">")[0].split("<")[0].strip() for d in project["dependencies"]}
    assert not base & {"torch", "pandas", "matplotlib"}
    assert {"torch", "transformers"} <= packages("models")  # `attnprof model`'s hint names [models]


def test_require_and_load() -> None:
    require("numpy", "the analysis")  # installed: no error
    assert available("numpy") and not available("attnprof_no_such_package")
    with pytest.raises(MissingExtra, match=r"pip install 'attnprof\[run\]'$"):
        EXTRAS["attnprof_no_such_package"] = "run"
        try:
            load("attnprof_no_such_package", "x")
        finally:
            del EXTRAS["attnprof_no_such_package"]
    inner = ModuleNotFoundError("No module named 'torch.nn.nowhere'", name="torch.nn.nowhere")
    assert missing_extra(inner, "attnprof run") is None  # torch is there; a part of it is not
    top = missing_extra(ModuleNotFoundError("No module named 'torch'", name="torch"), "attnprof run")
    assert top is not None and top.exit_code == 2 and top.extra == "run"
