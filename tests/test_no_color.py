"""NO_COLOR (https://no-color.org) and --no-color leave no escape sequence on a real terminal.

Each command runs in a pseudo-terminal, so rich sees a tty and would colour; the colour-on case
is checked too, so that these tests fail when the terminal is not seen as one."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest
from tests._paths import trace

ESC = b"\x1b["
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pty is POSIX only")


def _on_pty(args: list[str], *, no_color: str | None) -> tuple[int, bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    env.update(TERM="xterm-256color", COLUMNS="160")
    if no_color is not None:
        env["NO_COLOR"] = no_color
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnprof", *args], stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return proc.wait(timeout=300), out


def _analyze() -> list[str]:
    return ["analyze", str(trace("AMD-AGI__TraceLens__tests__traces__h100__gaunernst_bert"))]


@pytest.mark.parametrize("args", [["list"], ["list", "--help"], _analyze()], ids=["list", "help", "analyze"])
def test_no_color_env_writes_no_escape(args: list[str]) -> None:
    rc, out = _on_pty(args, no_color="1")
    assert rc == 0, out[-500:]
    assert ESC not in out


@pytest.mark.parametrize("args", [["list"], _analyze()], ids=["list", "analyze"])
def test_no_color_flag_writes_no_escape(args: list[str]) -> None:
    rc, out = _on_pty([*args, "--no-color"], no_color=None)
    assert rc == 0, out[-500:]
    assert ESC not in out


def test_no_color_empty_value_keeps_colour() -> None:
    # no-color.org: only a non-empty value turns colour off
    rc, out = _on_pty(["list"], no_color="")
    assert rc == 0
    assert ESC in out


@pytest.mark.parametrize("args", [["list"], _analyze()], ids=["list", "analyze"])
def test_terminal_gets_colour_without_either(args: list[str]) -> None:
    rc, out = _on_pty(args, no_color=None)
    assert rc == 0, out[-500:]
    assert ESC in out
