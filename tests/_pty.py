"""Run `python -m attnprof` on a pseudo-terminal: rich sees a tty, as on a user's screen."""

from __future__ import annotations

import os
import pty
import subprocess
import sys


def on_pty(args: list[str], *, no_color: str | None) -> tuple[int, bytes]:
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
