"""`attnprof report`'s request: what is reported, in which format and language, and where to.

A report's source is a run directory (or a folder of them, for scaling), a trace file alone, or
a sweep's results store (`--store FILE`, or the store given as the path). Each option applies on
every route it is accepted on or is refused here with one line:

- --format: html or md; without it, md for an -o file ending in .md or .markdown, else html (a
  format given wins over the file's name).
- --summary-only: the bullet summary, which is Markdown: with --format html it is refused.
- --expect: a run directory's or a trace's expectations; a store has none, so it is refused there
  (`auto` and `none` say nothing and pass).
- --baseline: the variant a run's (or a trace's) rows are compared against; a store ranks by
  bucket, so it is refused there.
- -o/--output: a file (written whole or not at all, never over an input) or `-` for stdout.
  Without it, HTML goes beside the source (RUN_DIR/report.<lang>.html; a trace file or a store:
  <name>.report.<lang>.html next to it) and Markdown to stdout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from attnprof.errors import UserError

if TYPE_CHECKING:
    from attnprof.report.i18n import Translator

__all__ = ["ReportRequest", "ReportText"]

_MD = (".md", ".markdown")


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    """A report to write, checked (build it with from_flags)."""

    source: Path  # a run directory, a folder of them, a trace file, or a store (store=True)
    store: bool
    fmt: str  # "html" or "md"
    summary_only: bool
    lang: str
    target: Path | None  # the file to write; None: stdout
    expect: str | None  # None: no expectations
    baseline: str | None

    @classmethod
    def from_flags(
        cls,
        run_dir: Path | None,
        *,
        store: Path | None = None,
        fmt: str | None = None,
        lang: str = "en",
        output: Path | None = None,
        summary_only: bool = False,
        expect: str = "auto",
        baseline: str | None = None,
    ) -> ReportRequest:
        """The request, or UserError naming the first flag that is wrong or cannot apply here."""
        from attnprof.outputs import refuse_inputs
        from attnprof.report.i18n import Translator
        from attnprof.store import is_store_file

        if store is None and run_dir is not None and is_store_file(run_dir):
            run_dir, store = None, run_dir  # a sweep's store given as the path: report it as one
        if (run_dir is None) == (store is None):
            raise UserError(
                "give either a run directory or --store FILE, not both"
                if run_dir is not None
                else "give a run directory to report, or --store FILE for a sweep's results store"
            )
        to_stdout = output is not None and str(output) == "-"
        suffix = output.suffix.lower() if output is not None and not to_stdout else ""
        if fmt is not None and fmt not in ("html", "md"):
            raise UserError(f"--format {fmt!r}: use html or md")
        if summary_only and fmt == "html":
            raise UserError(
                "--summary-only writes the Markdown summary: drop --format html (or --summary-only)"
            )
        if fmt is None:
            # `-o report.md` means Markdown: writing HTML into a .md file would surprise everyone
            fmt = "md" if summary_only or suffix in _MD else "html"
        t = Translator(lang)  # an unknown language fails before any work
        source = store if store is not None else run_dir
        assert source is not None
        refuse_inputs(output, [source], option="-o/--output")
        if store is not None:
            if expect not in ("auto", "none"):
                raise UserError(f"--expect {expect} applies to a run directory or a trace, not to --store")
            if baseline is not None:
                raise UserError("--baseline applies to a run directory or a trace, not to --store")
        return cls(
            source=source,
            store=store is not None,
            fmt=fmt,
            summary_only=summary_only,
            lang=t.lang,
            target=None
            if to_stdout
            else output
            if output is not None
            else _default_target(source, fmt, t.lang),
            expect=None if expect == "none" or store is not None else expect,
            baseline=baseline,
        )

    def render(self) -> ReportText:
        """The report's text, and where it goes."""
        from attnprof.report.i18n import Translator

        t = Translator(self.lang)
        return ReportText(self._store(t) if self.store else self._run(t), self.target)

    def _run(self, t: Translator) -> str:
        from attnprof.report.data import build_report_data

        data = build_report_data(self.source, expect=self.expect, baseline=self.baseline)
        # links are relative to the folder the report lands in (stdout: the run's, or the trace's)
        here = self.target.parent if self.target is not None else _folder(self.source)
        if self.summary_only:
            from attnprof.report.markdown import summary_markdown

            return summary_markdown(data, t)
        if self.fmt == "md":
            from attnprof.report.markdown import render_markdown

            return render_markdown(data, t, out_dir=here)
        from attnprof.report.html import render_html

        return render_html(data, t, out_dir=here)

    def _store(self, t: Translator) -> str:
        from attnprof.report.store_report import (
            build_store_report_data,
            render_store_html,
            render_store_markdown,
            store_summary,
        )

        data = build_store_report_data(self.source)
        if self.summary_only:
            return "".join(f"- {line}\n" for line in store_summary(data, t))
        return render_store_markdown(data, t) if self.fmt == "md" else render_store_html(data, t)


@dataclass(frozen=True)
class ReportText:
    text: str
    target: Path | None  # None: stdout


def _default_target(source: Path, fmt: str, lang: str) -> Path | None:
    """HTML beside its source; Markdown to stdout."""
    if fmt == "md":
        return None
    if source.is_dir() or source.name == "run.json":
        return _folder(source) / f"report.{lang}.html"
    stem = source.name.removesuffix(".gz").removesuffix(".json")
    if source.suffix == ".db" or stem == source.name:
        stem = source.stem
    return source.with_name(f"{stem}.report.{lang}.html")


def _folder(source: Path) -> Path:
    return source if source.is_dir() else source.parent
