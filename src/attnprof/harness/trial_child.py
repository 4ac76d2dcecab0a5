"""The child process of a user variant's trial run (attnprof.harness.isolate): reads the request
file, runs the variant through run_variant, and prints DONE when it returned. A module of its
own, so that isolate (which harness/prepare.py imports) does not import run back."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import msgspec

from attnprof.harness.isolate import DONE
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
    run_variant(workload, get_variant(data["variant"]), out=None, options=options)
    sys.stdout.write(DONE + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
