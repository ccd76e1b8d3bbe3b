"""``python -m tb_profiler.cli ...``: the tb-profiler command (tests and the browser
fixtures start servers this way)."""
import sys

from tb_profiler.cli import main

sys.exit(main())
