"""Export stored results as csv, json or parquet (parquet needs pyarrow: the `parquet` extra).

csv and parquet hold one flat row per job; json also holds each job's raw timing samples when
asked (they are long). Columns are StoredResult's fields, in its order, so exports of different
stores line up.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path

from attnprof.errors import UserError
from attnprof.extras import load, require
from attnprof.outputs import atomic_path, write_atomic
from attnprof.store.rows import StoredResult

__all__ = ["FORMATS", "export_rows"]

FORMATS = ("table", "csv", "json", "parquet")


def export_rows(
    rows: Sequence[StoredResult], fmt: str, *, path: Path | None = None, samples: bool = False
) -> str | None:
    """Write rows as fmt to path, or return the text (csv, json) when path is None."""
    if fmt == "parquet":
        if path is None:
            raise UserError("--format parquet writes a binary file: pass --output FILE.parquet")
        require("pyarrow", "--format parquet")
        pd = load("pandas", "--format parquet", extra="parquet")

        frame = pd.DataFrame(
            [r.flat(samples=samples) for r in rows], columns=StoredResult.flat_columns(samples)
        )
        with atomic_path(path, option="-o/--output") as tmp:
            frame.to_parquet(tmp, index=False)
        return None
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=StoredResult.flat_columns(), lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow(r.flat())
        text = buf.getvalue()
    elif fmt == "json":
        text = json.dumps([r.flat(samples=samples) for r in rows], indent=2) + "\n"
    else:
        raise UserError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    if path is not None:
        write_atomic(path, text, option="-o/--output")
        return None
    return text
