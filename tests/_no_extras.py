"""Run `attnprof ARGS...` as if torch, pandas and matplotlib were not installed.

    python tests/_no_extras.py REPORT.json ARGS...
    python tests/_no_extras.py REPORT.json -c CODE      (Python code instead of the CLI)

The path finder is wrapped so that these packages are not found: `import torch` fails with the
same ModuleNotFoundError a venv without them gives, and importlib.util.find_spec returns None.
Every name looked up is written to REPORT.json ("attempted"), with those that got loaded
("loaded", which must stay empty), when the command exits.
"""

from __future__ import annotations

import atexit
import json
import sys
from importlib.machinery import PathFinder
from typing import Any

BLOCKED = ("torch", "pandas", "matplotlib")
_attempted: set[str] = set()


class _WithoutExtras:
    """sys.meta_path's PathFinder, blind to the blocked packages."""

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> Any:
        if name.partition(".")[0] in BLOCKED:
            _attempted.add(name)
            return None
        return PathFinder.find_spec(name, path, target)

    @classmethod
    def invalidate_caches(cls) -> None:
        PathFinder.invalidate_caches()


def _report(path: str) -> None:
    loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
    with open(path, "w") as fh:
        json.dump({"attempted": sorted(_attempted), "loaded": loaded}, fh)


if __name__ == "__main__":
    if any(m.partition(".")[0] in BLOCKED for m in sys.modules):
        raise SystemExit("a blocked package was imported before the finder was installed")
    sys.meta_path[:] = [_WithoutExtras if f is PathFinder else f for f in sys.meta_path]
    if _WithoutExtras not in sys.meta_path:
        raise SystemExit("no PathFinder on sys.meta_path to wrap")
    atexit.register(_report, sys.argv[1])
    if sys.argv[2] == "-c":
        exec(compile(sys.argv[3], "<-c>", "exec"), {"__name__": "__main__"})
    else:
        from attnprof.cli import main

        raise SystemExit(main(sys.argv[2:]))
