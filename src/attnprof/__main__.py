"""python -m attnprof, and the `attnprof` command (pyproject.toml's script entry point)."""

import sys


def main() -> int:
    # the command line's import (typer, rich, the CLI's modules) takes a noticeable moment; a
    # Ctrl-C inside it is still "interrupted", exit 130, not a traceback, for the installed
    # command as for python -m
    try:
        from attnprof.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("attnprof: interrupted before the command started; nothing was written\n")
        raise SystemExit(130) from None
    return cli_main()  # it raises SystemExit with the exit code itself


if __name__ == "__main__":
    sys.exit(main())
