"""The `attnprof` command: a thin typer layer over the library.

Each subcommand lives in its own module under attnprof.cli and registers itself on `app`.
The library raises; only main() prints errors and maps them to exit codes:
0 ok, 1 internal error (traceback with --debug), 2 bad input (one line), 3 expectation mismatch.
"""

from __future__ import annotations

import codecs
import errno
import os
import signal
import sys
import threading
import traceback

import typer

try:  # typer >= 0.20 vendors click as typer._click; older ones depend on click
    from typer._click import exceptions as _cx  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    from click import exceptions as _cx  # type: ignore[no-redef]

from attnprof.errors import AttnprofError, Interrupted
from attnprof.launch import is_short, prepare_short
from attnprof.units import ascii_spelling

__all__ = ["app", "invoked_args", "main"]

app = typer.Typer(
    name="attnprof",
    help="Profile attention implementations in PyTorch and explain what the profiler shows.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


def _show_version(value: bool) -> None:
    if value:
        from attnprof._version import __version__

        sys.stdout.write(f"attnprof {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(
        False, "--debug", help="Show full tracebacks for internal errors (accepted anywhere on the line)."
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_show_version, help="Print attnprof's version and exit."
    ),
) -> None:
    """attnprof: run, analyse, compare and report on attention implementations."""
    _state["debug"] = _state["debug"] or debug or bool(os.environ.get("ATTNPROF_DEBUG"))


# command -> the module that defines it
_COMMANDS = {
    "run": "run",
    "list": "run",
    "analyze": "analyze",
    "compare": "compare",
    "report": "compare",
    "sweep": "sweep",
    "results": "sweep",
    "recommend": "sweep",
    "bundle": "bundle",
    "model": "model",
    "env": "env",
}


def _register(args: list[str] | None = None) -> None:
    # Imported for their side effect of adding commands to `app`. Kept lazy-light: the modules
    # import heavy libraries (torch) inside the command functions, not at import time, so that
    # `attnprof analyze` never pays for torch. When the command is known from the line, only its
    # module is imported: typer builds (and type-checks) the options of every registered command
    # on each call, which costs a small trace's analysis several times over.
    import importlib

    first = next((a for a in args or [] if not a.startswith("-")), None)
    names = [_COMMANDS[first]] if first in _COMMANDS else list(dict.fromkeys(_COMMANDS.values()))
    for name in names:
        try:
            importlib.import_module(f"attnprof.cli.{name}")
        except ModuleNotFoundError as exc:  # a subcommand module not written yet
            if exc.name != f"attnprof.cli.{name}":
                raise
    from attnprof.cli.help import hide_aliases_in_help

    hide_aliases_in_help(app)


def _err(message: str) -> None:
    sys.stderr.write(f"attnprof: error: {message}\n")


# Output in a locale that cannot write µ, ±, × or arrows gets units.ASCII_SPELLINGS instead of
# a UnicodeEncodeError (tables are spelled so before their layout: report/console.py)
def _to_ascii(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeEncodeError):
        raise err
    text = err.object[err.start : err.end]
    return "".join(ascii_spelling(c) for c in text), err.end


codecs.register_error("attnprof-ascii", _to_ascii)


def _fit_streams_to_locale() -> None:
    """Let stdout and stderr write what attnprof prints in whatever encoding they have."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "µ±×→…".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="attnprof-ascii")


# a write with no file name that failed for want of space: the output stream (`> /dev/full`);
# attnprof's own files name their path (attnprof.outputs)
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _stdout_broken() -> bool:
    """Whether stdout is what failed: what it still buffers cannot be written either."""
    try:
        sys.stdout.flush()
    except OSError:
        return True
    except ValueError:  # closed
        return False
    return False


def _stdout_failed(exc: OSError) -> int:
    """stdout itself cannot be written (`> /dev/full`): one line, exit 2. What is still buffered
    goes to /dev/null, so that the interpreter's own flush at exit does not fail again."""
    said = (exc.strerror or str(exc)).lower()
    _err(f"cannot write the output ({said}): free some space, or send the output to another file or disk")
    _stdout_to_devnull()
    return 2


_invoked: list[str] = []


def invoked_args() -> list[str]:
    """The arguments of the command being run (without --debug), to print a command that resumes it."""
    return list(_invoked)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


# Commands that write their output files only once their work is done, each atomically
# (attnprof.outputs): a Ctrl-C before the end leaves no file of theirs, new or half-written
_WRITE_AT_END = {"analyze", "compare", "report", "results", "recommend", "bundle", "list"}


def _say_interrupted(args: list[str]) -> None:
    """One line for a Ctrl-C that no command turned into its own message (run and sweep say
    what they kept; a run stopped before its first variant leaves no directory)."""
    command = next((a for a in args if not a.startswith("-")), "")
    kept = "; no output file was written" if command in _WRITE_AT_END else ""
    sys.stderr.write(f"attnprof: interrupted{kept}\n")


def _internal(exc: BaseException, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    _err(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)")
    return 1


def _exit_now(code: int) -> None:
    """os._exit once what an exit must do is done: the streams flushed and the atexit functions
    run. Not where another non-daemon thread is still running (an exit would wait for it)."""
    import atexit

    if any(t is not threading.main_thread() and not t.daemon for t in threading.enumerate()):
        return
    sys.stderr.flush()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _stdout_to_devnull() -> None:
    """What stdout still buffers goes to /dev/null, so that later flushes (ours, the interpreter's
    at exit) do not fail again on a full or closed stdout."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # a short process (attnprof.launch): its start trimmed, and its exit (_exit_now)
    short = argv is None and is_short(args)
    if short:
        prepare_short()
    # --debug is a root option, but people type it after the subcommand too (and the internal
    # error hint below says "rerun with --debug"): take it from anywhere before a "--".
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end] or bool(os.environ.get("ATTNPROF_DEBUG"))
    args = [a for a in args[:end] if a != "--debug"] + args[end:]
    _state["debug"] = debug
    _invoked[:] = args
    # every command takes --no-color; seen here too, it also covers typer's --help and usage text.
    # Only then is the console module imported: `analyze --json` never loads rich
    plain = "--no-color" in args[:end]
    if plain or os.environ.get("NO_COLOR"):
        from attnprof.report.console import set_no_color

        set_no_color(plain)
    _fit_streams_to_locale()
    # SIGTERM (kill, a scheduler's timeout) stops a run or sweep like Ctrl-C: what finished is
    # saved and the resume command printed. Only the main thread can set handlers.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        _register(args)  # in the try: Ctrl-C while importing is still "interrupted", exit 130
        rv = app(args=args, prog_name="attnprof", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
        if code == 130:  # typer returns a Ctrl-C as a silent 130 (no command returns 130 itself)
            _say_interrupted(args)
        if argv is None:
            sys.stdout.flush()  # here, so that a full or closed stdout is answered like any error
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
    except Interrupted as exc:
        sys.stderr.write(f"attnprof: {exc}\n")
        code = exc.exit_code
    except AttnprofError as exc:
        _err(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        code = exc.exit_code
    except KeyboardInterrupt:
        _say_interrupted(args)
        code = 130
    except BrokenPipeError:
        # the reader stopped early (`| head`): what stdout still buffers goes to /dev/null, so
        # that the flushes below and at exit do not fail again
        _stdout_to_devnull()
        code = 0
    except SystemExit as exc:
        # click and rich answer a closed stdout (EPIPE) themselves with exit 1, our internal-error
        # code: click wraps stdout so later flushes are silent, rich raises from the BrokenPipeError.
        # A reader that stopped early (`| head`) is no error
        pacified = type(sys.stdout).__name__.endswith("PacifyFlushWrapper")
        if pacified or isinstance(exc.__context__, BrokenPipeError):
            _stdout_to_devnull()
            code = 0
        else:
            raise
    except OSError as exc:
        from attnprof.outputs import PATH_ERRNOS, os_error_line

        if exc.errno in PATH_ERRNOS and exc.filename:
            # a path the user chose cannot be written (or read): their input, not our bug
            _err(os_error_line(exc))
            code = 2
        elif exc.filename is None and (exc.errno in _FULL or _stdout_broken()):
            code = _stdout_failed(exc)
        else:
            code = _internal(exc, debug)
    except ModuleNotFoundError as exc:
        # an optional package missing on a path that did not check first: still the one-line
        # install hint (exit 2), not an internal error
        from attnprof.extras import missing_extra

        command = next((a for a in args if not a.startswith("-")), "")
        extra = missing_extra(exc, f"attnprof {command}".rstrip())
        if extra is None:
            code = _internal(exc, debug)
        else:
            _err(str(extra))
            code = extra.exit_code
    except Exception as exc:
        code = _internal(exc, debug)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if plain:  # an in-process caller's next command starts with colours again
            from attnprof.report.console import set_no_color

            set_no_color(False)
    if argv is None:
        sys.stdout.flush()
        if short:
            _exit_now(code)
        raise SystemExit(code)
    return code
