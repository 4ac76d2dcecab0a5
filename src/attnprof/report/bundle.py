"""One archive of a run: run.json, traces, tables and the HTML report, ready to attach or upload.

A zip (GitHub issues take .zip attachments; `huggingface-cli upload` takes any file), with the
run's files under one top folder named like the run directory, so it unpacks into a run
directory that `attnprof compare`, `report` and `analyze` read as they read the original. The
HTML report is rendered fresh (links to the traces are relative, so they still work once
unpacked). The run directory itself is not changed. Traces are already gzip: they are stored,
not compressed again.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import msgspec

from attnprof.errors import UserError
from attnprof.outputs import atomic_path, path_error, refuse_inputs

__all__ = ["BundleInfo", "write_bundle"]

_PARTS = ("traces", "tables")


class BundleInfo(msgspec.Struct, kw_only=True):
    path: str
    files: list[str]  # names inside the archive
    bytes: int


def write_bundle(
    run_dir: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    lang: str = "en",
    force: bool = False,
) -> BundleInfo:
    """Write <run_dir>.zip (or out); refuse to overwrite an existing file unless force."""
    from attnprof.report.data import build_report_data
    from attnprof.report.html import render_html
    from attnprof.report.i18n import Translator

    run = Path(run_dir)
    if not (run / "run.json").is_file():
        raise UserError(f"{run}: no run.json, so not a run directory (give the folder `attnprof run` wrote)")
    t = Translator(lang)
    target = Path(out) if out is not None else run.resolve().with_suffix(".zip")
    refuse_inputs(target, [run], option="-o/--output")
    if target.exists() and not force:
        raise UserError(f"{target}: already exists; give another path with -o, or --force to replace it")
    html = render_html(build_report_data(run, expect="auto", baseline=None), t, out_dir=run)
    top = run.resolve().name
    members = [run / "run.json"]
    for part in _PARTS:
        if (run / part).is_dir():
            members += sorted(p for p in (run / part).rglob("*") if p.is_file())
    names = []
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise path_error(target, exc, option="-o/--output") from None
    with atomic_path(target, option="-o/--output") as tmp, zipfile.ZipFile(tmp, "w") as zf:
        for p in members:
            name = f"{top}/{p.relative_to(run).as_posix()}"
            packed = p.name.endswith(".gz")
            zf.write(p, name, compress_type=zipfile.ZIP_STORED if packed else zipfile.ZIP_DEFLATED)
            names.append(name)
        name = f"{top}/report.{t.lang}.html"
        zf.writestr(name, html, compress_type=zipfile.ZIP_DEFLATED)
        names.append(name)
    return BundleInfo(path=str(target), files=names, bytes=target.stat().st_size)
