"""A user variant's trial run in a child process, before it runs beside the others.

`attnprof run` times its variants interleaved in one process (docs/architecture.md): one
sample of each per round, so a burst of background load hits all of them alike. A user's
variant (file.py:function, module:function) is code attnprof has never seen: an `os._exit`, a
segfault or a hang in it would end the whole run, losing the variants that had finished. So it
is first run alone in a child, through the same `run_variant` (build, warm-up, the profiled
steps, the accuracy check, a short clean timing), with `--timeout` on the child. Only a
variant whose trial ends normally then runs in the run's own process, where its figures come
from; one whose trial died is recorded as crashed (how it died) or timeout, and the rest go on.
One whose trial failed with a sticky CUDA error (harness/cuda.py: an illegal address, a
device-side assert) is recorded with that error and not run again here: in this process the
error would leave the CUDA context unusable, and every variant after it would fail with it.
A `sys.exit` is caught in-process too (variants/user.py turns it into an error at the call).

What the trial cannot promise: a variant that dies only on a later call than the trial made,
or only beside the others, can still end the run. The trial's own figures are not used.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from attnprof.harness.options import RunOptions
from attnprof.records import encode_json

if TYPE_CHECKING:
    from attnprof.variants.base import Variant
    from attnprof.workload import Workload

__all__ = ["DONE", "STICKY", "TrialFailure", "trial"]

# the trial's clean timing: enough calls to exercise the timer's path, not to measure anything
_TRIAL_BUDGET_S = 0.02
_TRIAL_SAMPLES = 3
DONE = "attnprof-trial-done"  # what the child prints once run_variant returned
# what it prints after DONE when the variant failed with a sticky CUDA error: then a JSON object
# of the result's status and reason
STICKY = "attnprof-trial-sticky: "


class TrialFailure(msgspec.Struct, kw_only=True):
    status: str  # "crashed" or "timeout"; "error" or "oom" after a sticky CUDA error
    reason: str


def _describe(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with code {code} (the variant ended the process: os._exit, or a crash)"


def _kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(OSError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _sticky(stdout: str) -> TrialFailure | None:
    """The trial's failure when the child reported a sticky CUDA error (STICKY), else None."""
    import json

    line = next((ln for ln in stdout.splitlines() if ln.startswith(STICKY)), None)
    if line is None:
        return None
    said = json.loads(line[len(STICKY) :])
    return TrialFailure(
        status=said["status"],
        reason=f"{said['reason']} (in its trial run in a separate process; not run again in this one, "
        "where the error would leave the CUDA context unusable for the variants after it)",
    )


def trial(workload: Workload, variant: Variant, opts: RunOptions) -> TrialFailure | None:
    """Run `variant` alone in a child process; None when it ended normally, else how it died."""
    from attnprof.records import variant_label

    spec = variant_label(variant.source, variant.mode) if variant.source else variant.label
    options = msgspec.structs.replace(
        opts,
        time_budget_s=_TRIAL_BUDGET_S,
        min_samples=_TRIAL_SAMPLES,
        warmup_s=0.0,
        tensorboard_dir=None,
        isolate_user=False,  # the child runs it in-process: the trial is this process's
    )
    with tempfile.TemporaryDirectory(prefix="attnprof-trial-") as tmp:
        request = Path(tmp) / "request.json"
        request.write_bytes(
            encode_json({"workload": workload.to_record(), "variant": spec, "options": options})
        )
        timeout = opts.variant_timeout_s or None
        # a session of its own: on a timeout the whole group goes (a variant's own children
        # too), and the parent's Ctrl-C ends it through the finally below
        proc = subprocess.Popen(
            [sys.executable, "-m", "attnprof.harness.trial_child", str(request)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return TrialFailure(
                status="timeout",
                reason=f"{variant.label} did not finish its trial run within --timeout {opts.variant_timeout_s:g} s "
                "(killed); give a longer --timeout if it is only slow",
            )
        finally:
            if proc.poll() is None:
                _kill(proc)
        if DONE in stdout:  # run_variant returned (a poisoned context may fail the exit after it)
            sticky = _sticky(stdout)
            if sticky is not None:
                return sticky
            if proc.returncode == 0:
                return None
        tail = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
        said = f"; its last words: {tail[:200]}" if tail else ""
        return TrialFailure(
            status="crashed",
            reason=f"{variant.label} {_describe(proc.returncode)} in its trial run in a separate process{said}",
        )
