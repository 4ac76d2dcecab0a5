"""The `attnprof` command: a thin typer layer over the library.

Each subcommand lives in its own module under attnprof.cli and registers itself on `app`.
The library raises; only main() prints errors and maps them to exit codes:
0 ok, 1 internal error (traceback with --debug), 2 bad input (one line), 3 expectation mismatch.
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

try:  # typer >= 0.20 vendors click as typer._click; older ones depend on click
    from typer._click import exceptions as _cx  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    from click import exceptions as _cx  # type: ignore[no-redef]

from attnprof.errors import AttnprofError

__all__ = ["app", "main"]

app = typer.Typer(
    name="attnprof",
    help="Profile attention implementations in PyTorch and explain what the profiler shows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks for internal errors."),
) -> None:
    """attnprof: run, analyse, compare and report on attention implementations."""
    _state["debug"] = debug or bool(os.environ.get("ATTNPROF_DEBUG"))


def _register() -> None:
    # Imported for their side effect of adding commands to `app`. Kept lazy-light: the modules
    # import heavy libraries (torch) inside the command functions, not at import time, so that
    # `attnprof analyze` never pays for torch.
    import importlib

    for name in ("run", "analyze", "compare", "sweep"):
        try:
            importlib.import_module(f"attnprof.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand module not written yet
            if exc.name != f"attnprof.cli.{name}":
                raise


def _err(message: str) -> None:
    sys.stderr.write(f"attnprof: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    _register()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or bool(os.environ.get("ATTNPROF_DEBUG"))
    try:
        rv = app(args=args, prog_name="attnprof", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        _err("aborted")
        code = 130
    except _cx.NoArgsIsHelpError:
        code = 0  # help was printed
    except _cx.ClickException as exc:
        # usage errors: one line, exit 2 (click prints a usage block; we keep it to one line)
        msg = exc.format_message().replace("\n", " ")
        ctx = getattr(exc, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        _err(f"{msg}{hint}")
        code = exc.exit_code
    except AttnprofError as exc:
        _err(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        code = exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        code = 130
    except BrokenPipeError:
        code = 0
    except Exception as exc:
        if debug:
            traceback.print_exc()
        _err(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)")
        code = 1
    if argv is None:
        sys.stdout.flush()
        raise SystemExit(code)
    return code
