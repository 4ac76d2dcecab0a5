"""Shared pytest setup: a session without the shared traces beside the repository stops at once
with one line saying where it looked; GPU-only tests skip themselves on machines without CUDA;
the session ends with its peak memory (the suite must pass on an 8 GB laptop: under 4 GiB peak RSS)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

# the folder analysis keeps per-trace summaries between runs (attnprof.analysis.ranks.rank_cache): off
# for the suite, so that a test that analyses a folder twice analyses it twice, and nothing is
# written to the home directory; tests/test_rank_cache.py turns it on in a temporary directory
os.environ.setdefault("ATTNPROF_CACHE", "off")

# A suite started in the background by a shell without job control (`cmd &`, nohup, some CI
# runners) inherits SIGINT ignored, and an ignored signal stays ignored across exec: every child
# Python then ignores the Ctrl-C that the interrupt tests send it and exits 0. A handled signal
# is reset to the default at exec, so handling it here gives each child Python its
# KeyboardInterrupt back, wherever the suite was started from.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@functools.cache
def _has_cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def shared_missing() -> str | None:
    """Why the shared traces cannot be read, as the one line a session without them ends with;
    None where they are there. They live beside the repository (tests/_paths.py), never in it."""
    from _paths import REPO, TRACES

    if TRACES.is_dir() and any(TRACES.glob("*.json.gz")):
        return None
    return (
        f"attnprof's tests need the shared traces, looked for in {TRACES} (../shared/traces beside "
        f"the repository {REPO}), and found none: put the project's "
        "shared/ folder (traces/, checks/) beside the repository, or clone the repository next to it"
    )


def pytest_configure(config: pytest.Config) -> None:
    # one clear line and exit 4 (a usage error) before anything is collected: without this, the
    # modules that list shared traces collect nothing (their tests silently skip as "empty
    # parameter set") and the per-trace tests fail one by one
    why = shared_missing()
    if why is not None:
        raise pytest.UsageError(why)


# The fast tier (`python -m pytest -q -m "not slow"`, README: about 2 minutes on a quiet 2-core
# machine) keeps the analysis, reports and CLI on traces and leaves out what runs attention for
# real at length: whole modules of live runs, sweeps, models, Ray, child processes, fuzzers and a
# browser, and every test that needs one of the session or module fixtures below, each of which
# runs attnprof before its first test. Marked here, by module and fixture, so a new test in such a
# module or on such a fixture is slow without anyone remembering to say so.
SLOW_MODULES = frozenset(
    {
        "test_sweep",
        "test_model",
        "test_user_edges",
        "test_ray",
        "test_ray_folder",
        "test_slow_calls",
        "test_cli_run",
        "test_backward",
        "test_peaks",
        "test_decode",
        "test_masks",
        "test_option_routes",
        # a second or more a test: child processes, fuzzers, interrupts, a browser, full disks
        "test_statuses",
        "test_outputs",
        "test_run_isolation",
        "test_table_widths",
        "test_loader_fuzz",
        "test_correctness_gate",
        "test_harness",
        "test_process_state",
        "test_load_progress",
        "test_browser",
        "test_compile_limit",
        "test_memory_honesty",
        "test_cuda_paths",
        "test_statistics",
        "test_extras",
        "test_options",
        "test_store",
        "test_shared_missing",
        "test_non_finite",
        "test_env_command",
        "test_requests",
        "test_closed_pipe",
        "test_no_color",
    }
)
# single tests of 3 s or more: the largest shared traces decoded several ways, a search per
# launch, the CLI over a vLLM folder, plotted reports, a report or folder view in each language
SLOW_TESTS = frozenset(
    {
        "test_streamed_parallel_and_whole_file_loads_are_identical",
        "test_containing_finds_what_a_search_per_launch_finds",
        "test_cli_reads_vllm_folder_and_capture_option",
        "test_gpu_run_report_draws_gpu_plots",
        "test_scaling_curves_when_a_folder_holds_several_shapes",
        "test_a_folder_s_terminal_view_speaks_the_readers_language",
        "test_trace_report_has_the_per_shape_table_and_roofline_in_each_language",
        # the command as a child process on a 19 MB and a 92 MB trace
        "test_the_command_gives_the_analysis_of_one_process",
        "test_no_forked_process_outlives_a_command_that_never_loads",
    }
)
SLOW_FIXTURES = frozenset(
    {
        "cpu_run",
        "cpu_store",
        "kinds_store",
        "live",
        "bf16_run",
        "two_shapes",
        "swept",
        "small_run",
        "busy_cores",
        "grown",  # the loop audit over every shared trace, 1x and 3x (test_loop_scaling)
    }
)


def _is_slow(item: pytest.Item) -> bool:
    module = item.path.stem if hasattr(item, "path") else ""
    fixtures = set(getattr(item, "fixturenames", ()))
    name = getattr(item, "originalname", item.name)
    return module in SLOW_MODULES or name in SLOW_TESTS or bool(fixtures & SLOW_FIXTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; this machine has none")
    for item in items:
        if "gpu" in item.keywords and not _has_cuda():
            item.add_marker(skip_gpu)
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """One real run of every CPU-available variant at a tiny shape (B1 H2 S64 D16, fp32),
    shared by the tests that read its run.json, traces and tables."""
    from attnprof.harness.run import RunOptions, run
    from attnprof.workload import Workload

    out = tmp_path_factory.mktemp("run") / "r"
    record = run(
        Workload(batch=1, heads=2, seq=64, head_dim=16),
        out=out,
        # 6 rounds at least: the fewest a 95% interval of a ratio needs (compare/rank.py)
        options=RunOptions(time_budget_s=0.05, min_samples=6),
    )
    return out, record


@pytest.fixture(scope="session")
def cpu_store(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A small real CPU sweep into a results store: S 32, 64, 128 at head_dim 16 and 32 (two
    panels of scaling curves), naive-inplace and sdpa-flash, and sdpa-efficient, which CPU
    cannot run (a standard harness reason)."""
    from attnprof.sweep import GridSpec, RunSettings, SweepConfig, SweepSettings, run_sweep

    store = tmp_path_factory.mktemp("store") / "attnprof-results.db"
    cfg = SweepConfig(
        grid=GridSpec(device="cpu", heads=[2], seq=[32, 64, 128], head_dim=[16, 32], dtype=["fp32"],
                      variants=["naive-inplace", "sdpa-flash", "sdpa-efficient"]),
        run=RunSettings(profile=False, time_budget_s=0.03, min_samples=3, warmup_calls=2),
        sweep=SweepSettings(store=str(store)),
    )  # fmt: skip
    summary = run_sweep(cfg)
    assert summary.counts == {"ok": 12, "unsupported": 6}
    return store


# Every Python subprocess of the session reports its own peak RSS at exit (tests/_rss/
# sitecustomize.py, loaded through PYTHONPATH) into this folder; children forked without an
# exec (multiprocessing) are not measured, and are not claimed to be.
_RSS_DIR = tempfile.mkdtemp(prefix="attnprof-rss-")
os.environ["ATTNPROF_RSS_DIR"] = _RSS_DIR
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(Path(__file__).parent / "_rss"), os.environ.get("PYTHONPATH", "")) if p
)


def _peak_rss_mib() -> tuple[float, float]:
    """Peak RSS of this pytest process and of the largest Python subprocess, as each measured
    its own (VmHWM at its exit), in MiB. Not RUSAGE_CHILDREN: a child's ru_maxrss starts at the
    RSS of the pytest it was forked from, so it said pytest's size, not the child's."""
    unit = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit / 2**20
    peaks = []
    for f in Path(_RSS_DIR).iterdir():
        with contextlib.suppress(OSError, ValueError):
            peaks.append(int(f.read_text()) / 1024)
    return own, max(peaks, default=0.0)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    own, child = _peak_rss_mib()
    terminalreporter.write_line(f"peak RSS: pytest {own:.0f} MiB, largest subprocess {child:.0f} MiB")
    path = os.environ.get("ATTNPROF_PEAK_RSS_FILE")
    if path:  # .ci/run reads it and fails the build above its limit
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"pytest_mib": round(own, 1), "largest_subprocess_mib": round(child, 1)}, fh)
    shutil.rmtree(_RSS_DIR, ignore_errors=True)
