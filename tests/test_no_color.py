"""NO_COLOR (https://no-color.org) and --no-color leave no escape sequence on a real terminal.

Each command runs in a pseudo-terminal, so rich sees a tty and would colour; the colour-on case
is checked too, so that these tests fail when the terminal is not seen as one."""

from __future__ import annotations

import sys

import pytest

from _paths import trace
from _pty import on_pty

ESC = b"\x1b["
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pty is POSIX only")


BERT = "AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert"


def _analyze() -> list[str]:
    """`analyze` of a shared trace, named by its prefix: the path is looked up in the test, so
    collecting this module never reads ../shared (tests/conftest.py checks it is there)."""
    return ["analyze", BERT]


def _resolved(args: list[str]) -> list[str]:
    return [str(trace(a)) if a == BERT else a for a in args]


@pytest.mark.parametrize("args", [["list"], ["list", "--help"], _analyze()], ids=["list", "help", "analyze"])
def test_no_color_env_writes_no_escape(args: list[str]) -> None:
    rc, out = on_pty(_resolved(args), no_color="1")
    assert rc == 0, out[-500:]
    assert ESC not in out


@pytest.mark.parametrize("args", [["list"], _analyze()], ids=["list", "analyze"])
def test_no_color_flag_writes_no_escape(args: list[str]) -> None:
    rc, out = on_pty([*_resolved(args), "--no-color"], no_color=None)
    assert rc == 0, out[-500:]
    assert ESC not in out


def test_no_color_empty_value_keeps_colour() -> None:
    # no-color.org: only a non-empty value turns colour off
    rc, out = on_pty(["list"], no_color="")
    assert rc == 0
    assert ESC in out


@pytest.mark.parametrize("args", [["list"], _analyze()], ids=["list", "analyze"])
def test_terminal_gets_colour_without_either(args: list[str]) -> None:
    rc, out = on_pty(_resolved(args), no_color=None)
    assert rc == 0, out[-500:]
    assert ESC in out
