"""python -m attnprof"""

import sys

try:
    from attnprof.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing the command line
    sys.stderr.write("attnprof: interrupted before the command started; nothing was written\n")
    raise SystemExit(130) from None

main()
