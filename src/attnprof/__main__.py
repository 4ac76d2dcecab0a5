"""python -m attnprof"""

from attnprof.cli import main

main()
