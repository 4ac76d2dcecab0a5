"""`attnprof bundle RUN_DIR`: one archive of a run (run.json, traces, tables, HTML report)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from attnprof.cli import app
from attnprof.units import fmt_num

__all__ = ["bundle_command"]


@app.command("bundle")
def bundle_command(
    run_dir: Path = typer.Argument(..., help="A run directory, as `attnprof run` writes it."),
    output: Path | None = typer.Option(
        None, "-o", "--output", "--out", help="The archive to write (default: <RUN_DIR>.zip beside the run)."
    ),
    lang: str = typer.Option("en", "--lang", help="Language of the HTML report: en, id or th."),
    force: bool = typer.Option(False, "--force", help="Replace an existing archive."),
) -> None:
    """Write one .zip with run.json, the traces, the tables and the HTML report, ready to attach
    to an issue or upload (e.g. `huggingface-cli upload`)."""
    from attnprof.report.bundle import write_bundle

    info = write_bundle(run_dir, output, lang=lang, force=force)
    sys.stdout.write(f"{info.path} ({len(info.files)} files, {fmt_num(info.bytes / 1e6, '.1f')} MB)\n")
