"""The child process of a user variant's trial run (attnprof.harness.isolate): reads the request
file, runs the variant through run_variant, and prints DONE when it returned (then, after a
sticky CUDA error, STICKY with the variant's status and reason). A module of its own, so that
isolate (which harness/prepare.py imports) does not import run back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from attnprof.harness.cuda import is_sticky, unusable
from attnprof.harness.isolate import DONE, STICKY
from attnprof.harness.options import RunOptions

__all__: list[str] = []


def _child(request: Path) -> None:
    from attnprof.harness.run import run_variant
    from attnprof.records import WorkloadRecord
    from attnprof.variants.registry import get_variant
    from attnprof.workload import Workload

    data = json.loads(request.read_text())
    workload = Workload.from_record(msgspec.convert(data["workload"], type=WorkloadRecord))
    options = msgspec.convert(data["options"], type=RunOptions)
    result = run_variant(workload, get_variant(data["variant"]), out=None, options=options)
    sys.stdout.write(DONE + "\n")
    if result.status in ("error", "oom") and (
        is_sticky(result.reason or "") or unusable(workload.device)
    ):  # the parent must not run it again in its own process (harness/isolate.py)
        sys.stdout.write(STICKY + json.dumps({"status": result.status, "reason": result.reason}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
