"""`python -m ckprof` is the `ckprof` command."""

from ckprof.cli import main

main()
