"""A reader that stops early (`attnprof ... | head -1`) is no error: exit 0, nothing on stderr.

Real pipes: the shell closes the read end after one line while attnprof still writes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tests._paths import REPO, trace

BERT = "AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert-small-uncased"


def _piped(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    cmd = " ".join([sys.executable, "-m", "attnprof", *args]) + " | head -1 >/dev/null; exit ${PIPESTATUS[0]}"
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_analyze_into_a_closed_pipe_exits_0(extra: list[str]) -> None:
    done = _piped(["analyze", str(trace(BERT)), *extra])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_list_into_a_closed_pipe_exits_0() -> None:
    done = _piped(["list"])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "{t}"],
        ["compare", "{t}", "--json"],
        ["report", "{t}", "--format", "md"],
        ["env"],
        ["--help"],
    ],
    ids=["compare", "compare-json", "report-md", "env", "help"],
)
def test_every_printing_command_into_a_closed_pipe_exits_0(args: list[str]) -> None:
    # the closed pipe is handled once, in cli.main, for every command: these print many lines
    done = _piped([a.format(t=trace(BERT)) for a in args])
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
