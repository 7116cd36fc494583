"""`python -m ckprof.cli ...` is `ckprof ...` (tests and launchers such as torchrun use it)."""

from . import main

main()
