"""python -m attnprof, and the `attnprof` command (pyproject.toml's script entry point)."""

import sys

from attnprof.launch import is_short, prepare_short


def main() -> int:
    try:
        args = sys.argv[1:]
        # the command line's import (typer, rich, the CLI's modules) takes a noticeable moment,
        # and a short command forks the decoder of its large trace before it (attnprof.launch);
        # a Ctrl-C inside either is still "interrupted", exit 130, not a traceback, for the
        # installed command as for python -m
        try:
            if is_short(args):
                prepare_short()
                from attnprof.trace.forked import start_early

                start_early(args)  # decodes a large trace's second part while the CLI imports
            from attnprof.cli import main as cli_main
        except KeyboardInterrupt:
            sys.stderr.write("attnprof: interrupted before the command started; nothing was written\n")
            raise SystemExit(130) from None
        return cli_main()  # it raises SystemExit with the exit code itself
    finally:
        _forget_caught_interrupts()


def _forget_caught_interrupts() -> None:
    """Keep the exit code the command chose after a Ctrl-C it caught, under `python -m`.

    CPython (seen on 3.11; 3.12's source does the same) marks the process as stopped by an unhandled Ctrl-C when a
    KeyboardInterrupt ends any exec or eval of a string: a dataclass or namedtuple being made
    (at import, or lazily in torch) when Ctrl-C lands. The mark stays when the interrupt is
    caught, and `python -m` then ends the process by SIGINT (exit status -2) in place of our
    130, with run.json already written. Each string exec clears the mark at its start, so an
    empty one here clears it; an interrupt that really escapes sets it again after this."""
    exec("")  # a constant empty string: nothing runs


if __name__ == "__main__":
    sys.exit(main())
